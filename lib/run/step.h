// The training run's optimizer step: the gradient norm and clipping (Megatron's chained optimizer for MoE), and
// the step of the optimizer table's kernel over Megatron's parameter groups. Internal to lib/run.
#pragma once

#include <cstdint>

#include "run/run_context.h"

namespace mr::run {

// Unscales this rank's gradients in place by the loss scaler's inverse scale (mixed precision with a scaler);
// whether its part held inf/NaN (before the reduction over the ranks).
bool unscale_and_check(RunContext& c);
// The global gradient norm (L2) of this iteration's gradients, clipped to --clip-grad when it is set: every
// element of the model once (dense and routed experts), summed in fixed point over the world (run/exact_stats.h),
// so the same bits under every layout; one clip coefficient for all.
double clip_grad_norm(RunContext& c);
// --log-num-zeros-in-grad: the gradient elements equal to zero, every element once (Megatron counts after the
// clip, in the optimizer step).
int64_t count_zeros_in_grad(RunContext& c);
// --log-params-norm: the L2 norm of the model's parameters (in the training dtype, every element once), exact
// as the gradient norm.
double params_norm(RunContext& c);

// The device scratch the CUDA Muon step takes for this run (optim::MuonDeviceWork over every Muon matrix of this
// rank's model part, the dense ones over the TP group, the experts over the expert TP group); 0 for the other
// optimizers. Counted in rule run.device-memory (FlatBuffers::muon_work_bytes).
double muon_device_work_bytes(const RunContext& c);

// One optimizer step (1-based `step_number`) at the schedule's current learning rate and weight decay.
void optimizer_step(RunContext& c, int64_t step_number);

}  // namespace mr::run
