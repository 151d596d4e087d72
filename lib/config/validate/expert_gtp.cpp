// Expert GTP weight shards and the GTP weight-rematerialisation checks (seed arguments.py 1353-1451).
#include <algorithm>
#include <cctype>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kExpertShardsBelowEtp, "expert-gtp.weight-shards-below-etp",
        "--expert-tensor-parallel-num-weight-shards must be >= the expert tensor-parallel size.");
MR_RULE(kExpertShardsDivisible, "expert-gtp.weight-shards-divisible",
        "--expert-tensor-parallel-num-weight-shards must be a multiple of the expert tensor-parallel size.");
MR_RULE(kGtpFp4ParamGather, "gtp-remat.fp4-needs-param-gather",
        "GTP with --fp4-format needs --fp4-param-gather.");
MR_WARNING(kGtpHighPriority, "gtp-remat.high-priority-gtp-remat",
           "From Blackwell on, GTP adds 'gtp_remat' to the high-priority stream groups.");
MR_WARNING(kExpertGtpHighPriority, "gtp-remat.high-priority-expert-gtp-remat",
           "From Blackwell on, expert GTP adds 'expt_gtp_remat' to the high-priority stream groups.");
MR_RULE(kGtpGraphNodePriority, "gtp-remat.cuda-graphs-node-priority",
        "GTP with CUDA graphs on Blackwell or later needs CUDA_GRAPHS_USE_NODE_PRIORITY=1.");
MR_WARNING(kGtpNcclProtoSimple, "gtp-remat.nccl-proto-simple",
           "GTP prefers NCCL_PROTO LL128 or LL; NCCL_PROTO=Simple may be slow.");
MR_RULE(kGtpDdpAverage, "gtp-remat.no-ddp-average-in-collective",
        "GTP does not support --ddp-average-in-collective.");
MR_RULE(kGtpCkptFormat, "gtp-remat.ckpt-format", "GTP supports only --ckpt-format torch or torch_dist.");
MR_RULE(kGtpReshardableMemEfficient, "gtp-remat.fully-reshardable-mem-efficient",
        "GTP does not support the fully-reshardable + mem-efficient distributed-optimizer checkpoint mode.");
MR_RULE(kGtpMxfp8ParamGather, "gtp-remat.mxfp8-needs-fp8-param-gather",
        "GTP with --fp8-recipe mxfp8 needs --fp8-param-gather.");
MR_RULE(kGtpMxfp8ReuseGradBuf, "gtp-remat.mxfp8-needs-reuse-grad-buf",
        "GTP with --fp8-recipe mxfp8 needs --reuse-grad-buf-for-mxfp8-param-ag.");
MR_RULE(kGtpNcclUbSymmetric, "gtp-remat.nccl-ub-symmetric-registration",
        "--gtp-remat-nccl-ub / --gtp-expert-remat-nccl-ub cannot be combined with --disable-symmetric-registration.");
MR_WARNING(kGtpNcclUbFp32Acc, "gtp-remat.nccl-ub-overrides-fp32-accumulation",
           "GTP NCCL user buffers take precedence over --gtp-remat-reduce-scatter-with-fp32-accumulation.");

void expert_gtp_weight_shards(Context& ctx) {
  // resolve_tensor_parallel_weight_shards (megatron/core/model_parallel_config.py) on the expert axis.
  // expert_tensor_parallel_size is defaulted to --tensor-model-parallel-size earlier in validate_args (seed 515);
  // the fallback only matters when that earlier section is absent.
  const int64_t etp = ctx.is_none("expert_tensor_parallel_size") ? ctx.i("tensor_model_parallel_size")
                                                                  : ctx.i("expert_tensor_parallel_size");
  // expert_gtp_weight_remat_size has no flag: getattr(args, ..., 1).
  int64_t remat = int_or(ctx, "expert_gtp_weight_remat_size", 1);
  int64_t shards;
  if (ctx.is_none("expert_tensor_parallel_num_weight_shards")) {
    shards = ctx.mul(etp, remat, "the expert tensor-parallel size x the expert GTP weight-remat size",
                     {"expert_tensor_parallel_size"});
  } else {
    shards = ctx.i("expert_tensor_parallel_num_weight_shards");
    ctx.require(shards >= etp, kExpertShardsBelowEtp,
                "--expert-tensor-parallel-num-weight-shards (" + std::to_string(shards) +
                    ") must be at least the expert tensor-parallel size (" + std::to_string(etp) + ")",
                {"expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size"});
    ctx.require(etp != 0 && py_mod(shards, etp) == 0, kExpertShardsDivisible,
                "--expert-tensor-parallel-num-weight-shards (" + std::to_string(shards) +
                    ") must be a multiple of the expert tensor-parallel size (" + std::to_string(etp) + ")",
                {"expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size"});
    remat = py_floordiv(shards, etp);
  }
  ctx.set("expert_tensor_parallel_num_weight_shards", Value(static_cast<long long>(shards)),
          "expert tensor-parallel size x expert GTP remat size");
  ctx.set("expert_gtp_weight_remat_size", Value(static_cast<long long>(remat)),
          "--expert-tensor-parallel-num-weight-shards / expert tensor-parallel size");
}

void gtp_remat_checks(Context& ctx) {
  // gtp_weight_remat_size is derived earlier in validate_args (seed 446); 1 when that section is absent.
  const int64_t gtp = int_or(ctx, "gtp_weight_remat_size", 1);
  const int64_t egtp = ctx.i("expert_gtp_weight_remat_size");
  if (!(gtp > 1 || egtp > 1)) return;

  if (ctx.on("fp4") && !ctx.on("fp4_param_gather"))
    ctx.fail(kGtpFp4ParamGather,
             "GTP (--tensor-parallel-num-weight-shards / --expert-tensor-parallel-num-weight-shards above the "
             "tensor-parallel size) with --fp4-format needs --fp4-param-gather, so NVFP4 weights are gathered "
             "natively",
             {"fp4", "fp4_param_gather"});

  if (!ctx.env().no_gpu() && ctx.arch_major() >= 10) {
    if (!list_has(ctx, "high_priority_stream_groups", "gtp_remat")) {
      list_append(ctx, "high_priority_stream_groups", "gtp_remat", "GTP communication on high-priority streams");
      ctx.warn(kGtpHighPriority, "added 'gtp_remat' to --high-priority-stream-groups",
               {"high_priority_stream_groups"});
    }
    if (egtp > 1 && !list_has(ctx, "high_priority_stream_groups", "expt_gtp_remat")) {
      list_append(ctx, "high_priority_stream_groups", "expt_gtp_remat",
                  "expert GTP communication on high-priority streams");
      ctx.warn(kExpertGtpHighPriority, "added 'expt_gtp_remat' to --high-priority-stream-groups",
               {"high_priority_stream_groups"});
    }
    if (ctx["cuda_graph_impl"] != Value("none")) {
      const auto v = ctx.env_var("CUDA_GRAPHS_USE_NODE_PRIORITY");
      ctx.require(v && *v == "1", kGtpGraphNodePriority,
                  "GTP with --cuda-graph-impl " + show(ctx, "cuda_graph_impl") + " on " + ctx.env().gpu_arch +
                      " needs the environment variable CUDA_GRAPHS_USE_NODE_PRIORITY=1 so GTP communication "
                      "overlaps the GEMMs; it is " + (v ? "'" + *v + "'" : "unset"),
                  {"cuda_graph_impl"});
    }
  }

  std::string proto = ctx.env_var("NCCL_PROTO").value_or("");
  std::transform(proto.begin(), proto.end(), proto.begin(), [](unsigned char c) { return std::tolower(c); });
  if (proto == "simple")
    ctx.warn(kGtpNcclProtoSimple, "NCCL_PROTO=Simple is set; GTP usually performs better with LL128 or LL");

  ctx.require(!ctx.on("ddp_average_in_collective"), kGtpDdpAverage,
              "GTP cannot be used with --ddp-average-in-collective (averaging would need per-buffer GTP scaling)",
              {"ddp_average_in_collective"});
  const Value fmt = ctx["ckpt_format"];
  ctx.require(fmt == Value("torch") || fmt == Value("torch_dist"), kGtpCkptFormat,
              "GTP supports --ckpt-format torch or torch_dist only (got " + fmt.py_str() + ")", {"ckpt_format"});
  ctx.require(!(on_or(ctx, "dist_ckpt_optim_fully_reshardable") &&
                on_or(ctx, "distrib_optim_fully_reshardable_mem_efficient")),
              kGtpReshardableMemEfficient,
              "GTP does not support --dist-ckpt-optim-fully-reshardable together with "
              "--distrib-optim-fully-reshardable-mem-efficient; drop one of them",
              {"dist_ckpt_optim_fully_reshardable", "distrib_optim_fully_reshardable_mem_efficient"});

  // GTP keeps no bf16 weight: with mxfp8 the optimizer must maintain the fp8 shard, gathered via the grad buffer.
  if (ctx.has("fp8_recipe") && ctx["fp8_recipe"] == Value("mxfp8")) {
    ctx.require(on_or(ctx, "fp8_param_gather"), kGtpMxfp8ParamGather,
                "GTP with --fp8-recipe mxfp8 needs --fp8-param-gather", {"fp8_recipe", "fp8_param_gather"});
    ctx.require(on_or(ctx, "reuse_grad_buf_for_mxfp8_param_ag"), kGtpMxfp8ReuseGradBuf,
                "GTP with --fp8-recipe mxfp8 and --fp8-param-gather needs --reuse-grad-buf-for-mxfp8-param-ag "
                "(MXFP8 parameters cannot live in the parameter buffer)",
                {"fp8_recipe", "reuse_grad_buf_for_mxfp8_param_ag"});
  }

  if (on_or(ctx, "gtp_remat_nccl_ub") || on_or(ctx, "gtp_expert_remat_nccl_ub")) {
    ctx.require(!on_or(ctx, "disable_symmetric_registration"), kGtpNcclUbSymmetric,
                "--gtp-remat-nccl-ub / --gtp-expert-remat-nccl-ub need symmetric window registration and cannot "
                "be combined with --disable-symmetric-registration",
                {"gtp_remat_nccl_ub", "gtp_expert_remat_nccl_ub", "disable_symmetric_registration"});
    // A print_rank_0 "WARNING:" in the seed; recorded as a warning here.
    if (on_or(ctx, "gtp_remat_reduce_scatter_with_fp32_accumulation"))
      ctx.warn(kGtpNcclUbFp32Acc,
               "--gtp-remat-nccl-ub / --gtp-expert-remat-nccl-ub take precedence over "
               "--gtp-remat-reduce-scatter-with-fp32-accumulation on their groups (NVLS reduce-scatters "
               "accumulate in fp32 in the switch)",
               {"gtp_remat_nccl_ub", "gtp_remat_reduce_scatter_with_fp32_accumulation"});
  }
}

}  // namespace mr::section
