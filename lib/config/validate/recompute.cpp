// Activation recomputation checks (seed arguments.py 1227-1246, validate_args).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kDistRecomputeNeedsTp, "recompute.distribute-needs-tensor-parallel",
        "--distribute-saved-activations needs --tensor-model-parallel-size > 1.");
MR_RULE(kDistRecomputeNeedsFull, "recompute.distribute-needs-full-granularity",
        "--distribute-saved-activations needs --recompute-granularity full.");
MR_RULE(kDistRecomputeNeedsMethod, "recompute.distribute-needs-method",
        "--distribute-saved-activations needs a --recompute-method.");
MR_RULE(kDistRecomputeTorch, "recompute.distribute-torch-version",
        "--distribute-saved-activations needs PyTorch >= 1.10.");
MR_RULE(kSelectiveNoMethod, "recompute.selective-without-method",
        "--recompute-granularity selective does not take a --recompute-method.");

void activation_recompute(Context& ctx) {
  if (ctx.on("distribute_saved_activations")) {
    ctx.require(ctx.i("tensor_model_parallel_size") > 1, kDistRecomputeNeedsTp,
                "--distribute-saved-activations spreads recomputed activations over the tensor-parallel group, "
                "so it needs --tensor-model-parallel-size > 1 (got " + show(ctx, "tensor_model_parallel_size") + ")",
                {"distribute_saved_activations", "tensor_model_parallel_size"});
    ctx.require(ctx["recompute_granularity"] == Value("full"), kDistRecomputeNeedsFull,
                "--distribute-saved-activations works only with --recompute-granularity full (got " +
                    show(ctx, "recompute_granularity") + ")",
                {"distribute_saved_activations", "recompute_granularity"});
    ctx.require(!ctx.is_none("recompute_method"), kDistRecomputeNeedsMethod,
                "--distribute-saved-activations needs --recompute-method (uniform or block)",
                {"distribute_saved_activations", "recompute_method"});
    // is_torch_min_version("1.10.0a0"): pre-release suffixes are ignored by the version gate.
    ctx.require(ctx.torch_min("1.10.0"), kDistRecomputeTorch,
                "--distribute-saved-activations needs PyTorch 1.10 or newer (target has " +
                    ctx.env().torch_version + ")",
                {"distribute_saved_activations"});
  }

  if (ctx["recompute_granularity"] == Value("selective")) {
    ctx.require(ctx.is_none("recompute_method"), kSelectiveNoMethod,
                "--recompute-method (" + show(ctx, "recompute_method") +
                    ") cannot be combined with --recompute-granularity selective",
                {"recompute_method", "recompute_granularity"});
  }
}

}  // namespace mr::section
