// Seed arguments.py 1080-1124 (validate_args): params_dtype from --fp16/--bf16, the NaN check under dynamic
// loss scaling, fp32 gradient accumulation for bf16, and the fp32-accumulating reduce-scatters it makes moot.
// main_grads_dtype itself stays a CLI string here; the optimizer part maps it (OptimizerConfig finalize).
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kFp16Bf16Exclusive, "precision.fp16-bf16-exclusive", "--fp16 and --bf16 cannot both be set.");
MR_WARNING(kDynamicLossScaleNanCheck, "precision.fp16-dynamic-loss-scale-nan-check",
           "With --fp16 and dynamic loss scaling, the NaN check on loss and gradients is turned off.");
MR_RULE(kFp32AccumNeedsFp32MainGrads, "precision.fp32-accumulation-needs-fp32-main-grads",
        "--accumulate-allreduce-grads-in-fp32 with --bf16 needs --main-grads-dtype fp32.");
MR_WARNING(kFp32AccumReduceScatter, "precision.fp32-accumulation-reduce-scatter-redundant",
           "--accumulate-allreduce-grads-in-fp32 turns off the fp32-accumulating reduce-scatter options.");

namespace {
constexpr const char* kWhy = "params-dtype";
}

void params_dtype(Context& ctx) {
  // seed 1081-1091
  ctx.set("params_dtype", "torch.float32", kWhy);
  if (ctx.on("fp16")) {
    ctx.require(!ctx.on("bf16"), kFp16Bf16Exclusive, "--fp16 and --bf16 are mutually exclusive", {"fp16", "bf16"});
    ctx.set("params_dtype", "torch.float16", kWhy);
    // NaNs are how the dynamic loss scaler notices overflow, so the NaN check must not stop the run.
    if (!ctx.on("loss_scale")) {
      assign(ctx, "check_for_nan_in_loss_and_grad", false, kWhy);
      ctx.warn(kDynamicLossScaleNanCheck,
               "--fp16 with dynamic loss scaling (no --loss-scale): turning off the NaN check on loss and "
               "gradients (check_for_nan_in_loss_and_grad=False)",
               {"fp16", "loss_scale", "check_for_nan_in_loss_and_grad"});
    }
  }

  // seed 1094: the CLI string, or a torch dtype should something have mapped it already.
  const Value& mgd = ctx["main_grads_dtype"];
  const bool main_grads_fp32 = mgd == Value("fp32") || mgd == Value("torch.float32");

  // seed 1095-1108
  if (ctx.on("bf16")) {
    ctx.require(!ctx.on("fp16"), kFp16Bf16Exclusive, "--fp16 and --bf16 are mutually exclusive", {"fp16", "bf16"});
    ctx.set("params_dtype", "torch.bfloat16", kWhy);
    if (ctx.on("accumulate_allreduce_grads_in_fp32"))
      ctx.require(main_grads_fp32, kFp32AccumNeedsFp32MainGrads,
                  "--accumulate-allreduce-grads-in-fp32 requires --main-grads-dtype fp32, got " + mgd.py_str(),
                  {"accumulate_allreduce_grads_in_fp32", "main_grads_dtype"});
    if (ctx.on("grad_reduce_in_bf16"))
      assign(ctx, "accumulate_allreduce_grads_in_fp32", false, kWhy);
    else if (!ctx.on("accumulate_allreduce_grads_in_fp32") && main_grads_fp32)
      assign(ctx, "accumulate_allreduce_grads_in_fp32", true, kWhy);  // bf16 accumulates and all-reduces in fp32
  }

  // seed 1113-1124: with fp32 main grads the plain reduce-scatter already sums in fp32.
  if (ctx.on("accumulate_allreduce_grads_in_fp32")) {
    for (std::string_view dest :
         {"ddp_reduce_scatter_with_fp32_accumulation", "gtp_remat_reduce_scatter_with_fp32_accumulation"}) {
      if (ctx.has(dest) && ctx.on(dest)) {
        ctx.set(dest, false, kWhy);
        ctx.warn(kFp32AccumReduceScatter,
                 "turning off " + Context::flag(dest) +
                     ": --accumulate-allreduce-grads-in-fp32 already reduces gradients in fp32",
                 {dest, "accumulate_allreduce_grads_in_fp32"});
      }
    }
  }
}

}  // namespace mr::section
