// torch_dcp and fsdp_dtensor checkpoint-format checks (seed arguments.py 1515-1525).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kDcpNeedsFsdp2, "torch-dcp.needs-torch-fsdp2", "--ckpt-format torch_dcp needs --use-torch-fsdp2.");
MR_RULE(kDcpNoTp, "torch-dcp.no-tensor-parallel",
        "--ckpt-format torch_dcp is not supported with --tensor-model-parallel-size > 1.");
MR_RULE(kDcpNoPp, "torch-dcp.no-pipeline-parallel",
        "--ckpt-format torch_dcp is not supported with --pipeline-model-parallel-size > 1.");
MR_RULE(kDtensorNeedsMegatronFsdp, "fsdp-dtensor.needs-megatron-fsdp",
        "--ckpt-format fsdp_dtensor needs --use-megatron-fsdp.");

void dcp_dtensor_formats(Context& ctx) {
  const Value fmt = ctx["ckpt_format"];
  if (fmt == Value("torch_dcp")) {
    ctx.require(ctx.on("use_torch_fsdp2"), kDcpNeedsFsdp2,
                "--ckpt-format torch_dcp is only supported with --use-torch-fsdp2", {"ckpt_format", "use_torch_fsdp2"});
    ctx.require(ctx.i("tensor_model_parallel_size") <= 1, kDcpNoTp,
                "--ckpt-format torch_dcp is not supported with --tensor-model-parallel-size " +
                    show(ctx, "tensor_model_parallel_size"),
                {"ckpt_format", "tensor_model_parallel_size"});
    ctx.require(ctx.i("pipeline_model_parallel_size") <= 1, kDcpNoPp,
                "--ckpt-format torch_dcp is not supported with --pipeline-model-parallel-size " +
                    show(ctx, "pipeline_model_parallel_size"),
                {"ckpt_format", "pipeline_model_parallel_size"});
  }
  if (fmt == Value("fsdp_dtensor"))
    ctx.require(ctx.on("use_megatron_fsdp"), kDtensorNeedsMegatronFsdp,
                "--ckpt-format fsdp_dtensor is only supported with --use-megatron-fsdp",
                {"ckpt_format", "use_megatron_fsdp"});
}

}  // namespace mr::section
