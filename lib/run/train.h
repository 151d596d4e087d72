// The training-run loop: what megatron-run does on every rank once the process groups are up, from the typed
// view of the resolved arguments (config/args.h). Its parts: run/buffers.h, run/grad_sync.h, run/step.h, run/log.h;
// everything they do on the buffers goes through the device-neutral run/backend.h (the CPU backend with
// --distributed-backend gloo, the CUDA backend with nccl).
//
// There is no model forward/backward in megatron-run (that is Megatron's Python); the run drives everything
// around it with synthetic gradients, at the model's real size and layout:
//   - this rank's parameters of the GPT model the arguments describe (run/model.h), in Megatron's precision
//     layout: fp32 params, or bf16/fp16 model params with fp32 main params; the distributed optimizer's
//     sharding of main params and optimizer states over the data-parallel ranks (--use-distributed-optimizer);
//   - per iteration, a gradient of the synthetic objective 0.5 * mean((p - target)^2) with a per-sample noise,
//     built so that every layout gets the same bits (run/synthetic_grad.h: each sample of the global batch
//     contributes, the sums are exact in fp32), scaled by the loss scale under fp16; the loss and the gradient
//     norm are summed in fixed point (run/exact_stats.h), so they too are the same bits under every layout;
//   - Megatron's step: the tied-embedding gradient sum over the embedding group, the data-parallel all-reduce
//     (or reduce-scatter), unscale + inf/NaN check and the dynamic loss scaler (skipped iterations), the global
//     gradient norm and clipping (--clip-grad), the optimizer step with our kernels (adam, sgd, lion, muon,
//     adaptive_muon) and Megatron's
//     parameter groups (no weight decay for biases and 1-D params, --decoupled-lr for embeddings and output),
//     the learning-rate / weight-decay schedule, the parameter all-gather of the distributed optimizer;
//   - a Megatron-style log line every --log-interval iterations (on the last rank), and at the end a check that
//     every data-parallel replica holds the same parameters and a checksum of the whole model that does not
//     depend on the layout (with the last loss and grad norm as hex floats, to compare runs bit for bit).
//   - MoE: routed experts sum their gradients over the expert data-parallel group (each member the samples of
//     its share of the global batch), and the norm covers the dense part and the experts, each element once.
// Limits (RunError naming the flag, run/run_support.h): the model limits of run/model.h; optimizers other than adam,
// sgd, lion, muon and adaptive_muon; every optimizer but adam and sgd with fp16; --muon-tp-mode auto under tensor
// parallelism.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "config/args.h"
#include "config/target_env.h"
#include "distributed/runtime.h"

namespace mr::run {

struct TrainResult {
  int64_t iterations = 0;          // the iteration the run ended at (counting the loaded checkpoint's)
  int64_t ran = 0;                 // iterations this process ran (0: a loaded checkpoint was at --train-iters)
  int64_t skipped = 0;             // iterations whose gradients held inf/NaN (fp16 loss scaling)
  int64_t passed_over = 0;         // iterations of this process that --iterations-to-skip skipped entirely
  bool skipped_train = false;      // --skip-train: no iteration ran, nothing was saved
  double first_loss = 0, last_loss = 0;
  double last_grad_norm = 0;        // of the last step taken (not of a skipped iteration after it)
  bool stepped = false;             // a step was taken (else every iteration of this process was skipped)
  uint64_t params_checksum = 0;    // the whole model after the last step, the same under every layout (model_checksum)
};

// Knobs for tests (environment): MR_RUN_NONFINITE_AT=I[,J...] puts an inf into rank 0's gradients at those
// iterations (1-based), to exercise the loss scaler's skip path; MR_RUN_DIVERGE_AT=I[,J...] changes a reduced
// gradient on data-parallel rank 1 at those iterations (without the distributed optimizer its replica then drifts),
// to exercise the replica checks. `target`: the environment the arguments were
// validated for (--target-te-version decides whether bf16 params keep their fp32 masters as remainders).
TrainResult train(distributed::Runtime& rt, const Args& args, std::ostream& log, const std::string& prefix,
                  const TargetEnv& target = {});

}  // namespace mr::run
