// QK-clip and max-attention-logit logging checks (seed arguments.py 1461-1472).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kQkClipTe, "qk-clip.te-version", "--qk-clip needs Transformer Engine >= 2.9.0.");
MR_RULE(kQkClipAlpha, "qk-clip.alpha-range", "--qk-clip-alpha must lie strictly between 0 and 1.");
MR_RULE(kQkClipThreshold, "qk-clip.threshold-positive", "--qk-clip-threshold must be positive.");
MR_RULE(kLogMaxLogitTe, "qk-clip.log-max-attention-logit-te-version",
        "--log-max-attention-logit needs Transformer Engine >= 2.9.0.");

void qk_clip(Context& ctx) {
  if (ctx.on("qk_clip")) {
    ctx.require(ctx.te_min("2.9.0"), kQkClipTe,
                "--qk-clip needs Transformer Engine 2.9.0 or newer (target has " + ctx.env().te_version + ")",
                {"qk_clip"});
    const double alpha = ctx.f("qk_clip_alpha");
    ctx.require(0.0 < alpha && alpha < 1.0, kQkClipAlpha,
                "--qk-clip-alpha (" + show(ctx, "qk_clip_alpha") + ") must be greater than 0 and less than 1",
                {"qk_clip_alpha", "qk_clip"});
    ctx.require(ctx.f("qk_clip_threshold") > 0, kQkClipThreshold,
                "--qk-clip-threshold (" + show(ctx, "qk_clip_threshold") + ") must be greater than 0",
                {"qk_clip_threshold", "qk_clip"});
  }

  if (ctx.on("log_max_attention_logit"))
    ctx.require(ctx.te_min("2.9.0"), kLogMaxLogitTe,
                "--log-max-attention-logit needs Transformer Engine 2.9.0 or newer (target has " +
                    ctx.env().te_version + ")",
                {"log_max_attention_logit"});
}

}  // namespace mr::section
