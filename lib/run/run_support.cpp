// What the training run refuses before it starts (run/run_support.h).
#include "run/run_support.h"

#include <algorithm>
#include <optional>
#include <string>

#include "optim/optimizer_table.h"
#include "run/batch_schedule.h"
#include "run/model.h"

namespace mr::run {

const Rule kHostMemoryRule{
    "run.host-memory", Rule::Level::Error,
    "The training run's buffers (parameters, gradients, main params, optimizer state), times the ranks on this "
    "machine, do not fit its available memory: refused on every rank before they are allocated.",
    __FILE__, __LINE__, kStageRun};
const Rule kDeviceMemoryRule{
    "run.device-memory", Rule::Level::Error,
    "The training run's buffers do not fit the free memory of this rank's GPU (less a reserve): refused before "
    "they are allocated, naming the GPU and each buffer's size.",
    __FILE__, __LINE__, kStageRun};
const Rule kNanCheckRule{
    "run.nan-check", Rule::Level::Error,
    "--check-for-nan-in-loss-and-grad (Megatron's default) and a NaN or Inf in the loss or the gradients: the run "
    "stops on every rank at that iteration (--no-check-for-nan-in-loss-and-grad goes on and logs it).",
    __FILE__, __LINE__, kStageRun};
const Rule kReplicaDivergenceRule{
    "run.replica-divergence", Rule::Level::Error,
    "Replicas that should hold the same parameters (data-parallel copies, the two copies of tied word embeddings) "
    "differ at the end of the run or where --check-weight-hash-across-dp-replicas-interval compares them: the run "
    "stops (exit 1) naming the ranks.",
    __FILE__, __LINE__, kStageRun};

void check_run_supported(const Args& args) {
  const optim::OptimizerInfo& opt = optim::optimizer_info(args.optimizer);
  const std::string name(arg::to_string(args.optimizer));
  if (opt.kernel == optim::Kernel::None) {
    std::string stepped;  // the optimizer table's rows with a kernel
    for (const optim::OptimizerInfo& o : optim::kOptimizers)
      if (o.kernel != optim::Kernel::None) stepped += (stepped.empty() ? "" : ", ") + std::string(o.name);
    throw RunError("the training run steps " + stepped + "; --optimizer " + name + " is not supported yet");
  }
  const bool muon = opt.kernel == optim::Kernel::Muon;
  // Every optimizer but adam and sgd takes Megatron's emerging-optimizer path (lion included), which refuses fp16.
  // Validation refuses it first (init.emerging-optimizer-fp16, config/validate/init_optimizer.cpp); this is the
  // worker's own guard.
  const bool emerging = args.optimizer != arg::Optimizer::adam && args.optimizer != arg::Optimizer::sgd;
  if (emerging && args.fp16)
    throw RunError("--optimizer " + name + " does not run with --fp16 (Megatron refuses an emerging optimizer with fp16)");
  // auto picks duplicated or distributed per weight by a rule the spec does not give: with no matrix split over TP
  // (TP and expert TP of one) every mode is each rank's whole-matrix Newton-Schulz, which the run does; across a TP
  // group it is not implemented. (layer_sharded runs with any TP size: optim/muon.h.)
  const int64_t tp = std::max<int64_t>(1, args.tensor_model_parallel_size);
  const int64_t etp = std::max<int64_t>(1, args.expert_tensor_parallel_size);
  if (muon && args.muon_tp_mode == arg::MuonTpMode::auto_ && (tp > 1 || (args.num_experts.value_or(0) > 0 && etp > 1)))
    throw RunError("--muon-tp-mode auto is implemented by the training run without tensor parallelism only "
                   "(--tensor-model-parallel-size " + std::to_string(tp) + ", --expert-tensor-parallel-size " +
                   std::to_string(etp) + "); blockwise, duplicated, distributed and layer_sharded run with any "
                   "TP size");
  // --embedding-min-norm: Megatron applies it in the distributed optimizer only (OptimizerConfig: "requires the
  // distributed optimizer"; --optimizer dist_muon is its deprecated spelling of muon with it), on the fp32 master.
  if (args.embedding_min_norm && !args.use_distributed_optimizer && args.optimizer != arg::Optimizer::dist_muon)
    throw RunError("--embedding-min-norm requires --use-distributed-optimizer (Megatron rescales the embedding rows "
                   "in the distributed optimizer's step)");
  if (args.embedding_min_norm && args.use_precision_aware_optimizer && args.optimizer == arg::Optimizer::adam &&
      args.main_params_dtype == arg::MainParamsDtype::fp16 && (args.bf16 || args.fp16))
    throw RunError("--embedding-min-norm rescales fp32 main params; the training run does not rescale the fp16 main "
                   "params of --main-params-dtype fp16");
  // The batch of each step (--rampup-batch-size is ignored, as by Megatron: deprecated).
  const BatchSchedule batches = BatchSchedule::from(args);
  // A fresh run's first step must fit the layout; a resumed run is checked at the step it resumes from (Megatron
  // checks the current step only: a schedule's early sizes may not fit a layout scaled up since).
  if (!args.load) (void)batches.at(0);
  if (batches.largest() >= (int64_t{1} << 26))
    throw RunError("the training run's synthetic gradient handles global batch sizes below 2^26 (67108864); it is " +
                   std::to_string(batches.largest()));
  if (!(args.train_iters && *args.train_iters > 0) && !args.train_samples)
    throw RunError("the training run needs --train-iters or --train-samples");
  // A negative iteration would make the consumed samples negative (Megatron takes N x the global batch as is).
  if (args.override_ckpt_iteration && *args.override_ckpt_iteration < 0)
    throw RunError("--override-ckpt-iteration " + std::to_string(*args.override_ckpt_iteration) +
                   ": the iteration a loaded checkpoint counts as saved at must be 0 or more");
  // --ckpt-convert-format: Megatron's setup_model_and_optimizer loads the checkpoint, saves it converted under
  // --ckpt-convert-save/<format> and exit()s: it never trains. The run writes only its own format and trains.
  if (args.ckpt_convert_format)
    throw RunError("--ckpt-convert-format " + std::string(arg::to_string(*args.ckpt_convert_format)) +
                   ": Megatron would convert the --load checkpoint to that format under --ckpt-convert-save and exit "
                   "without training; megatron-run's training run does not convert checkpoints (it reads and writes "
                   "only its own format), so it would train instead: leave --ckpt-convert-format out to train");
  // Megatron's train takes `iteration % interval` after the first iteration: 0 raises ZeroDivisionError there.
  // Validation refuses it first (init.weight-hash-interval-positive, config/validate/init_train_loop.cpp).
  if (args.check_weight_hash_across_dp_replicas_interval == 0)
    throw RunError("--check-weight-hash-across-dp-replicas-interval 0: Megatron's training loop divides by it "
                   "(ZeroDivisionError after the first iteration); give a positive number of iterations");
  // The model plan of every pipeline stage (TP rank 0: the stages differ in their layers, the TP ranks only in
  // their shards' values).
  const int64_t pp = std::max<int64_t>(1, args.pipeline_model_parallel_size);
  const int64_t ep = std::max<int64_t>(1, args.expert_model_parallel_size);
  for (int64_t p = 0; p < pp; ++p) {
    (void)plan_gpt_model(args, RankCoord{0, tp, p, pp, ep, 0, 0, 0});
  }
}

}  // namespace mr::run
