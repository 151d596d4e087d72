// Seed arguments.py 524-575: flags that were removed or renamed. Removed ones must be unset and are
// dropped from the namespace; renamed ones are translated to their successors.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kBatchSizeRemoved, "deprecated.batch-size", "--batch-size was removed; use --micro-batch-size.");
MR_RULE(kWarmupRemoved, "deprecated.warmup",
        "--warmup was removed; use --lr-warmup-fraction (or --lr-warmup-iters / --lr-warmup-samples).");
MR_RULE(kModelParallelSizeRemoved, "deprecated.model-parallel-size",
        "--model-parallel-size was removed; use --tensor-model-parallel-size.");
MR_RULE(kCheckpointActivationsRemoved, "deprecated.checkpoint-activations",
        "--checkpoint-activations was removed; Megatron stops right away when it is set. Use "
        "--recompute-activations, or --recompute-granularity and --recompute-method.");
MR_RULE(kCudaGraphFlagWithImpl, "deprecated.cuda-graph-flag-with-impl",
        "--enable-cuda-graph / --external-cuda-graph cannot be combined with --cuda-graph-impl.");
MR_RULE(kCudaGraphFlagsExclusive, "deprecated.cuda-graph-flags-exclusive",
        "--enable-cuda-graph and --external-cuda-graph are mutually exclusive.");
MR_RULE(kCudaGraphScopeWithModules, "deprecated.cuda-graph-scope-with-modules",
        "--cuda-graph-scope (deprecated) and --cuda-graph-modules cannot both be given.");
MR_WARNING(kCudaGraphScopeDeprecated, "deprecated.cuda-graph-scope",
           "--cuda-graph-scope is deprecated; its values are moved to --cuda-graph-modules.");

void deprecated_flags(Context& ctx) {
  // seed 525-533: removed flags must be unset; the attributes are deleted either way.
  ctx.require(ctx.is_none("batch_size"), kBatchSizeRemoved,
              "--batch-size no longer exists; set the per-GPU batch with --micro-batch-size", {"batch_size"});
  ctx.erase("batch_size");
  ctx.require(ctx.is_none("warmup"), kWarmupRemoved,
              "--warmup no longer exists; use --lr-warmup-fraction, --lr-warmup-iters or --lr-warmup-samples",
              {"warmup"});
  ctx.erase("warmup");
  ctx.require(ctx.is_none("model_parallel_size"), kModelParallelSizeRemoved,
              "--model-parallel-size no longer exists; use --tensor-model-parallel-size", {"model_parallel_size"});
  ctx.erase("model_parallel_size");

  // seed 535-539: Megatron prints a hint and calls exit() (status 0, no training); megatron-run reports it as
  // a failed check so the config is not taken for a runnable one.
  ctx.require(!ctx.on("checkpoint_activations"), kCheckpointActivationsRemoved,
              "--checkpoint-activations no longer exists and makes Megatron exit without training; use "
              "--recompute-activations, or --recompute-granularity with --recompute-method",
              {"checkpoint_activations"});
  ctx.erase("checkpoint_activations");

  // seed 541-543
  if (ctx.on("recompute_activations"))
    ctx.translate("recompute_granularity", "selective", "deprecated --recompute-activations", "--recompute-activations");
  ctx.erase("recompute_activations");

  // seed 545-565: the old CUDA-graph switches map onto --cuda-graph-impl (each attribute is deleted only when set).
  const bool enable = ctx.on("enable_cuda_graph"), external = ctx.on("external_cuda_graph");
  if (enable || external) {
    ctx.require(ctx["cuda_graph_impl"] == Value("none"), kCudaGraphFlagWithImpl,
                std::string(enable ? "--enable-cuda-graph" : "--external-cuda-graph") +
                    " is the old spelling of --cuda-graph-impl; drop it when giving --cuda-graph-impl " +
                    ctx["cuda_graph_impl"].py_str(),
                {enable ? "enable_cuda_graph" : "external_cuda_graph", "cuda_graph_impl"});
    ctx.require(!(enable && external), kCudaGraphFlagsExclusive,
                "--enable-cuda-graph (local graphs) and --external-cuda-graph (Transformer Engine graphs) "
                "cannot both be set",
                {"enable_cuda_graph", "external_cuda_graph"});
    if (enable) {
      ctx.translate("cuda_graph_impl", "local", "deprecated --enable-cuda-graph", "--enable-cuda-graph");
      ctx.erase("enable_cuda_graph");
    }
    if (external) {
      ctx.translate("cuda_graph_impl", "transformer_engine", "deprecated --external-cuda-graph", "--external-cuda-graph");
      ctx.erase("external_cuda_graph");
    }
  }

  // seed 567-575: --cuda-graph-scope is the old name of --cuda-graph-modules.
  if (ctx.has("cuda_graph_scope_deprecated")) {
    if (!ctx.is_none("cuda_graph_scope_deprecated")) {
      ctx.require(!ctx.on("cuda_graph_modules"), kCudaGraphScopeWithModules,
                  "--cuda-graph-scope is the deprecated name of --cuda-graph-modules; give only "
                  "--cuda-graph-modules",
                  {"cuda_graph_scope_deprecated", "cuda_graph_modules"});
      ctx.warn(kCudaGraphScopeDeprecated,
               "--cuda-graph-scope is deprecated; its values are used as --cuda-graph-modules",
               {"cuda_graph_scope_deprecated"});
      ctx.translate("cuda_graph_modules", ctx["cuda_graph_scope_deprecated"], "deprecated --cuda-graph-scope",
                    "--cuda-graph-scope");
    }
    ctx.erase("cuda_graph_scope_deprecated");
  }
}

}  // namespace mr::section
