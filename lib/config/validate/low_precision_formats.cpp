// Seed arguments.py 971-995 (validate_args): FP8/FP4 parameter all-gather, FP4 vs FP8, and the library
// versions the FP4 and MXFP8 inference paths need.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kFp8ParamGatherSharded, "precision.fp8-param-gather-needs-sharding",
        "--fp8-param-gather needs --use-distributed-optimizer, --use-torch-fsdp2 or --use-megatron-fsdp.");
MR_RULE(kFp4ParamGatherSharded, "precision.fp4-param-gather-needs-sharding",
        "--fp4-param-gather needs --use-distributed-optimizer, --use-torch-fsdp2 or --use-megatron-fsdp.");
MR_RULE(kFp4Fp8Exclusive, "precision.fp4-fp8-exclusive", "--fp4-format and --fp8-format cannot be combined.");
MR_RULE(kFp4ParamGatherNeedsFp4, "precision.fp4-param-gather-needs-fp4",
        "--fp4-param-gather is only valid together with --fp4-format.");
MR_RULE(kFp4TeVersion, "precision.fp4-te-version", "--fp4-format needs Transformer Engine 2.7.0.dev0 or newer.");
MR_RULE(kMxfp8InferenceFlashinfer, "precision.mxfp8-inference-flashinfer-version",
        "--fp8-recipe mxfp8 with --transformer-impl inference_optimized needs FlashInfer 0.6.4 or newer.");

namespace {

// torch.is_grad_enabled() is True while validate_args runs in a training job, so the inference-mode escape of
// the seed's param-gather asserts (971-976) never applies.
bool param_gather_sharded(const Context& ctx) {
  return ctx.on("use_distributed_optimizer") || ctx.on("use_torch_fsdp2") || ctx.on("use_megatron_fsdp");
}

}  // namespace

void low_precision_formats(Context& ctx) {
  // seed 971-976
  if (ctx.on("fp8_param_gather"))
    ctx.require(param_gather_sharded(ctx), kFp8ParamGatherSharded,
                "--fp8-param-gather is only supported with --use-distributed-optimizer, --use-torch-fsdp2 or "
                "--use-megatron-fsdp",
                {"fp8_param_gather", "use_distributed_optimizer", "use_torch_fsdp2", "use_megatron_fsdp"});
  if (ctx.on("fp4_param_gather"))
    ctx.require(param_gather_sharded(ctx), kFp4ParamGatherSharded,
                "--fp4-param-gather is only supported with --use-distributed-optimizer, --use-torch-fsdp2 or "
                "--use-megatron-fsdp",
                {"fp4_param_gather", "use_distributed_optimizer", "use_torch_fsdp2", "use_megatron_fsdp"});

  // seed 978-979
  if (ctx.on("fp4") && ctx.on("fp8"))
    ctx.fail(kFp4Fp8Exclusive,
             "--fp4-format (" + ctx["fp4"].py_str() + ") and --fp8-format (" + ctx["fp8"].py_str() +
                 ") are mutually exclusive: pick one low-precision format",
             {"fp4", "fp8"});

  // seed 982-983
  if (ctx.on("fp4_param_gather") && !ctx.on("fp4"))
    ctx.fail(kFp4ParamGatherNeedsFp4, "--fp4-param-gather requires --fp4-format to be set",
             {"fp4_param_gather", "fp4"});

  // seed 986-987
  if (ctx.on("fp4") && !ctx.te_min("2.7.0.dev0"))
    ctx.fail(kFp4TeVersion,
             "--fp4-format (NVFP4 block scaling) requires Transformer Engine >= 2.7.0.dev0, the target has " +
                 ctx.env().te_version,
             {"fp4"});

  // seed 990-995
  if (ctx["fp8_recipe"] == Value("mxfp8") && ctx["transformer_impl"] == Value("inference_optimized") &&
      !ctx.flashinfer_min("0.6.4"))
    ctx.fail(kMxfp8InferenceFlashinfer,
             "--fp8-recipe mxfp8 with --transformer-impl inference_optimized requires FlashInfer >= 0.6.4, the "
             "target has " + ctx.env().flashinfer_version,
             {"fp8_recipe", "transformer_impl"});
}

}  // namespace mr::section
