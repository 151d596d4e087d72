// Multi-latent attention and MoE latent projections (seed arguments.py 1912-1925).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kMlaNoGqa, "latent.mla-excludes-gqa", "--multi-latent-attention excludes --group-query-attention.");
MR_RULE(kMlaDownProjFusion, "latent.mla-down-proj-fusion-needs-mla",
        "--mla-down-proj-fusion needs --multi-latent-attention.");
MR_RULE(kNormBeforeUpProj, "latent.norm-before-up-proj-needs-latent-size",
        "--moe-use-norm-before-up-proj needs --moe-latent-size.");
MR_RULE(kLatentSizePositive, "latent.moe-latent-size-positive", "--moe-latent-size must be greater than zero.");
MR_RULE(kLatentNeedsMoe, "latent.moe-latent-needs-experts", "--moe-latent-size needs an MoE model (--num-experts).");

void latent_projections(Context& ctx) {
  if (ctx.on("multi_latent_attention"))
    ctx.require(!ctx.on("group_query_attention"), kMlaNoGqa,
                "--multi-latent-attention and --group-query-attention are mutually exclusive",
                {"multi_latent_attention", "group_query_attention"});
  if (ctx.on("mla_down_proj_fusion"))
    ctx.require(ctx.on("multi_latent_attention"), kMlaDownProjFusion,
                "--mla-down-proj-fusion needs --multi-latent-attention",
                {"mla_down_proj_fusion", "multi_latent_attention"});
  ctx.require(!ctx.on("moe_use_norm_before_up_proj") || !ctx.is_none("moe_latent_size"), kNormBeforeUpProj,
              "--moe-use-norm-before-up-proj needs --moe-latent-size",
              {"moe_use_norm_before_up_proj", "moe_latent_size"});

  // MoE latent projections (seed 1921-1924)
  if (!ctx.is_none("moe_latent_size")) {
    ctx.require(ctx.i("moe_latent_size") > 0, kLatentSizePositive,
                "--moe-latent-size must be greater than zero (got " + ctx["moe_latent_size"].py_str() + ")",
                {"moe_latent_size"});
    ctx.require(!ctx.is_none("num_experts"), kLatentNeedsMoe,
                "--moe-latent-size applies to MoE models only: set --num-experts", {"moe_latent_size", "num_experts"});
  }
}

}  // namespace mr::section
