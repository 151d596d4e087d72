// Seed arguments.py 1209-1224 (validate_args): fp16 cross entropy, fp32 residual connections, the GPU
// generation grouped GEMM needs, and the persistent layer-norm kernel's torch version.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kFp16CrossEntropy, "precision.fp16-lm-cross-entropy-needs-fp16", "--fp16-lm-cross-entropy needs --fp16.");
MR_RULE(kFp32Residual, "precision.fp32-residual-needs-half-precision",
        "--fp32-residual-connection needs --fp16 or --bf16.");
MR_RULE(kGroupedGemmArch, "grouped-gemm.compute-capability",
        "--moe-grouped-gemm needs a GPU of compute capability 8.0 (Ampere) or newer.");

void mixed_precision_checks(Context& ctx) {
  // seed 1210-1211
  if (ctx.on("fp16_lm_cross_entropy"))
    ctx.require(ctx.on("fp16"), kFp16CrossEntropy, "--fp16-lm-cross-entropy is only supported with --fp16",
                {"fp16_lm_cross_entropy", "fp16"});
  // seed 1212-1214
  if (ctx.on("fp32_residual_connection"))
    ctx.require(ctx.on("fp16") || ctx.on("bf16"), kFp32Residual,
                "--fp32-residual-connection is only supported with --fp16 or --bf16",
                {"fp32_residual_connection", "fp16", "bf16"});

  // seed 1216-1218
  if (ctx.on("moe_grouped_gemm") && !ctx.env().no_gpu() && ctx.arch_major() < 8)
    ctx.fail(kGroupedGemmArch,
             "--moe-grouped-gemm kernels need compute capability >= 8.0, the target GPU is " + ctx.env().gpu_arch,
             {"moe_grouped_gemm"});

  // seed 1220-1224: the persistent fused layer norm kernel exists from torch 1.11 on.
  if (!ctx.torch_min("1.11.0a0")) assign(ctx, "no_persist_layer_norm", true, "mixed-precision-checks");
}

}  // namespace mr::section
