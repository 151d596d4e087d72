// FSDP (seed arguments.py 911-950 of validate_args): the MoE shortcut connection cannot run under FSDP, and
// --use-torch-fsdp2 has its own requirements (PyTorch version, no PP/EP, no gradient accumulation fusion,
// distributed checkpoint format, untied embeddings, no fp16, more than one CUDA device connection), turning
// off FP8/FP4 param gather where TE cannot do them.
#include <string>

#include "config/validate/section_functions.h"

namespace mr {
namespace {

MR_RULE(kShortcutWithFsdp, "fsdp.moe-shortcut-connection",
        "--moe-shortcut-connection is not supported with FSDP (--use-torch-fsdp2 / --use-megatron-fsdp).");
MR_RULE(kTorchVersion, "torch-fsdp2.torch-version", "--use-torch-fsdp2 needs PyTorch >= 2.4.0.");
MR_RULE(kNoPipeline, "torch-fsdp2.pipeline-parallel", "--use-torch-fsdp2 does not support pipeline parallelism.");
MR_RULE(kNoExpertParallel, "torch-fsdp2.expert-parallel", "--use-torch-fsdp2 does not support expert parallelism.");
MR_RULE(kNoGradAccFusion, "torch-fsdp2.gradient-accumulation-fusion",
        "--use-torch-fsdp2 does not support gradient accumulation fusion.");
MR_RULE(kCkptFormat, "torch-fsdp2.ckpt-format", "--use-torch-fsdp2 needs --ckpt-format torch_dist or torch_dcp.");
MR_RULE(kUntiedEmbeddings, "torch-fsdp2.untied-embeddings",
        "--use-torch-fsdp2 needs --untie-embeddings-and-output-weights.");
MR_RULE(kNoFp16, "torch-fsdp2.fp16", "--use-torch-fsdp2 does not support --fp16.");
MR_RULE(kDeviceConnections, "torch-fsdp2.cuda-device-max-connections",
        "FSDP needs CUDA_DEVICE_MAX_CONNECTIONS other than 1.");
MR_WARNING(kFp8ParamGatherOff, "torch-fsdp2.fp8-param-gather-off",
           "FSDP2 with TE >= 2.0 cannot all-gather FP8 params; --fp8-param-gather is turned off.");
MR_WARNING(kFp4ParamGatherOff, "torch-fsdp2.fp4-param-gather-off",
           "FSDP2 with TE < 2.7 cannot all-gather FP4 params; --fp4-param-gather is turned off.");

}  // namespace

namespace section {

void torch_fsdp2(Context& ctx) {
  // seed 916-924
  ctx.require(!(ctx.on("moe_shortcut_connection") && (ctx.on("use_torch_fsdp2") || ctx.on("use_megatron_fsdp"))),
              kShortcutWithFsdp,
              "--moe-shortcut-connection cannot be used with FSDP (--use-torch-fsdp2 / --use-megatron-fsdp): the "
              "shortcut block skips the per-layer FSDP all-gather hooks, so the paired attention and MoE "
              "parameters would stay sharded; use DDP or --use-distributed-optimizer",
              {"moe_shortcut_connection", "use_torch_fsdp2", "use_megatron_fsdp"});

  if (!ctx.on("use_torch_fsdp2")) return;
  // seed 926-942
  ctx.require(ctx.torch_min("2.4.0"), kTorchVersion,
              "--use-torch-fsdp2 needs PyTorch 2.4.0 or newer (FSDP2), the target has " + ctx.env().torch_version,
              {"use_torch_fsdp2"});
  ctx.require(ctx.i("pipeline_model_parallel_size") == 1, kNoPipeline,
              "--use-torch-fsdp2 cannot be combined with pipeline parallelism (--pipeline-model-parallel-size " +
                  ctx["pipeline_model_parallel_size"].py_str() + ")",
              {"use_torch_fsdp2", "pipeline_model_parallel_size"});
  ctx.require(ctx.i("expert_model_parallel_size") == 1, kNoExpertParallel,
              "--use-torch-fsdp2 cannot be combined with expert parallelism (--expert-model-parallel-size " +
                  ctx["expert_model_parallel_size"].py_str() + ")",
              {"use_torch_fsdp2", "expert_model_parallel_size"});
  ctx.require(!ctx.on("gradient_accumulation_fusion"), kNoGradAccFusion,
              "--use-torch-fsdp2 cannot be combined with gradient accumulation fusion; add "
              "--no-gradient-accumulation-fusion",
              {"use_torch_fsdp2", "gradient_accumulation_fusion"});
  const Value& fmt = ctx["ckpt_format"];
  ctx.require(fmt == Value("torch_dist") || fmt == Value("torch_dcp"), kCkptFormat,
              "--use-torch-fsdp2 needs --ckpt-format torch_dist or torch_dcp (got " + fmt.py_str() + ")",
              {"use_torch_fsdp2", "ckpt_format"});
  ctx.require(ctx.on("untie_embeddings_and_output_weights"), kUntiedEmbeddings,
              "--use-torch-fsdp2 needs --untie-embeddings-and-output-weights",
              {"use_torch_fsdp2", "untie_embeddings_and_output_weights"});
  ctx.require(!ctx.on("fp16"), kNoFp16, "--use-torch-fsdp2 does not support --fp16 yet", {"use_torch_fsdp2", "fp16"});
  ctx.require(
      ctx.env_var("CUDA_DEVICE_MAX_CONNECTIONS") != std::optional<std::string>("1"), kDeviceConnections,
      "FSDP (--use-torch-fsdp2) cannot run with CUDA_DEVICE_MAX_CONNECTIONS=1; it needs more than one connection",
      {"use_torch_fsdp2"});

  // seed 944-955
  if (ctx.on("fp8_param_gather") && ctx.te_min("2.0.0")) {
    ctx.set("fp8_param_gather", Value(false), "FSDP2 cannot all-gather FP8 params with TE >= 2.0");
    warn_rank_0(
        ctx, kFp8ParamGatherOff,
        "FSDP2 cannot all-gather FP8 params with Transformer Engine >= 2.0 yet; turning --fp8-param-gather off "
        "(params are all-gathered in bf16)",
        {"fp8_param_gather", "use_torch_fsdp2"});
  }
  if (ctx.on("fp4_param_gather") && !ctx.te_min("2.7.0")) {  // seed: is_te_min_version("2.7.0.dev0")
    ctx.set("fp4_param_gather", Value(false), "FSDP2 cannot all-gather FP4 params with TE < 2.7");
    warn_rank_0(
        ctx, kFp4ParamGatherOff,
        "FSDP2 cannot all-gather FP4 params with this Transformer Engine version; turning --fp4-param-gather "
        "off (params are all-gathered in bf16)",
        {"fp4_param_gather", "use_torch_fsdp2"});
  }
}

}  // namespace section
}  // namespace mr
