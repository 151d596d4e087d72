// The init stage (init.h): the MoE checks of Megatron's TransformerConfig.__post_init__
// (megatron/core/transformer/transformer_config.py) that validate_args() does not make — the router (score
// function, top-k, group-limited routing, padding for low precision), the token dispatcher and its backends,
// capacity and padding, the shared experts and the expert bias. The config's num_moe_experts is --num-experts
// (None for a dense model: validate_args turns 0 into None); the other MoE fields keep their argument names.
#include <string>

#include "config/validate/init.h"
#include "config/validate/python.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kGroupedTensor, "init.moe.grouped-tensor-needs-grouped-gemm",
             "--moe-use-grouped-tensor needs --moe-grouped-gemm (TransformerConfig).");
MR_INIT_RULE(kSingleGrouped, "init.moe.single-grouped-needs-grouped-gemm",
             "--moe-single-grouped-weight and --moe-single-grouped-bias need --moe-grouped-gemm and the grouped tensor "
             "(--moe-use-grouped-tensor, or --use-transformer-engine-op-fuser); the single grouped weight takes "
             "--fp8-recipe mxfp8 or --fp4-recipe nvfp4 only (with FP4 also --fp4-param-gather), the single grouped "
             "bias needs linear biases (no --disable-bias-linear) (TransformerConfig).");
MR_INIT_RULE(kRankCapacity, "init.moe.rank-capacity-factor-backend",
             "--moe-expert-rank-capacity-factor needs --moe-flex-dispatcher-backend hybridep or ncclep; with hybridep "
             "also --use-transformer-engine-op-fuser or --moe-use-grouped-tensor (TransformerConfig).");
MR_INIT_RULE(kDispatchDtype, "init.moe.dispatch-dtype-needs-ncclep",
             "--moe-dispatch-fwd-dtype / --moe-combine-bwd-dtype other than bf16 need --moe-token-dispatcher-type flex "
             "with --moe-flex-dispatcher-backend ncclep, --use-transformer-engine-op-fuser and --moe-grouped-gemm "
             "(TransformerConfig).");
MR_INIT_RULE(kAuxLossCoeff, "init.moe.aux-loss-coeff-per-type",
             "Several --moe-router-load-balancing-type values need as many --moe-aux-loss-coeff values "
             "(TransformerConfig).");
MR_INIT_RULE(kPagedStash, "init.moe.paged-stash",
             "--moe-paged-stash needs --moe-expert-rank-capacity-factor, no CPU offloading and no expert_fc1, moe_act "
             "or fused_group_mlp in --offload-modules (TransformerConfig).");
MR_INIT_RULE(kDelayWgrad, "init.moe.delay-wgrad-needs-ep-overlap",
             "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm (TransformerConfig).");
MR_INIT_RULE(kDispatchBwdOverlap, "init.moe.dispatch-backward-overlap-exclusive",
             "--overlap-dispatch-backward-with-experts-wgrad excludes --overlap-moe-expert-parallel-comm and "
             "--delay-wgrad-compute (TransformerConfig).");
MR_INIT_RULE(kFfnWithoutExperts, "init.moe.ffn-hidden-size-needs-experts",
             "--moe-ffn-hidden-size needs --num-experts, unless --moe-layer-freq leaves some layers dense "
             "(TransformerConfig).");
MR_INIT_RULE(kFlexBackend, "init.moe.flex-dispatcher-backend",
             "--moe-enable-deepep and --moe-flex-dispatcher-backend ncclep need --moe-token-dispatcher-type flex; "
             "ncclep with --moe-use-grouped-tensor needs --use-transformer-engine-op-fuser; "
             "--moe-enable-deepep excludes --moe-flex-dispatcher-backend hybridep; the DeepEP backend does not pad "
             "to capacity (TransformerConfig).");
MR_INIT_RULE(kSharedSize, "init.moe.shared-expert-size-positive",
             "--moe-shared-expert-intermediate-size, when given, must be greater than 0 (num_shared_experts x "
             "ffn_size_of_each_shared_expert), on a dense model too (TransformerConfig).");
MR_INIT_RULE(kSharedOverlap, "init.moe.shared-expert-overlap-dispatcher",
             "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall or flex (TransformerConfig).");
MR_INIT_RULE(kCapacityBalancing, "init.moe.capacity-factor-load-balancing",
             "--moe-expert-capacity-factor works only with the aux_loss, seq_aux_loss, global_aux_loss or none load "
             "balancing (TransformerConfig).");
MR_INIT_RULE(kPadNeedsCapacity, "init.moe.pad-needs-capacity-factor",
             "--moe-pad-expert-input-to-capacity needs a --moe-expert-capacity-factor of 0 or more "
             "(TransformerConfig).");
MR_INIT_RULE(kBiasEtp, "init.moe.bias-needs-etp-1",
             "An MoE model with linear biases (no --disable-bias-linear) needs an expert tensor-parallel size of 1 "
             "(TransformerConfig).");
MR_INIT_RULE(kExpertBiasScore, "init.moe.expert-bias-score-function",
             "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid or sqrtsoftplus "
             "(TransformerConfig).");
MR_INIT_RULE(kRouterPadding, "init.moe.router-padding-quantization",
             "--moe-router-padding-for-quantization (or --moe-router-padding-for-fp8) needs --fp8-format or "
             "--fp4-format and a dispatcher other than allgather (TransformerConfig).");
MR_INIT_RULE(kTopk1PreSoftmax, "init.moe.topk-1-needs-pre-softmax",
             "--moe-router-topk 1 with the softmax score function needs --moe-router-pre-softmax, unless the load "
             "balancing is sinkhorn (TransformerConfig).");
MR_INIT_RULE(kGroupRouting, "init.moe.group-limited-routing",
             "--moe-router-group-topk needs --moe-router-num-groups, which must divide --num-experts and be at least "
             "--moe-router-group-topk (TransformerConfig).");
MR_INIT_RULE(kAllgatherVarlen, "init.moe.allgather-variable-seq-lengths",
             "The allgather token dispatcher (--moe-token-dispatcher-type's default, for dense and hybrid models too) "
             "does not support variable sequence lengths (sequence packing, --use-varlen-dataset) "
             "(TransformerConfig).");
MR_INIT_RULE(kEpOverlap, "init.moe.ep-comm-overlap",
             "--overlap-moe-expert-parallel-comm needs expert parallelism, the alltoall or flex dispatcher, bf16 or "
             "fp16, virtual pipeline stages with pipeline parallelism, no full or MoE recomputation (nor "
             "--recompute-method / --recompute-num-layers), no --moe-shared-expert-overlap, at most one MTP layer, "
             "with --cuda-graph-impl transformer_engine no moe or mlp in --cuda-graph-modules, and with the ncclep "
             "flex backend no expert_fc1 in --offload-modules; --ep-overlap-early-attn-memory-release needs it "
             "(TransformerConfig).");

const char* kTc = "TransformerConfig";

std::string v(const Context& ctx, std::string_view dest) { return ctx[dest].py_str(); }
bool is(const Context& ctx, std::string_view dest, const char* s) { return ctx[dest] == Value(s); }

// Whether a load-balancing type (a string, or a list of them after validate_args unwrapped a single one) is one
// of the types capacity dropping works with.
bool capacity_ok(const Value& lb) {
  auto ok = [](const Value& t) {
    return t == Value("aux_loss") || t == Value("seq_aux_loss") || t == Value("global_aux_loss") || t == Value("none");
  };
  if (!lb.is_list()) return ok(lb);
  for (const Value& t : lb.as_list())
    if (!ok(t)) return false;
  return true;
}

}  // namespace

void moe_config(Context& ctx) {
  const bool moe = set(ctx, "num_experts");
  const std::string disp = ctx.s("moe_token_dispatcher_type");
  const Value& backend = ctx["moe_flex_dispatcher_backend"];

  // use_transformer_engine_op_fuser with moe_grouped_gemm turns the grouped tensor on; without grouped GEMM the
  // flag cannot work.
  ctx.require(!ctx.on("moe_use_grouped_tensor") || ctx.on("moe_grouped_gemm"), kGroupedTensor,
              would_fail(kTc) + "--moe-use-grouped-tensor needs --moe-grouped-gemm",
              {"moe_use_grouped_tensor", "moe_grouped_gemm"});

  // TransformerConfig turns the grouped tensor on with the op fuser and grouped GEMM.
  const bool grouped_tensor =
      ctx.on("moe_use_grouped_tensor") || (ctx.on("use_transformer_engine_op_fuser") && ctx.on("moe_grouped_gemm"));
  for (const char* single : {"moe_single_grouped_weight", "moe_single_grouped_bias"})
    if (ctx.on(single))
      ctx.require(ctx.on("moe_grouped_gemm"), kSingleGrouped,
                  would_fail(kTc) + Context::flag(single) + " requires --moe-grouped-gemm", {single, "moe_grouped_gemm"});
  if (ctx.on("moe_grouped_gemm")) {
    if (ctx.on("moe_single_grouped_weight")) {
      const std::string why = would_fail(kTc) + "--moe-single-grouped-weight ";
      ctx.require(!(set(ctx, "fp8") && !is(ctx, "fp8_recipe", "mxfp8")) && !(set(ctx, "fp4") && !is(ctx, "fp4_recipe", "nvfp4")),
                  kSingleGrouped,
                  why + "supports high-precision weights, --fp8-recipe mxfp8 or --fp4-recipe nvfp4 only (got "
                        "--fp8-recipe " + v(ctx, "fp8_recipe") + " with --fp8-format " + v(ctx, "fp8") +
                      ", --fp4-recipe " + v(ctx, "fp4_recipe") + " with --fp4-format " + v(ctx, "fp4") + ")",
                  {"moe_single_grouped_weight", "fp8_recipe", "fp4_recipe"});
      ctx.require(!set(ctx, "fp4") || ctx.on("fp4_param_gather"), kSingleGrouped,
                  why + "with FP4 compute (--fp4-format) needs --fp4-param-gather",
                  {"moe_single_grouped_weight", "fp4", "fp4_param_gather"});
      ctx.require(grouped_tensor, kSingleGrouped,
                  why + "requires the grouped tensor (--moe-use-grouped-tensor, or --use-transformer-engine-op-fuser)",
                  {"moe_single_grouped_weight", "moe_use_grouped_tensor", "use_transformer_engine_op_fuser"});
    }
    if (ctx.on("moe_single_grouped_bias")) {
      ctx.require(ctx.on("add_bias_linear"), kSingleGrouped,
                  would_fail(kTc) + "--moe-single-grouped-bias requires linear biases (drop --disable-bias-linear)",
                  {"moe_single_grouped_bias", "add_bias_linear"});
      ctx.require(grouped_tensor, kSingleGrouped,
                  would_fail(kTc) + "--moe-single-grouped-bias requires the grouped tensor (--moe-use-grouped-tensor, "
                      "or --use-transformer-engine-op-fuser)",
                  {"moe_single_grouped_bias", "moe_use_grouped_tensor", "use_transformer_engine_op_fuser"});
    }
  }
  if (set(ctx, "moe_expert_rank_capacity_factor")) {
    ctx.require(backend == Value("hybridep") || backend == Value("ncclep"), kRankCapacity,
                would_fail(kTc) + "--moe-expert-rank-capacity-factor requires --moe-flex-dispatcher-backend hybridep "
                    "or ncclep (got " + backend.py_str() + ")",
                {"moe_expert_rank_capacity_factor", "moe_flex_dispatcher_backend"});
    if (backend == Value("hybridep"))
      ctx.require(ctx.on("use_transformer_engine_op_fuser") || grouped_tensor, kRankCapacity,
                  would_fail(kTc) + "--moe-expert-rank-capacity-factor with --moe-flex-dispatcher-backend hybridep "
                      "needs --use-transformer-engine-op-fuser or --moe-use-grouped-tensor",
                  {"moe_expert_rank_capacity_factor", "use_transformer_engine_op_fuser", "moe_use_grouped_tensor"});
  }

  if (!moe && set(ctx, "moe_ffn_hidden_size")) {
    // A mixed dense/MoE layer pattern (a 0 in the --moe-layer-freq list, or a frequency above 1) only warns.
    const Value& freq = ctx["moe_layer_freq"];
    bool mixed = freq.is_int() && freq.as_int() > 1;
    if (freq.is_list())
      for (const Value& x : freq.as_list()) mixed = mixed || x == Value(0);
    ctx.require(mixed, kFfnWithoutExperts,
                would_fail(kTc) + "--moe-ffn-hidden-size " + v(ctx, "moe_ffn_hidden_size") +
                    " is set but --num-experts is not: set --num-experts or drop --moe-ffn-hidden-size",
                {"moe_ffn_hidden_size", "num_experts", "moe_layer_freq"});
  }

  if (ctx.on("moe_enable_deepep")) {
    ctx.require(disp == "flex", kFlexBackend,
                would_fail(kTc) + "--moe-enable-deepep needs --moe-token-dispatcher-type flex (got " + disp + ")",
                {"moe_enable_deepep", "moe_token_dispatcher_type"});
    ctx.require(!(backend == Value("hybridep")), kFlexBackend,
                would_fail(kTc) + "--moe-enable-deepep cannot be used with --moe-flex-dispatcher-backend hybridep",
                {"moe_enable_deepep", "moe_flex_dispatcher_backend"});
  }
  const bool deepep = ctx.on("moe_enable_deepep") || backend == Value("deepep");
  if (disp == "flex")
    ctx.require(!(ctx.on("moe_pad_expert_input_to_capacity") && deepep), kFlexBackend,
                would_fail(kTc) + "the flex dispatcher with the DeepEP backend (--moe-flex-dispatcher-backend " +
                    v(ctx, "moe_flex_dispatcher_backend") + ") does not support --moe-pad-expert-input-to-capacity",
                {"moe_pad_expert_input_to_capacity", "moe_flex_dispatcher_backend", "moe_token_dispatcher_type"});
  if (backend == Value("ncclep")) {
    ctx.require(disp == "flex", kFlexBackend,
                would_fail(kTc) + "--moe-flex-dispatcher-backend ncclep needs --moe-token-dispatcher-type flex (got " +
                    disp + ")",
                {"moe_flex_dispatcher_backend", "moe_token_dispatcher_type"});
    // Only an explicit --moe-use-grouped-tensor: the op fuser's grouped tensor comes with the op fuser.
    ctx.require(!ctx.on("moe_use_grouped_tensor") || ctx.on("use_transformer_engine_op_fuser"), kFlexBackend,
                would_fail(kTc) + "--moe-flex-dispatcher-backend ncclep with --moe-use-grouped-tensor needs "
                    "--use-transformer-engine-op-fuser (or the alltoall, DeepEP or HybridEP dispatcher)",
                {"moe_flex_dispatcher_backend", "moe_use_grouped_tensor", "use_transformer_engine_op_fuser"});
  }

  if (!is(ctx, "moe_dispatch_fwd_dtype", "bf16") || !is(ctx, "moe_combine_bwd_dtype", "bf16")) {
    const std::string why = would_fail(kTc) + "--moe-dispatch-fwd-dtype " + v(ctx, "moe_dispatch_fwd_dtype") +
                            " / --moe-combine-bwd-dtype " + v(ctx, "moe_combine_bwd_dtype") + " ";
    ctx.require(disp == "flex" && backend == Value("ncclep"), kDispatchDtype,
                why + "need --moe-token-dispatcher-type flex with --moe-flex-dispatcher-backend ncclep (got " + disp +
                    " / " + backend.py_str() + ")",
                {"moe_dispatch_fwd_dtype", "moe_combine_bwd_dtype", "moe_token_dispatcher_type",
                 "moe_flex_dispatcher_backend"});
    if (disp == "flex" && backend == Value("ncclep"))
      ctx.require(ctx.on("use_transformer_engine_op_fuser") && ctx.on("moe_grouped_gemm"), kDispatchDtype,
                  why + "need both --use-transformer-engine-op-fuser and --moe-grouped-gemm",
                  {"moe_dispatch_fwd_dtype", "moe_combine_bwd_dtype", "use_transformer_engine_op_fuser", "moe_grouped_gemm"});
  }

  // TransformerConfig checks the size whenever it is given, not only with experts (a dense model's 0 is refused).
  if (set(ctx, "moe_shared_expert_intermediate_size"))
    ctx.require(ctx.i("moe_shared_expert_intermediate_size") > 0, kSharedSize,
                would_fail(kTc) + "--moe-shared-expert-intermediate-size must be num_shared_experts x "
                                  "ffn_size_of_each_shared_expert, greater than 0 (got " +
                    v(ctx, "moe_shared_expert_intermediate_size") + ")",
                {"moe_shared_expert_intermediate_size"});
  if (set(ctx, "moe_shared_expert_intermediate_size") && ctx.i("moe_shared_expert_intermediate_size") > 0)
    ctx.require(!ctx.on("moe_shared_expert_overlap") || disp == "alltoall" || disp == "flex", kSharedOverlap,
                would_fail(kTc) + "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall or flex (got " +
                    disp + ")",
                {"moe_shared_expert_overlap", "moe_token_dispatcher_type"});

  // validate_args unwraps a one-element list of either; several balancing types need one coefficient each.
  if (ctx["moe_router_load_balancing_type"].is_list()) {
    const auto n = ctx["moe_router_load_balancing_type"].as_list().size();
    const Value& coeff = ctx["moe_aux_loss_coeff"];
    ctx.require(coeff.is_list() && coeff.as_list().size() == n, kAuxLossCoeff,
                would_fail(kTc) + "--moe-router-load-balancing-type has " + std::to_string(n) +
                    " values, so --moe-aux-loss-coeff needs as many (got " + coeff.py_str() + ")",
                {"moe_aux_loss_coeff", "moe_router_load_balancing_type"});
  }

  // Any capacity factor given (a negative one too, which then means none) needs a load balancing that works with
  // dropping; padding to capacity needs a factor of 0 or more.
  const bool capacity = set(ctx, "moe_expert_capacity_factor") && ctx.f("moe_expert_capacity_factor") >= 0;
  if (set(ctx, "moe_expert_capacity_factor"))
    ctx.require(capacity_ok(ctx["moe_router_load_balancing_type"]), kCapacityBalancing,
                would_fail(kTc) + "--moe-expert-capacity-factor " + v(ctx, "moe_expert_capacity_factor") +
                    " works only with aux_loss, seq_aux_loss, global_aux_loss or none load balancing (got "
                    "--moe-router-load-balancing-type " + v(ctx, "moe_router_load_balancing_type") + ")",
                {"moe_expert_capacity_factor", "moe_router_load_balancing_type"});
  if (ctx.on("moe_pad_expert_input_to_capacity"))
    ctx.require(capacity, kPadNeedsCapacity,
                would_fail(kTc) + "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor 0 or more (got " +
                    v(ctx, "moe_expert_capacity_factor") + ")",
                {"moe_pad_expert_input_to_capacity", "moe_expert_capacity_factor"});

  // validate_args gives expert_tensor_parallel_size the tensor-parallel size when it is not set.
  if (moe && ctx.on("add_bias_linear") && set(ctx, "expert_tensor_parallel_size"))
    ctx.require(ctx.i("expert_tensor_parallel_size") == 1, kBiasEtp,
                would_fail(kTc) + "biases in MoE layers need an expert tensor-parallel size of 1 (got " +
                    v(ctx, "expert_tensor_parallel_size") +
                    "): pass --disable-bias-linear or --expert-tensor-parallel-size 1",
                {"add_bias_linear", "expert_tensor_parallel_size", "num_experts"});

  if (ctx.on("moe_router_enable_expert_bias"))
    ctx.require(is(ctx, "moe_router_score_function", "sigmoid") || is(ctx, "moe_router_score_function", "sqrtsoftplus"),
                kExpertBiasScore,
                would_fail(kTc) + "--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid or "
                    "sqrtsoftplus (got " + v(ctx, "moe_router_score_function") + ")",
                {"moe_router_enable_expert_bias", "moe_router_score_function"});

  if (ctx.on("moe_router_padding_for_quantization") || ctx.on("moe_router_padding_for_fp8")) {
    const char* flag = ctx.on("moe_router_padding_for_quantization") ? "moe_router_padding_for_quantization"
                                                                      : "moe_router_padding_for_fp8";
    ctx.require(set(ctx, "fp8") || set(ctx, "fp4"), kRouterPadding,
                would_fail(kTc) + Context::flag(flag) + " needs --fp8-format or --fp4-format", {flag, "fp8", "fp4"});
    ctx.require(disp != "allgather", kRouterPadding,
                would_fail(kTc) + "the allgather token dispatcher does not support " + Context::flag(flag),
                {flag, "moe_token_dispatcher_type"});
  }

  // Softmax over a single selected expert has a zero gradient.
  ctx.require(!(ctx.i("moe_router_topk") == 1 && is(ctx, "moe_router_score_function", "softmax") &&
                !ctx.on("moe_router_pre_softmax") && !is(ctx, "moe_router_load_balancing_type", "sinkhorn")),
              kTopk1PreSoftmax,
              would_fail(kTc) + "--moe-router-topk 1 with --moe-router-score-function softmax needs "
                  "--moe-router-pre-softmax (softmax over one expert has a zero gradient)",
              {"moe_router_topk", "moe_router_pre_softmax", "moe_router_score_function"});

  if (ctx.on("moe_router_group_topk")) {
    ctx.require(ctx.on("moe_router_num_groups"), kGroupRouting,
                would_fail(kTc) + "--moe-router-group-topk " + v(ctx, "moe_router_group_topk") +
                    " needs --moe-router-num-groups",
                {"moe_router_group_topk", "moe_router_num_groups"});
    const int64_t groups = ctx.i("moe_router_num_groups");
    if (moe && groups > 0)
      ctx.require(py_mod(ctx.i("num_experts"), groups) == 0, kGroupRouting,
                  would_fail(kTc) + "--num-experts (" + v(ctx, "num_experts") +
                      ") must be divisible by --moe-router-num-groups (" + std::to_string(groups) + ")",
                  {"num_experts", "moe_router_num_groups"});
    ctx.require(ctx.i("moe_router_group_topk") <= groups, kGroupRouting,
                would_fail(kTc) + "--moe-router-group-topk (" + v(ctx, "moe_router_group_topk") +
                    ") must not exceed --moe-router-num-groups (" + std::to_string(groups) + ")",
                {"moe_router_group_topk", "moe_router_num_groups"});
  }

  if (ctx.on("overlap_moe_expert_parallel_comm")) {
    const std::string what = would_fail(kTc) + "--overlap-moe-expert-parallel-comm ";
    if (ctx.i("pipeline_model_parallel_size") > 1)
      ctx.require(set(ctx, "virtual_pipeline_model_parallel_size"), kEpOverlap,
                  what + "with pipeline parallelism needs virtual pipeline stages (--num-virtual-stages-per-pipeline-"
                         "rank or --num-layers-per-virtual-pipeline-stage)",
                  {"overlap_moe_expert_parallel_comm", "pipeline_model_parallel_size"});
    ctx.require(ctx.i("expert_model_parallel_size") > 1, kEpOverlap,
                what + "needs --expert-model-parallel-size > 1 (got " + v(ctx, "expert_model_parallel_size") + ")",
                {"overlap_moe_expert_parallel_comm", "expert_model_parallel_size"});
    ctx.require(disp == "alltoall" || disp == "flex", kEpOverlap,
                what + "needs --moe-token-dispatcher-type alltoall or flex (got " + disp + ")",
                {"overlap_moe_expert_parallel_comm", "moe_token_dispatcher_type"});
    ctx.require(!is(ctx, "recompute_granularity", "full"), kEpOverlap,
                what + "cannot be used with --recompute-granularity full",
                {"overlap_moe_expert_parallel_comm", "recompute_granularity"});
    ctx.require(!set(ctx, "recompute_method"), kEpOverlap, what + "cannot be used with --recompute-method",
                {"overlap_moe_expert_parallel_comm", "recompute_method"});
    ctx.require(!set(ctx, "recompute_num_layers"), kEpOverlap, what + "cannot be used with --recompute-num-layers",
                {"overlap_moe_expert_parallel_comm", "recompute_num_layers"});
    // --moe-layer-recompute adds "moe" to the recomputed modules.
    bool moe_recompute = ctx.on("moe_layer_recompute");
    if (set(ctx, "recompute_modules"))
      for (const Value& m : ctx["recompute_modules"].as_list()) moe_recompute = moe_recompute || m == Value("moe");
    ctx.require(!moe_recompute, kEpOverlap, what + "cannot be used with recomputation of the MoE layer (moe in "
                                                   "--recompute-modules, or --moe-layer-recompute)",
                {"overlap_moe_expert_parallel_comm", "recompute_modules", "moe_layer_recompute"});
    ctx.require(ctx.on("bf16") || ctx.on("fp16"), kEpOverlap, what + "needs --bf16 or --fp16",
                {"overlap_moe_expert_parallel_comm", "bf16", "fp16"});
    ctx.require(!ctx.on("moe_shared_expert_overlap"), kEpOverlap,
                what + "cannot be used with --moe-shared-expert-overlap",
                {"overlap_moe_expert_parallel_comm", "moe_shared_expert_overlap"});
    ctx.require(!set(ctx, "mtp_num_layers") || ctx.i("mtp_num_layers") <= 1, kEpOverlap,
                what + "supports at most one MTP layer (--mtp-num-layers " + v(ctx, "mtp_num_layers") + ")",
                {"overlap_moe_expert_parallel_comm", "mtp_num_layers"});
    // NCCL EP (the flex dispatcher's ncclep backend) frees expert FC1's input early.
    if (disp == "flex" && is(ctx, "moe_flex_dispatcher_backend", "ncclep") &&
        ctx.on("fine_grained_activation_offloading") && ctx["offload_modules"].is_list()) {
      bool fc1 = false;
      for (const Value& m : ctx["offload_modules"].as_list()) fc1 = fc1 || m == Value("expert_fc1");
      ctx.require(!fc1, kEpOverlap,
                  what + "with --moe-flex-dispatcher-backend ncclep cannot offload expert_fc1 (--offload-modules " +
                      v(ctx, "offload_modules") + ")",
                  {"overlap_moe_expert_parallel_comm", "moe_flex_dispatcher_backend", "offload_modules"});
    }
    if (is(ctx, "cuda_graph_impl", "transformer_engine"))
      for (const char* scope : {"moe", "mlp"})
        ctx.require(!enum_in(ctx["cuda_graph_modules"], "CudaGraphModule", scope), kEpOverlap,
                    what + "cannot be used with --cuda-graph-impl transformer_engine capturing --cuda-graph-modules " +
                        scope,
                    {"overlap_moe_expert_parallel_comm", "cuda_graph_impl", "cuda_graph_modules"});
  }

  // TransformerConfig checks this outside its overlap_moe_expert_parallel_comm block, for any model.
  if (ctx.on("ep_overlap_early_attn_memory_release"))
    ctx.require(ctx.on("overlap_moe_expert_parallel_comm"), kEpOverlap,
                would_fail(kTc) + "--ep-overlap-early-attn-memory-release needs --overlap-moe-expert-parallel-comm",
                {"ep_overlap_early_attn_memory_release", "overlap_moe_expert_parallel_comm"});
  if (ctx.on("delay_wgrad_compute"))
    ctx.require(ctx.on("overlap_moe_expert_parallel_comm"), kDelayWgrad,
                would_fail(kTc) + "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm",
                {"delay_wgrad_compute", "overlap_moe_expert_parallel_comm"});
  if (ctx.on("overlap_dispatch_backward_with_experts_wgrad")) {
    ctx.require(!ctx.on("overlap_moe_expert_parallel_comm"), kDispatchBwdOverlap,
                would_fail(kTc) + "--overlap-dispatch-backward-with-experts-wgrad cannot be used with "
                    "--overlap-moe-expert-parallel-comm",
                {"overlap_dispatch_backward_with_experts_wgrad", "overlap_moe_expert_parallel_comm"});
    ctx.require(!ctx.on("delay_wgrad_compute"), kDispatchBwdOverlap,
                would_fail(kTc) + "--overlap-dispatch-backward-with-experts-wgrad and --delay-wgrad-compute are "
                    "mutually exclusive",
                {"overlap_dispatch_backward_with_experts_wgrad", "delay_wgrad_compute"});
  }

  if (ctx.on("moe_paged_stash")) {
    const std::string why = would_fail(kTc) + "--moe-paged-stash ";
    ctx.require(!(ctx.has("cpu_offloading") && ctx.on("cpu_offloading")), kPagedStash,
                why + "cannot be used with CPU offloading (--cpu-offloading-num-layers " +
                    v(ctx, "cpu_offloading_num_layers") + ")",
                {"moe_paged_stash", "cpu_offloading_num_layers"});
    ctx.require(set(ctx, "moe_expert_rank_capacity_factor"), kPagedStash,
                why + "requires --moe-expert-rank-capacity-factor", {"moe_paged_stash", "moe_expert_rank_capacity_factor"});
    bool conflict = false;
    if (ctx["offload_modules"].is_list())
      for (const Value& m : ctx["offload_modules"].as_list())
        conflict = conflict || m == Value("expert_fc1") || m == Value("moe_act") || m == Value("fused_group_mlp");
    ctx.require(!conflict, kPagedStash,
                why + "covers those activations: --offload-modules must not include expert_fc1, moe_act or "
                      "fused_group_mlp (got " + v(ctx, "offload_modules") + ")",
                {"moe_paged_stash", "offload_modules"});
  }

  // Dense and hybrid models too: TransformerConfig.__post_init__ checks the dispatcher type with no MoE guard
  // (transformer_config.py, `if self.moe_token_dispatcher_type in ["allgather"]: if self.variable_seq_lengths is
  // True: raise ValueError`), and --moe-token-dispatcher-type defaults to allgather without --num-experts. The
  // runtime builds no dispatcher for dense layers, but the config refuses first.
  if (disp == "allgather" && ctx.has("variable_seq_lengths"))
    ctx.require(!(ctx["variable_seq_lengths"] == Value(true)), kAllgatherVarlen,
                would_fail(kTc) + "--moe-token-dispatcher-type allgather (its default, dense models included) "
                    "does not support variable sequence lengths (--sequence-packing-scheduler " +
                    (ctx.has("sequence_packing_scheduler") ? v(ctx, "sequence_packing_scheduler") : "None") +
                    " turns them on): add --moe-token-dispatcher-type alltoall",
                {"moe_token_dispatcher_type", "variable_seq_lengths", "sequence_packing_scheduler"});
}

}  // namespace mr::init
