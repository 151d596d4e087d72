// --skip-train and the run-level RL checks (seed arguments.py 1804-1820): skipping training never loads the
// optimizer; then RLConfig.validate_run checks the RL (GRPO) settings against the run's batch sizes, intervals,
// CUDA graphs and optimizer loading.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kSkipTrainNoLoadOptim, "skip-train.no-load-optim", "--skip-train turns on --no-load-optim.");
MR_RULE(kRlTrainingGraphs, "rl.training-cuda-graphs-need-graphs",
        "--rl-training-cuda-graphs needs CUDA graphs (--cuda-graph-impl other than none).");
MR_RULE(kRlPackingMbs, "rl.sequence-packing-micro-batch-size", "--rl-use-sequence-packing needs --micro-batch-size 1.");
MR_RULE(kRlSamplesPerGbs, "rl.samples-divisible-by-global-batch-size",
        "GRPO prompts per step x group size x iterations must be a multiple of --global-batch-size.");
MR_RULE(kRlExitInterval, "rl.exit-interval-divisible",
        "--exit-interval must be a multiple of the training iterations per RL inference step.");
MR_RULE(kRlSaveInterval, "rl.save-interval-divisible",
        "--save-interval must be a multiple of the training iterations per RL inference step.");
MR_RULE(kRlOffloadOptimizer, "rl.offload-optimizer-needs-optimizer",
        "--rl-offload-optimizer-during-inference needs an optimizer: not with --skip-train and --no-load-optim.");
MR_RULE(kRlOffloadInferenceWeights, "rl.offload-inference-weights-needs-separate-model",
        "--rl-offload-inference-model-weights-when-idle needs a separate RL inference model.");

namespace {

// Python's a % b for b > 0.
long long py_mod(long long a, long long b) {
  long long r = a % b;
  return r < 0 ? r + b : r;
}

// RLConfig.uses_separate_inference_model (not in the public Megatron-LM tree): implemented from its use and from
// training.py, which builds a separate inference model when any RL inference parallel size is set or training
// uses context parallelism (RL inference runs with CP 1), and from --inference-shards, which gives inference its
// own parallel layout.
bool uses_separate_inference_model(const Context& ctx, long long context_parallel_size, const Value& inference_shards) {
  for (const char* d : {"rl_inference_tensor_model_parallel_size", "rl_inference_pipeline_model_parallel_size",
                        "rl_inference_expert_model_parallel_size", "rl_inference_expert_tensor_model_parallel_size"})
    if (!ctx.is_none(d)) return true;
  return context_parallel_size > 1 || !inference_shards.is_none();
}

// RLConfig.validate_run (not in the public Megatron-LM tree): implemented from its arguments and the RL checks
// the public validate_args makes with them; it only applies to RL runs (--perform-rl-step). train_iters and
// train_samples are passed too, but no check on them is implied by the public tree.
void rl_validate_run(Context& ctx, const Value& cuda_graph_impl, const Value& micro_batch_size,
                     const Value& global_batch_size, bool skip_train, bool load_optim, const Value& save_interval,
                     const Value& exit_interval, bool separate_inference_model) {
  if (!ctx.on("perform_rl_step")) return;

  ctx.require(!ctx.on("rl_training_cuda_graphs") || !(cuda_graph_impl == Value("none")), kRlTrainingGraphs,
              "--rl-training-cuda-graphs is set but no CUDA graphs are built (--cuda-graph-impl none)",
              {"rl_training_cuda_graphs", "cuda_graph_impl"});

  if (ctx.on("rl_use_sequence_packing"))
    ctx.require(micro_batch_size == Value(1), kRlPackingMbs,
                "--rl-use-sequence-packing needs --micro-batch-size 1 (got " + micro_batch_size.py_str() +
                    "); raise --seq-length for more work per micro batch",
                {"rl_use_sequence_packing", "micro_batch_size"});

  // Rollouts generated per inference step must fill whole global batches, and the run only exits or saves on
  // iterations where new rollouts are generated.
  if (global_batch_size.is_int() && global_batch_size.as_int() > 0) {
    const long long gbs = global_batch_size.as_int();
    const char* what = "--grpo-prompts-per-step x --grpo-group-size x --grpo-iterations";
    const long long samples =
        ctx.mul(ctx.mul(ctx.i("grpo_prompts_per_step"), ctx.i("grpo_group_size"), what,
                        {"grpo_prompts_per_step", "grpo_group_size"}),
                ctx.i("grpo_iterations"), what, {"grpo_prompts_per_step", "grpo_group_size", "grpo_iterations"});
    ctx.require(py_mod(samples, gbs) == 0, kRlSamplesPerGbs,
                "--grpo-prompts-per-step x --grpo-group-size x --grpo-iterations (" + std::to_string(samples) +
                    ") must be a multiple of --global-batch-size (" + std::to_string(gbs) + ")",
                {"grpo_prompts_per_step", "grpo_group_size", "grpo_iterations", "global_batch_size"});
    const long long iters = samples / gbs;
    if (iters > 0) {
      if (exit_interval.is_int())
        ctx.require(py_mod(exit_interval.as_int(), iters) == 0, kRlExitInterval,
                    "--exit-interval (" + exit_interval.py_str() + ") must be a multiple of the " +
                        std::to_string(iters) + " training iteration(s) run per RL inference step",
                    {"exit_interval", "grpo_prompts_per_step", "grpo_group_size", "global_batch_size"});
      if (save_interval.is_int())
        ctx.require(py_mod(save_interval.as_int(), iters) == 0, kRlSaveInterval,
                    "--save-interval (" + save_interval.py_str() + ") must be a multiple of the " +
                        std::to_string(iters) + " training iteration(s) run per RL inference step",
                    {"save_interval", "grpo_prompts_per_step", "grpo_group_size", "global_batch_size"});
    }
  }

  ctx.require(!(skip_train && !load_optim && ctx.on("rl_offload_optimizer_during_inference")), kRlOffloadOptimizer,
              "--skip-train with --perform-rl-step does not load or build the optimizer (--no-load-optim), so "
              "--rl-offload-optimizer-during-inference has nothing to offload",
              {"rl_offload_optimizer_during_inference", "skip_train", "no_load_optim"});

  ctx.require(!ctx.on("rl_offload_inference_model_weights_when_idle") || separate_inference_model,
              kRlOffloadInferenceWeights,
              "--rl-offload-inference-model-weights-when-idle needs a separate inference model (an "
              "--rl-inference-*-parallel-size, context parallelism or --inference-shards); otherwise the weights "
              "are shared with training",
              {"rl_offload_inference_model_weights_when_idle", "rl_inference_tensor_model_parallel_size"});
}

}  // namespace

void skip_train_rl(Context& ctx) {
  // seed 1804-1806
  if (ctx.on("skip_train") && !ctx.on("no_load_optim")) {
    ctx.set("no_load_optim", true, "--skip-train");
    ctx.warn(kSkipTrainNoLoadOptim, "--skip-train: enabling --no-load-optim", {"skip_train", "no_load_optim"});
  }
  // seed 1807-1820
  rl_validate_run(ctx, ctx["cuda_graph_impl"], ctx["micro_batch_size"], ctx["global_batch_size"], ctx.on("skip_train"),
                  !ctx.on("no_load_optim"), ctx["save_interval"], ctx["exit_interval"],
                  uses_separate_inference_model(ctx, ctx.i("context_parallel_size"), ctx["inference_shards"]));
}

}  // namespace mr::section
