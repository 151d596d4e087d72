// The init stage (init.h): the checks of Megatron's TransformerConfig.__post_init__ and
// ModelParallelConfig.__post_init__ (megatron/core/transformer/transformer_config.py,
// megatron/core/model_parallel_config.py) and of core_transformer_config_from_args()
// (megatron/training/argument_utils.py) that validate_args() does not make: attention heads and query groups
// against tensor parallelism, the activation and its fusions, RoPE, and the pipeline communication settings
// (recomputation, offloading and the CUDA graphs that capture them: init_transformer_recompute.cpp). The config is
// filled from the resolved arguments by name, with the renames core_transformer_config_from_args makes (num_experts
// -> num_moe_experts, batch_p2p_comm = not overlap_p2p_comm, the activation from --swiglu/--squared-relu/
// --quick-geglu, num_query_groups only with --group-query-attention); the checks below read the arguments through
// those renames.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "config/validate/init.h"
#include "config/validate/python.h"
#include "util/text.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kRecipeTwice, "init.transformer.quant-recipe-already-configured",
             "--te-precision-config-file cannot be given with --kitchen-config-file or --kitchen-recipe-number: each "
             "configures the quantization recipe (core_transformer_config_from_args: \"Quantization recipe already "
             "configured.\").");
MR_INIT_RULE(kHeadsTp, "init.transformer.heads-divisible-by-tp",
             "--num-attention-heads must be a multiple of --tensor-model-parallel-size (TransformerConfig).");
MR_INIT_RULE(kQueryGroupsTp, "init.transformer.query-groups-vs-tp",
             "With --group-query-attention, --num-query-groups must be a multiple or a divisor of "
             "--tensor-model-parallel-size (TransformerConfig).");
MR_INIT_RULE(kHeadsGroups, "init.transformer.heads-divisible-by-query-groups",
             "With --group-query-attention (and no --multi-latent-attention), --num-attention-heads must be a "
             "multiple of --num-query-groups: each query group serves a whole number of heads (Megatron's attention "
             "layer: Transformer Engine's DotProductAttention asserts it; the local one's QKV split fails).");
MR_INIT_RULE(kGdpHouseholder, "init.transformer.gdp-householder-positive",
             "--gdp-num-householder must be 1 or more (TransformerConfig).");
MR_INIT_RULE(kMhcPipeline, "init.transformer.mhc-no-pipeline",
             "--enable-mhc-connections does not work with pipeline parallelism yet (TransformerConfig: "
             "NotImplementedError).");
MR_INIT_RULE(kMhcFeatures, "init.transformer.mhc-exclusions",
             "--enable-mhc-connections does not work with multi-token prediction (--mtp-num-layers), full activation "
             "recomputation (--recompute-granularity full: NotImplementedError) or --inference-fuse-tp-communication "
             "(TransformerConfig).");
MR_INIT_RULE(kFuseTpComm, "init.transformer.inference-fuse-tp-communication",
             "--inference-fuse-tp-communication needs --transformer-impl inference_optimized and a dense model (no "
             "--num-experts) (TransformerConfig).");
MR_INIT_RULE(kFp8OutputProj, "init.transformer.fp8-output-proj",
             "--fp8-output-proj needs --fp8-format and --fp8-recipe mxfp8 (TransformerConfig).");
MR_INIT_RULE(kBatchInvariant, "init.transformer.batch-invariant-mode",
             "--batch-invariant-mode needs bf16 parameters (--bf16), --attention-backend flash, "
             "--flash-attention-version 3 or 4, no context parallelism and no attention dropout; in an MoE model also "
             "--moe-token-dispatcher-type alltoall (unless --transformer-impl inference_optimized), no --fp8-format / "
             "--fp4-format, no --moe-permute-fusion / --moe-permute-fusion-into-hybridep and no expert padding "
             "(--moe-pad-expert-input-to-capacity, --moe-pad-experts-for-cuda-graph-inference) (TransformerConfig).");
MR_INIT_RULE(kInferenceOptimized, "init.transformer.inference-optimized-layers",
             "--transformer-impl inference_optimized needs --normalization RMSNorm, no --apply-layernorm-1p and no "
             "linear or QKV biases (--disable-bias-linear, no --add-qkv-bias); its MoE layers (--num-experts) need "
             "--moe-router-dtype fp32, an expert tensor-parallel size of 1, dropless routing (no "
             "--moe-expert-capacity-factor) and no --moe-router-padding-for-quantization (TransformerConfig).");
MR_INIT_RULE(kParamGather, "init.transformer.fp8-param-gather-needs-fp8",
             "--fp8-param-gather needs --fp8-format (TransformerConfig).");
MR_INIT_RULE(kQuantizerFactory, "init.transformer.custom-recipe-quantizer-factory",
             "--fp8-recipe custom (with --fp8-format) needs --fp8-quantizer-factory, and --fp4-recipe custom (with "
             "--fp4-format) needs --fp4-quantizer-factory (TransformerConfig).");
MR_INIT_RULE(kGdn, "init.transformer.gated-delta-net",
             "--experimental-attention-variant gdn needs --linear-attention-freq; a Gated DeltaNet variant (gdn, gdn2) "
             "needs a non-zero --linear-num-key-heads, --linear-num-value-heads a multiple of it, and both a multiple of the "
             "tensor- times context-parallel size (TransformerConfig).");
MR_INIT_RULE(kDsa, "init.transformer.dsa-attention",
             "DSA attention (--experimental-attention-variant dsa, or D in --hybrid-layer-pattern) needs "
             "--disable-bias-linear, --dsa-indexer-topk-freq 1 or more, a --dsa-indexer-skip-topk-offset of 0 or more, "
             "--no-rope-fusion and, with context parallelism, --cp-comm-type allgather (TransformerConfig).");
MR_INIT_RULE(kRopeType, "init.transformer.rope-type-needs-mla",
             "--rope-type yarn needs --multi-latent-attention: other attention supports --rope-type rope only "
             "(core_transformer_config_from_args).");
MR_INIT_RULE(kNvlsKernels, "init.transformer.nvls-kernels-need-inference-optimized",
             "--inference-disable-triton-nvls-kernels needs --transformer-impl inference_optimized (TransformerConfig).");
MR_INIT_RULE(kMtpHsm, "init.transformer.mtp-hsm-needs-two-layers",
             "--mtp-hsm needs --mtp-num-layers 2 or more (TransformerConfig).");
MR_INIT_RULE(kOneActivation, "init.transformer.one-activation",
             "--squared-relu and --quick-geglu cannot be combined with --swiglu (core_transformer_config_from_args).");
MR_INIT_RULE(kXavierUniform, "init.transformer.xavier-uniform",
             "--init-method-xavier-uniform makes core_transformer_config_from_args pass scaled_init_method, which "
             "TransformerConfig has no field for: the model's config construction raises TypeError.");
MR_INIT_RULE(kBiasActFusion, "init.transformer.bias-activation-fusion",
             "The bias-activation fusion (on unless --no-bias-gelu-fusion / --no-bias-swiglu-fusion) needs a GeLU, "
             "SwiGLU or quick-GeGLU activation, a zero --glu-linear-offset unless quick-GeGLU, and no "
             "--use-te-activation-func (TransformerConfig).");
MR_INIT_RULE(kFusedResidualRms, "init.transformer.fused-residual-rmsnorm",
             "--fused-residual-rmsnorm needs --normalization RMSNorm (TransformerConfig).");
MR_INIT_RULE(kTeActivation, "init.transformer.te-activation-func",
             "--use-te-activation-func supports GeLU/GeGLU, SiLU/SwiGLU and ReLU only, not --squared-relu or "
             "--quick-geglu (TransformerConfig).");
MR_INIT_RULE(kSwigluClamp, "init.transformer.swiglu-clamp",
             "--activation-func-clamp-value with --swiglu must be finite and positive, and needs an MoE model, a zero "
             "--glu-linear-offset and no --use-te-activation-func (TransformerConfig).");
MR_INIT_RULE(kFp8Bf16Layers, "init.transformer.fp8-bf16-layers",
             "With --fp8-format, --first-last-layers-bf16 does not work with --fp8-recipe delayed, and "
             "--num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16 lie between 0 and the layers per pipeline "
             "stage (TransformerConfig).");
MR_INIT_RULE(kMlaInterleaved, "init.transformer.mla-rotary-interleaved",
             "--rotary-interleaved does not work with --multi-latent-attention (TransformerConfig).");
MR_INIT_RULE(kMlaRopeFusion, "init.transformer.mla-rope-fusion-needs-yarn",
             "With --multi-latent-attention, RoPE fusion (on unless --no-rope-fusion) needs --rope-type yarn "
             "(MLATransformerConfig).");
MR_INIT_RULE(kNoRopeFreq, "init.transformer.no-rope-freq-layers",
             "--no-rope-freq N must divide --num-layers, a --no-rope-freq pattern must have one entry per layer, and "
             "neither works with --flash-decode (TransformerConfig).");
MR_INIT_RULE(kCpCommPerLayer, "init.transformer.cp-comm-type-per-layer",
             "With context parallelism, several --cp-comm-type values must be one per layer (--num-layers of them) "
             "(TransformerConfig).");
MR_INIT_RULE(kDeferWgrad, "init.model-parallel.defer-embedding-wgrad",
             "--defer-embedding-wgrad-compute needs pipeline parallelism, gradient accumulation fusion and a "
             "--wgrad-deferral-limit of 0 or more (ModelParallelConfig).");
MR_INIT_RULE(kP2pWarmupFlush, "init.model-parallel.p2p-warmup-flush",
             "--overlap-p2p-communication-warmup-flush needs P2P communication overlap, which only the interleaved "
             "(virtual pipeline) schedule keeps on (ModelParallelConfig).");

const char* kTc = "TransformerConfig";
const char* kMpc = "ModelParallelConfig";

std::string v(const Context& ctx, std::string_view dest) { return ctx[dest].py_str(); }

// The activation core_transformer_config_from_args gives TransformerConfig.
enum class Act { Gelu, Silu, SquaredRelu, QuickGelu };
Act activation(const Context& ctx) {
  if (ctx.on("squared_relu")) return Act::SquaredRelu;
  if (ctx.on("quick_geglu")) return Act::QuickGelu;
  if (ctx.on("swiglu")) return Act::Silu;
  return Act::Gelu;
}
bool gated(const Context& ctx) { return ctx.on("swiglu") || ctx.on("quick_geglu"); }
const char* act_flag(Act a) {
  switch (a) {
    case Act::Silu: return "--swiglu";
    case Act::SquaredRelu: return "--squared-relu";
    case Act::QuickGelu: return "--quick-geglu";
    case Act::Gelu: break;
  }
  return "GeLU (the default)";
}

}  // namespace

void transformer_attention(Context& ctx) {
  const int64_t tp = ctx.i("tensor_model_parallel_size");
  if (tp < 1 || !set(ctx, "num_attention_heads")) return;  // not what Megatron's chain lets through
  const int64_t heads = ctx.i("num_attention_heads");
  ctx.require(py_mod(heads, tp) == 0, kHeadsTp,
              would_fail(kTc) + "--num-attention-heads (" + std::to_string(heads) +
                  ") must be a multiple of --tensor-model-parallel-size (" + std::to_string(tp) + ")",
              {"num_attention_heads", "tensor_model_parallel_size"});
  // Without --group-query-attention the config's num_query_groups is the number of heads (checked above).
  if (ctx.on("group_query_attention") && set(ctx, "num_query_groups")) {
    const int64_t groups = ctx.i("num_query_groups");
    if (groups >= 1)
      ctx.require(py_mod(groups, tp) == 0 || py_mod(tp, groups) == 0, kQueryGroupsTp,
                  would_fail(kTc) + "--num-query-groups (" + std::to_string(groups) +
                      ") must be a multiple or a divisor of --tensor-model-parallel-size (" + std::to_string(tp) + ")",
                  {"num_query_groups", "group_query_attention", "tensor_model_parallel_size"});
    // Attention (megatron/core/transformer/attention.py): each group's keys and values serve heads / groups
    // query heads. Not MLA's, which has no query groups, nor a hybrid pattern's without a '*' (attention) layer.
    const bool builds_attention =
        !set(ctx, "hybrid_layer_pattern") || ctx.s("hybrid_layer_pattern").find('*') != std::string::npos;
    if (groups >= 1 && !ctx.on("multi_latent_attention") && builds_attention)
      ctx.require(py_mod(heads, groups) == 0, kHeadsGroups,
                  would_fail("its attention layer") + "--num-attention-heads (" + std::to_string(heads) +
                      ") must be a multiple of --num-query-groups (" + std::to_string(groups) +
                      "): each query group's keys and values serve a whole number of query heads (Transformer "
                      "Engine's DotProductAttention asserts it, and the local attention's QKV split fails)",
                  {"num_attention_heads", "num_query_groups", "group_query_attention"});
  }
  // TransformerConfig.__post_init__ (the public megatron/core/transformer/transformer_config.py).
  if (ctx.has("gdp_num_householder") && ctx["gdp_num_householder"].is_int())
    ctx.require(ctx.i("gdp_num_householder") >= 1, kGdpHouseholder,
                would_fail(kTc) + "--gdp-num-householder must be positive (got " + v(ctx, "gdp_num_householder") + ")",
                {"gdp_num_householder"});
  if (ctx.on("enable_mhc_connections"))
    ctx.require(ctx.i("pipeline_model_parallel_size") <= 1, kMhcPipeline,
                would_fail(kTc) + "--enable-mhc-connections does not support --pipeline-model-parallel-size above 1 "
                    "yet (got " + v(ctx, "pipeline_model_parallel_size") + "; NotImplementedError)",
                {"enable_mhc_connections", "pipeline_model_parallel_size"});
  if (ctx.on("enable_mhc_connections")) {
    const std::string why = would_fail(kTc) + "--enable-mhc-connections ";
    ctx.require(!set(ctx, "mtp_num_layers"), kMhcFeatures,
                why + "is not compatible with multi-token prediction (--mtp-num-layers " + v(ctx, "mtp_num_layers") +
                    "; leave it unset)",
                {"enable_mhc_connections", "mtp_num_layers"});
    ctx.require(!(ctx["recompute_granularity"] == Value("full")), kMhcFeatures,
                why + "is not yet compatible with --recompute-granularity full (NotImplementedError; use selective "
                      "recomputation with mhc in --recompute-modules)",
                {"enable_mhc_connections", "recompute_granularity"});
    ctx.require(!ctx.on("inference_fuse_tp_communication"), kMhcFeatures,
                why + "is not compatible with --inference-fuse-tp-communication (NotImplementedError)",
                {"enable_mhc_connections", "inference_fuse_tp_communication"});
  }
  if (ctx.on("fp8_output_proj")) {
    ctx.require(set(ctx, "fp8"), kFp8OutputProj,
                would_fail(kTc) + "--fp8-output-proj must be used together with fp8 mode (--fp8-format)",
                {"fp8_output_proj", "fp8"});
    if (set(ctx, "fp8"))
      ctx.require(ctx["fp8_recipe"] == Value("mxfp8"), kFp8OutputProj,
                  would_fail(kTc) + "--fp8-output-proj needs --fp8-recipe mxfp8 (got " + v(ctx, "fp8_recipe") + ")",
                  {"fp8_output_proj", "fp8_recipe"});
  }
  if (ctx.on("batch_invariant_mode")) {
    const std::string why = would_fail(kTc) + "--batch-invariant-mode ";
    ctx.require(ctx["params_dtype"] == Value("torch.bfloat16"), kBatchInvariant,
                why + "supports bf16 model parameters only (--bf16; got " + v(ctx, "params_dtype") + ")",
                {"batch_invariant_mode", "bf16"});
    ctx.require(ctx["attention_backend"] == Value("AttnBackend.flash"), kBatchInvariant,
                why + "supports FlashAttention only (--attention-backend flash; got " + v(ctx, "attention_backend") + ")",
                {"batch_invariant_mode", "attention_backend"});
    ctx.require(set(ctx, "flash_attention_version") &&
                    (ctx.i("flash_attention_version") == 3 || ctx.i("flash_attention_version") == 4),
                kBatchInvariant,
                why + "needs --flash-attention-version 3 or 4 (got " + v(ctx, "flash_attention_version") + ")",
                {"batch_invariant_mode", "flash_attention_version"});
    ctx.require(ctx.i("context_parallel_size") == 1, kBatchInvariant,
                why + "does not support context parallelism (--context-parallel-size " +
                    v(ctx, "context_parallel_size") + ")",
                {"batch_invariant_mode", "context_parallel_size"});
    ctx.require(ctx.f("attention_dropout") == 0.0, kBatchInvariant,
                why + "does not support attention dropout (--attention-dropout " + v(ctx, "attention_dropout") + ")",
                {"batch_invariant_mode", "attention_dropout"});
    // The MoE branch ((num_moe_experts or 0) > 0). Its DeepGEMM check depends on what is installed and is left out.
    if (set(ctx, "num_experts") && ctx.i("num_experts") > 0) {
      const std::string moe = why + "with MoE (--num-experts " + v(ctx, "num_experts") + ") ";
      if (!(ctx["transformer_impl"] == Value("inference_optimized")))
        ctx.require(ctx["moe_token_dispatcher_type"] == Value("alltoall"), kBatchInvariant,
                    moe + "needs --moe-token-dispatcher-type alltoall (got " + v(ctx, "moe_token_dispatcher_type") + ")",
                    {"batch_invariant_mode", "moe_token_dispatcher_type", "num_experts"});
      ctx.require(!set(ctx, "fp8") && !set(ctx, "fp4"), kBatchInvariant,
                  moe + "is bf16-only: drop --fp8-format / --fp4-format (got " + v(ctx, "fp8") + " / " + v(ctx, "fp4") +
                      ")",
                  {"batch_invariant_mode", "fp8", "fp4"});
      for (const char* fused : {"moe_permute_fusion", "moe_permute_fusion_into_hybridep"})
        ctx.require(!ctx.on(fused), kBatchInvariant,
                    moe + "needs the unfused permute path: drop " + Context::flag(fused),
                    {"batch_invariant_mode", fused});
      for (const char* pad : {"moe_pad_expert_input_to_capacity", "moe_pad_experts_for_cuda_graph_inference"})
        ctx.require(!ctx.on(pad), kBatchInvariant,
                    moe + "supports dropless routing only: drop " + Context::flag(pad), {"batch_invariant_mode", pad});
    }
  }
  // TransformerConfig.__post_init__: the inference-optimized layers are RMSNorm without biases.
  if (ctx["transformer_impl"] == Value("inference_optimized")) {
    const std::string why = would_fail(kTc) + "--transformer-impl inference_optimized ";
    ctx.require(ctx["normalization"] == Value("RMSNorm"), kInferenceOptimized,
                why + "needs --normalization RMSNorm (got " + v(ctx, "normalization") + ")",
                {"transformer_impl", "normalization"});
    ctx.require(!ctx.on("layernorm_zero_centered_gamma"), kInferenceOptimized,
                why + "does not support zero-centered norm weights (--apply-layernorm-1p)",
                {"transformer_impl", "layernorm_zero_centered_gamma"});
    ctx.require(!ctx.on("add_bias_linear"), kInferenceOptimized,
                why + "does not support linear biases (pass --disable-bias-linear)", {"transformer_impl", "add_bias_linear"});
    ctx.require(!ctx.on("add_qkv_bias"), kInferenceOptimized, why + "does not support --add-qkv-bias",
                {"transformer_impl", "add_qkv_bias"});
    // Its MoE layers (num_moe_experts is not None), checked before the config drops a negative capacity factor.
    if (set(ctx, "num_experts")) {
      const std::string moe = why + "with MoE (--num-experts " + v(ctx, "num_experts") + ") ";
      ctx.require(ctx.i("expert_tensor_parallel_size") <= 1, kInferenceOptimized,
                  moe + "does not support expert tensor parallelism (--expert-tensor-parallel-size " +
                      v(ctx, "expert_tensor_parallel_size") + ", which defaults to --tensor-model-parallel-size)",
                  {"transformer_impl", "expert_tensor_parallel_size", "num_experts"});
      ctx.require(!set(ctx, "moe_expert_capacity_factor"), kInferenceOptimized,
                  moe + "supports dropless MoE only: drop --moe-expert-capacity-factor (got " +
                      v(ctx, "moe_expert_capacity_factor") + ")",
                  {"transformer_impl", "moe_expert_capacity_factor", "num_experts"});
      ctx.require(!ctx.on("moe_router_padding_for_quantization"), kInferenceOptimized,
                  moe + "does not support --moe-router-padding-for-quantization",
                  {"transformer_impl", "moe_router_padding_for_quantization", "num_experts"});
      ctx.require(ctx["moe_router_dtype"] == Value("fp32"), kInferenceOptimized,
                  moe + "needs --moe-router-dtype fp32 (got " + v(ctx, "moe_router_dtype") + ")",
                  {"transformer_impl", "moe_router_dtype", "num_experts"});
    }
  }
  // core_transformer_config_from_args passes fp8_param = --fp8-param-gather (validate_args already ties
  // --fp4-param-gather to --fp4-format).
  ctx.require(!ctx.on("fp8_param_gather") || set(ctx, "fp8"), kParamGather,
              would_fail(kTc) + "--fp8-param-gather must be used together with fp8 mode (--fp8-format)",
              {"fp8_param_gather", "fp8"});
  if (set(ctx, "fp8") && ctx["fp8_recipe"] == Value("custom"))
    ctx.require(ctx.on("fp8_quantizer_factory"), kQuantizerFactory,
                would_fail(kTc) + "--fp8-recipe custom needs --fp8-quantizer-factory (a package.module.function path)",
                {"fp8_recipe", "fp8_quantizer_factory"});
  if (set(ctx, "fp4") && ctx["fp4_recipe"] == Value("custom"))
    ctx.require(ctx.on("fp4_quantizer_factory"), kQuantizerFactory,
                would_fail(kTc) + "--fp4-recipe custom needs --fp4-quantizer-factory (a package.module.function path)",
                {"fp4_recipe", "fp4_quantizer_factory"});
  // The experimental attention variants (TransformerConfig normalizes gated_delta_net to gdn first).
  // core_transformer_config_from_args sets the variant to dsa when the hybrid layer pattern has a D layer.
  const bool hybrid_dsa = set(ctx, "hybrid_layer_pattern") && ctx.s("hybrid_layer_pattern").find('D') != std::string::npos;
  const std::string variant = set(ctx, "experimental_attention_variant") ? ctx.s("experimental_attention_variant") : "";
  if (!hybrid_dsa && (variant == "gdn" || variant == "gated_delta_net" || variant == "gdn2")) {
    const std::string why = would_fail(kTc) + "--experimental-attention-variant " + variant + " ";
    if (variant != "gdn2")
      ctx.require(set(ctx, "linear_attention_freq"), kGdn, why + "needs --linear-attention-freq",
                  {"experimental_attention_variant", "linear_attention_freq"});
    const int64_t kh = ctx.i("linear_num_key_heads"), vh = ctx.i("linear_num_value_heads");
    const int64_t tp_cp = ctx.i("tensor_model_parallel_size") * ctx.i("context_parallel_size");
    // TransformerConfig takes linear_num_value_heads % linear_num_key_heads: 0 key heads is a ZeroDivisionError.
    ctx.require(kh != 0, kGdn, why + "needs a non-zero --linear-num-key-heads (got 0: ZeroDivisionError)",
                {"linear_num_key_heads"});
    if (kh != 0)
      ctx.require(py_mod(vh, kh) == 0, kGdn,
                  why + "needs --linear-num-value-heads (" + std::to_string(vh) +
                      ") a multiple of --linear-num-key-heads (" + std::to_string(kh) + ")",
                  {"linear_num_value_heads", "linear_num_key_heads"});
    if (kh != 0 && tp_cp >= 1)
      for (const char* dest : {"linear_num_key_heads", "linear_num_value_heads"})
        ctx.require(py_mod(ctx.i(dest), tp_cp) == 0, kGdn,
                    why + "needs " + Context::flag(dest) + " (" + v(ctx, dest) +
                        ") a multiple of the tensor- times context-parallel size (" + std::to_string(tp_cp) + ")",
                    {dest, "tensor_model_parallel_size", "context_parallel_size"});
  }
  if (variant == "dsa" || hybrid_dsa) {
    const std::string why = would_fail(kTc) + "DSA attention (" +
                            (variant == "dsa" ? std::string("--experimental-attention-variant dsa")
                                              : "--hybrid-layer-pattern " + v(ctx, "hybrid_layer_pattern")) +
                            ") ";
    ctx.require(!ctx.on("add_bias_linear"), kDsa, why + "requires add_bias_linear=False: pass --disable-bias-linear",
                {"experimental_attention_variant", "hybrid_layer_pattern", "add_bias_linear"});
    ctx.require(ctx.i("dsa_indexer_topk_freq") >= 1, kDsa,
                why + "needs --dsa-indexer-topk-freq 1 or more (got " + v(ctx, "dsa_indexer_topk_freq") + ")",
                {"dsa_indexer_topk_freq"});
    ctx.require(ctx.i("dsa_indexer_skip_topk_offset") >= 0, kDsa,
                why + "needs --dsa-indexer-skip-topk-offset 0 or more (got " + v(ctx, "dsa_indexer_skip_topk_offset") + ")",
                {"dsa_indexer_skip_topk_offset"});
    ctx.require(!ctx.on("apply_rope_fusion"), kDsa, why + "does not support RoPE fusion: pass --no-rope-fusion",
                {"experimental_attention_variant", "hybrid_layer_pattern", "apply_rope_fusion"});
    if (ctx.i("context_parallel_size") > 1 && ctx["cp_comm_type"].is_list())
      for (const Value& t : ctx["cp_comm_type"].as_list()) {
        std::string c = t.is_str() ? t.as_str() : "";
        c.erase(std::remove(c.begin(), c.end(), '_'), c.end());
        std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
        ctx.require(c == "allgather", kDsa,
                    why + "with context parallelism supports --cp-comm-type allgather only (got " +
                        v(ctx, "cp_comm_type") + ")",
                    {"cp_comm_type", "context_parallel_size"});
      }
  }
  if (ctx.on("inference_disable_triton_nvls_kernels"))
    ctx.require(ctx["transformer_impl"] == Value("inference_optimized"), kNvlsKernels,
                would_fail(kTc) + "--inference-disable-triton-nvls-kernels is only supported with --transformer-impl "
                    "inference_optimized (got " + v(ctx, "transformer_impl") + ")",
                {"inference_disable_triton_nvls_kernels", "transformer_impl"});
  if (ctx.on("inference_fuse_tp_communication")) {
    const std::string why = would_fail(kTc) + "--inference-fuse-tp-communication ";
    ctx.require(ctx["transformer_impl"] == Value("inference_optimized"), kFuseTpComm,
                why + "is only supported with --transformer-impl inference_optimized (got " +
                    v(ctx, "transformer_impl") + ")",
                {"inference_fuse_tp_communication", "transformer_impl"});
    ctx.require(!set(ctx, "num_experts"), kFuseTpComm,
                why + "is not supported for MoE models (--num-experts " + v(ctx, "num_experts") + ")",
                {"inference_fuse_tp_communication", "num_experts"});
  }
  if (ctx.on("mtp_hsm"))
    ctx.require(set(ctx, "mtp_num_layers") && ctx.i("mtp_num_layers") >= 2, kMtpHsm,
                would_fail(kTc) + "--mtp-hsm needs --mtp-num-layers 2 or more (got " + v(ctx, "mtp_num_layers") + ")",
                {"mtp_hsm", "mtp_num_layers"});
}

void transformer_activation(Context& ctx) {
  // core_transformer_config_from_args asserts one activation switch besides --swiglu.
  for (const char* other : {"squared_relu", "quick_geglu"})
    ctx.require(!(ctx.on(other) && ctx.on("swiglu")), kOneActivation,
                would_fail("core_transformer_config_from_args") + Context::flag(other) +
                    " cannot be combined with --swiglu",
                {other, "swiglu"});
  // core_transformer_config_from_args sets kw_args['scaled_init_method'] with --init-method-xavier-uniform, and
  // TransformerConfig(**kw_args) takes no such keyword (its field is output_layer_init_method), so every model
  // built through it stops there.
  ctx.require(!ctx.on("init_method_xavier_uniform"), kXavierUniform,
              would_fail("core_transformer_config_from_args") +
                  "--init-method-xavier-uniform passes scaled_init_method=xavier_uniform_ to TransformerConfig, "
                  "which has no such field (TypeError: unexpected keyword argument 'scaled_init_method'); leave the "
                  "flag out (the weights then start normal with --init-method-std)",
              {"init_method_xavier_uniform"});
  const Act act = activation(ctx);
  const bool glu = gated(ctx);
  const double offset = ctx.f("glu_linear_offset");
  const bool te_act = ctx.on("use_te_activation_func");
  // The fusion switch the config gets: --no-bias-swiglu-fusion for SwiGLU, --no-bias-gelu-fusion otherwise.
  const char* fusion = ctx.on("swiglu") ? "bias_swiglu_fusion" : "bias_gelu_fusion";
  if (ctx.on(fusion)) {
    const std::string off = "(or turn the fusion off with " + Context::flag(fusion) + ")";
    ctx.require(act != Act::SquaredRelu, kBiasActFusion,
                would_fail(kTc) + "the bias-activation fusion supports GeLU, SwiGLU and quick-GeGLU, not " +
                    act_flag(act) + " " + off,
                {fusion, "squared_relu"});
    ctx.require(!(act == Act::Gelu && !glu && !ctx.on("add_bias_linear")), kBiasActFusion,
                would_fail(kTc) + "the bias-GeLU fusion needs a linear bias (drop --disable-bias-linear) " + off,
                {fusion, "add_bias_linear"});
    ctx.require(offset == 0.0 || act == Act::QuickGelu, kBiasActFusion,
                would_fail(kTc) + "with the bias-activation fusion, --glu-linear-offset " + v(ctx, "glu_linear_offset") +
                    " needs --quick-geglu (the activation is " + act_flag(act) + ") " + off,
                {fusion, "glu_linear_offset"});
    ctx.require(!te_act, kBiasActFusion,
                would_fail(kTc) + "the bias-activation fusion and --use-te-activation-func cannot both be on " + off,
                {fusion, "use_te_activation_func"});
  }
  if (ctx.on("fused_residual_rmsnorm"))
    ctx.require(ctx["normalization"] == Value("RMSNorm"), kFusedResidualRms,
                would_fail(kTc) + "--fused-residual-rmsnorm needs --normalization RMSNorm (got " +
                    v(ctx, "normalization") + ")",
                {"fused_residual_rmsnorm", "normalization"});
  if (te_act)
    ctx.require(act == Act::Gelu || act == Act::Silu, kTeActivation,
                would_fail(kTc) + "--use-te-activation-func supports GeLU, SwiGLU and ReLU, not " + act_flag(act),
                {"use_te_activation_func", act == Act::SquaredRelu ? "squared_relu" : "quick_geglu"});
  if (set(ctx, "fp8") && ctx.on("first_last_layers_bf16") && set(ctx, "num_layers")) {
    ctx.require(!(ctx["fp8_recipe"] == Value("delayed")), kFp8Bf16Layers,
                would_fail(kTc) + "--first-last-layers-bf16 does not work with --fp8-recipe delayed",
                {"first_last_layers_bf16", "fp8_recipe"});
    const int64_t pp = ctx.i("pipeline_model_parallel_size");
    if (pp >= 1) {
      const int64_t per_stage = py_floordiv(ctx.i("num_layers"), pp);
      for (const char* dest : {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"}) {
        const int64_t n = ctx.i(dest);
        ctx.require(n >= 0 && n <= per_stage, kFp8Bf16Layers,
                    would_fail(kTc) + Context::flag(dest) + " (" + std::to_string(n) +
                        ") must be between 0 and the layers per pipeline stage (" + std::to_string(per_stage) + ")",
                    {dest, "num_layers", "pipeline_model_parallel_size"});
      }
    }
  }
  if (set(ctx, "activation_func_clamp_value") && act == Act::Silu && glu) {
    const double c = ctx.f("activation_func_clamp_value");
    const std::string what = would_fail(kTc) + "--activation-func-clamp-value " + v(ctx, "activation_func_clamp_value") +
                             " with --swiglu ";
    ctx.require(std::isfinite(c) && c > 0, kSwigluClamp, what + "must be finite and greater than 0",
                {"activation_func_clamp_value", "swiglu"});
    ctx.require(set(ctx, "num_experts"), kSwigluClamp, what + "is only supported in MoE models (--num-experts)",
                {"activation_func_clamp_value", "num_experts"});
    ctx.require(offset == 0.0, kSwigluClamp, what + "needs --glu-linear-offset 0 (got " + v(ctx, "glu_linear_offset") + ")",
                {"activation_func_clamp_value", "glu_linear_offset"});
    ctx.require(!te_act, kSwigluClamp, what + "cannot be used with --use-te-activation-func",
                {"activation_func_clamp_value", "use_te_activation_func"});
  }
}

void transformer_rope(Context& ctx) {
  const bool mla = ctx.on("multi_latent_attention");
  if (mla) {
    ctx.require(!ctx.on("rotary_interleaved"), kMlaInterleaved,
                would_fail(kTc) + "--rotary-interleaved does not work with --multi-latent-attention",
                {"rotary_interleaved", "multi_latent_attention"});
    // MLATransformerConfig's rope_type defaults to yarn when --rope-type is not given.
    const bool yarn = !set(ctx, "rope_type") || ctx["rope_type"] == Value("yarn");
    ctx.require(!ctx.on("apply_rope_fusion") || yarn, kMlaRopeFusion,
                would_fail("MLATransformerConfig") + "RoPE fusion with --multi-latent-attention needs --rope-type yarn "
                    "(got --rope-type " + v(ctx, "rope_type") + "; or pass --no-rope-fusion)",
                {"apply_rope_fusion", "rope_type", "multi_latent_attention"});
  }
  // core_transformer_config_from_args: a --rope-type other than rope needs MLA.
  if (set(ctx, "rope_type"))
    ctx.require(mla || ctx["rope_type"] == Value("rope"), kRopeType,
                would_fail("core_transformer_config_from_args") + "--rope-type " + v(ctx, "rope_type") +
                    " needs --multi-latent-attention: other attention supports --rope-type rope only",
                {"rope_type", "multi_latent_attention"});
  if (ctx.has("no_rope_freq") && ctx.on("no_rope_freq") && set(ctx, "num_layers")) {
    const Value& freq = ctx["no_rope_freq"];
    const int64_t layers = ctx.i("num_layers");
    ctx.require(!ctx.on("flash_decode"), kNoRopeFreq, would_fail(kTc) + "--flash-decode cannot be used with --no-rope-freq",
                {"flash_decode", "no_rope_freq"});
    if (freq.is_int()) {
      const int64_t n = freq.as_int();
      ctx.require(n != 0 && py_mod(layers, n) == 0, kNoRopeFreq,
                  would_fail(kTc) + "--no-rope-freq " + std::to_string(n) + " must divide --num-layers (" +
                      std::to_string(layers) + ")",
                  {"no_rope_freq", "num_layers"});
    } else if (freq.is_list()) {
      const auto n = static_cast<int64_t>(freq.as_list().size());
      ctx.require(n == layers, kNoRopeFreq,
                  would_fail(kTc) + "the --no-rope-freq pattern has " + std::to_string(n) +
                      " entries but the model has " + std::to_string(layers) + " layers (--num-layers)",
                  {"no_rope_freq", "num_layers"});
    }
  }
  // core_transformer_config_from_args passes a one-element --cp-comm-type as a string; several values are per layer.
  if (ctx.i("context_parallel_size") > 1 && ctx["cp_comm_type"].is_list() && set(ctx, "num_layers")) {
    const auto n = static_cast<int64_t>(ctx["cp_comm_type"].as_list().size());
    const int64_t layers = ctx.i("num_layers");
    ctx.require(n == 1 || n == layers, kCpCommPerLayer,
                would_fail(kTc) + "--cp-comm-type has " + std::to_string(n) + " values; with several, there must be one "
                    "per layer (--num-layers " + std::to_string(layers) + ")",
                {"cp_comm_type", "num_layers", "context_parallel_size"});
  }
}

void model_parallel_config(Context& ctx) {
  // core_transformer_config_from_args (megatron/training/argument_utils.py) sets the quantization recipe from
  // --kitchen-config-file when it is not None, else from --kitchen-recipe-number when it is not None (those flags
  // exist only with Kitchen installed), then asserts there is none yet when --te-precision-config-file is truthy.
  // Whether the recipe files can be read is a launch-time file check (launch/program_inputs.h: launch.input-missing).
  if (set(ctx, "te_precision_config_file") && ctx.on("te_precision_config_file")) {
    for (const char* kitchen : {"kitchen_config_file", "kitchen_recipe_number"}) {
      if (!set(ctx, kitchen)) continue;
      ctx.require(false, kRecipeTwice,
                  would_fail("core_transformer_config_from_args") + "--te-precision-config-file " +
                      echo_word(v(ctx, "te_precision_config_file")) + " cannot be used with " + Context::flag(kitchen) +
                      " " + echo_word(v(ctx, kitchen)) + ": both configure the quantization recipe (Quantization "
                      "recipe already configured.); keep one",
                  {"te_precision_config_file", kitchen});
      break;  // the Kitchen recipe comes from the config file when both are given (argparse refuses that anyway)
    }
  }
  if (ctx.on("defer_embedding_wgrad_compute")) {
    const int64_t pp = ctx.i("pipeline_model_parallel_size");
    ctx.require(pp > 1, kDeferWgrad,
                would_fail(kMpc) + "--defer-embedding-wgrad-compute needs pipeline parallelism "
                    "(--pipeline-model-parallel-size is " + std::to_string(pp) + ")",
                {"defer_embedding_wgrad_compute", "pipeline_model_parallel_size"});
    ctx.require(ctx.on("gradient_accumulation_fusion"), kDeferWgrad,
                would_fail(kMpc) + "--defer-embedding-wgrad-compute needs gradient accumulation fusion (drop "
                    "--no-gradient-accumulation-fusion)",
                {"defer_embedding_wgrad_compute", "gradient_accumulation_fusion"});
    ctx.require(ctx.i("wgrad_deferral_limit") >= 0, kDeferWgrad,
                would_fail(kMpc) + "--wgrad-deferral-limit (" + v(ctx, "wgrad_deferral_limit") + ") must be 0 or more",
                {"defer_embedding_wgrad_compute", "wgrad_deferral_limit"});
  }
  // The config's batch_p2p_comm is `not overlap_p2p_comm`, and validate_args turns overlap_p2p_comm off without
  // the interleaved schedule.
  if (ctx.on("overlap_p2p_comm_warmup_flush"))
    ctx.require(ctx.on("overlap_p2p_comm"), kP2pWarmupFlush,
                would_fail(kMpc) + "--overlap-p2p-communication-warmup-flush needs P2P communication overlap, which is "
                    "off (--no-overlap-p2p-communication, or no virtual pipeline stages)",
                {"overlap_p2p_comm_warmup_flush", "overlap_p2p_comm"});
}

}  // namespace mr::init
