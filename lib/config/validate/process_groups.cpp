// Gloo process groups and the fake process group (seed arguments.py 1651-1670).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kNoGlooNeedsDistCkpt, "gloo.distributed-optimizer-needs-dist-ckpt",
        "Without Gloo process groups the distributed optimizer (sgd/adam) needs a distributed checkpoint format.");
MR_RULE(kNoGlooMemEfficient, "gloo.fully-reshardable-mem-efficient",
        "--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups.");
MR_RULE(kFakePgFlex, "fake-process-group.no-flex-dispatcher",
        "--fake-process-group does not support --moe-token-dispatcher-type flex.");
MR_WARNING(kFakePgNanCheck, "fake-process-group.nan-check-disabled",
           "--fake-process-group turns off the NaN check on loss and gradients.");
MR_WARNING(kFakePgGloo, "fake-process-group.gloo-disabled", "--fake-process-group turns off Gloo process groups.");

void gloo_process_groups(Context& ctx) {
  if (ctx.on("use_gloo_process_groups")) return;
  const Value& opt = ctx["optimizer"];
  if (ctx.on("use_distributed_optimizer") && (opt == Value("sgd") || opt == Value("adam"))) {
    // Legacy checkpoints gather the distributed optimizer state on DP rank 0 over Gloo.
    ctx.require(dist_ckpt_in_use(ctx), kNoGlooNeedsDistCkpt,
                "--disable-gloo-process-groups with --use-distributed-optimizer needs a distributed checkpoint "
                "format: --ckpt-format torch gathers the optimizer state over Gloo",
                {"use_gloo_process_groups", "use_distributed_optimizer", "ckpt_format"});
    if (ctx.on("dist_ckpt_optim_fully_reshardable"))
      ctx.require(!ctx.on("distrib_optim_fully_reshardable_mem_efficient"), kNoGlooMemEfficient,
                  "--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups: drop "
                  "--disable-gloo-process-groups or that flag",
                  {"distrib_optim_fully_reshardable_mem_efficient", "use_gloo_process_groups",
                   "dist_ckpt_optim_fully_reshardable"});
  }
}

void fake_process_group(Context& ctx) {
  if (!ctx.on("fake_process_group")) return;
  ctx.require(!(ctx["moe_token_dispatcher_type"] == Value("flex")), kFakePgFlex,
              "--fake-process-group cannot be used with --moe-token-dispatcher-type flex",
              {"fake_process_group", "moe_token_dispatcher_type"});
  ctx.set("check_for_nan_in_loss_and_grad", false, "--fake-process-group");
  ctx.warn(kFakePgNanCheck, "check_for_nan_in_loss_and_grad set to False for --fake-process-group",
           {"fake_process_group", "check_for_nan_in_loss_and_grad"});
  ctx.set("use_gloo_process_groups", false, "--fake-process-group");
  ctx.warn(kFakePgGloo, "use_gloo_process_groups set to False for --fake-process-group",
           {"fake_process_group", "use_gloo_process_groups"});
}

}  // namespace mr::section
