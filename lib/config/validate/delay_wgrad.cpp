// --delay-wgrad-compute (seed arguments.py 1832-1860): Transformer Engine only; with --overlap-grad-reduce it needs
// TE >= 2.8.0, and when a delayed weight-gradient GEMM is captured in a CUDA graph (attention, or the MoE router
// with an un-overlapped shared expert) TE >= 2.12.0, gradient-accumulation fusion and, for attention, no biases.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kDelayWgradTe, "delay-wgrad.needs-transformer-engine",
        "--delay-wgrad-compute needs --transformer-impl transformer_engine.");
MR_RULE(kDelayWgradOverlapTe, "delay-wgrad.overlap-grad-reduce-te-version",
        "--delay-wgrad-compute with --overlap-grad-reduce needs Transformer Engine >= 2.8.0.");
MR_RULE(kDelayWgradGraphTe, "delay-wgrad.cuda-graph-te-version",
        "--delay-wgrad-compute inside CUDA graphs needs Transformer Engine >= 2.12.0.");
MR_RULE(kDelayWgradGraphFusion, "delay-wgrad.cuda-graph-needs-grad-accumulation-fusion",
        "--delay-wgrad-compute inside CUDA graphs needs gradient accumulation fusion.");
MR_RULE(kDelayWgradGraphBias, "delay-wgrad.cuda-graph-attn-no-bias",
        "--delay-wgrad-compute with attention CUDA graphs does not support attention biases.");
MR_RULE(kDelayWgradNoFusionTe, "delay-wgrad.no-grad-accumulation-fusion-te-version",
        "--delay-wgrad-compute without gradient accumulation fusion needs Transformer Engine >= 2.7.0.");

void delay_wgrad(Context& ctx) {
  if (!ctx.on("delay_wgrad_compute")) return;
  const std::string te = ctx.env().te_version;
  ctx.require(ctx["transformer_impl"] == Value("transformer_engine"), kDelayWgradTe,
              "--delay-wgrad-compute is only implemented for --transformer-impl transformer_engine (got " +
                  ctx["transformer_impl"].py_str() + ")",
              {"delay_wgrad_compute", "transformer_impl"});
  if (ctx.on("overlap_grad_reduce")) {
    ctx.require(
        ctx.te_min("2.8.0"), kDelayWgradOverlapTe,
        "--delay-wgrad-compute with --overlap-grad-reduce needs Transformer Engine >= 2.8.0 (target has " + te + ")",
        {"delay_wgrad_compute", "overlap_grad_reduce"});
    const Value& modules = ctx["cuda_graph_modules"];
    const bool attn = enum_in(modules, "CudaGraphModule", "attn");
    const bool wgrad_in_graph =
        attn || (enum_in(modules, "CudaGraphModule", "moe_router") &&
                 !ctx.is_none("moe_shared_expert_intermediate_size") && !ctx.on("moe_shared_expert_overlap"));
    if (wgrad_in_graph) {
      ctx.require(ctx.te_min("2.12.0"), kDelayWgradGraphTe,
                  "--delay-wgrad-compute with CUDA-graphed modules " + modules.py_str() +
                      " needs Transformer Engine >= 2.12.0 (target has " + te + ")",
                  {"delay_wgrad_compute", "cuda_graph_modules"});
      ctx.require(ctx.on("gradient_accumulation_fusion"), kDelayWgradGraphFusion,
                  "--delay-wgrad-compute with CUDA graphs needs gradient accumulation fusion (drop "
                  "--no-gradient-accumulation-fusion): unfused accumulation has no static addresses for the graph",
                  {"delay_wgrad_compute", "gradient_accumulation_fusion", "cuda_graph_modules"});
      if (attn)
        ctx.require(!ctx.on("add_bias_linear") && !ctx.on("add_qkv_bias"), kDelayWgradGraphBias,
                    "--delay-wgrad-compute with attention CUDA graphs does not support attention biases yet: use "
                    "--disable-bias-linear and no --add-qkv-bias",
                    {"delay_wgrad_compute", "add_bias_linear", "add_qkv_bias", "cuda_graph_modules"});
    }
  }
  if (!ctx.on("gradient_accumulation_fusion"))
    ctx.require(ctx.te_min("2.7.0"), kDelayWgradNoFusionTe,
                "--delay-wgrad-compute with --no-gradient-accumulation-fusion needs Transformer Engine >= 2.7.0 "
                "(target has " +
                    te + ")",
                {"delay_wgrad_compute", "gradient_accumulation_fusion"});
}

}  // namespace mr::section
