// Seed arguments.py 996-1078 (validate_args): the MoE megakernel (MOK) with FSDP, the Megatron-FSDP block
// (v1/v2 optimizer coupling, sharding strategies, checkpoint format, NCCL user buffers) and FSDP manual
// registration.
#include <set>
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kMokFsdp, "moe-megakernel.fsdp-unsupported",
        "--moe-megakernel-backend mok is not validated with --use-megatron-fsdp or --use-torch-fsdp2.");
MR_RULE(kV2NoDistOpt, "megatron-fsdp.v2-no-distributed-optimizer",
        "--megatron-fsdp-version 2 cannot be combined with --use-distributed-optimizer.");
MR_WARNING(kV1EnablesDistOpt, "megatron-fsdp.v1-enables-distributed-optimizer",
           "Megatron-FSDP v1 turns on --use-distributed-optimizer.");
MR_RULE(kSingleGroupedParams, "megatron-fsdp.single-grouped-moe-params",
        "Megatron-FSDP does not support --moe-single-grouped-weight / --moe-single-grouped-bias.");
MR_RULE(kOptimizer, "megatron-fsdp.optimizer-supported", "Megatron-FSDP supports only --optimizer sgd or adam.");
MR_WARNING(kGradAccumFusion, "megatron-fsdp.grad-accumulation-fusion",
           "Fused gradient accumulation with sharded gradients under Megatron-FSDP depends on Transformer Engine "
           "support.");
MR_RULE(kWeightHash, "megatron-fsdp.weight-hash-check-unsupported",
        "--check-weight-hash-across-dp-replicas-interval is not supported with the optim_grads_params strategy.");
MR_RULE(kMaxConnections, "megatron-fsdp.cuda-device-max-connections",
        "Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS unset or greater than 1.");
MR_RULE(kCkptFormat, "megatron-fsdp.ckpt-format", "Megatron-FSDP needs --ckpt-format fsdp_dtensor.");
MR_WARNING(kNcclUbDoubleBuffer, "megatron-fsdp.nccl-ub-double-buffer",
           "--use-nccl-ub with Megatron-FSDP turns on FSDP double buffering and manual registration.");
MR_RULE(kMetaInitNoShard, "megatron-fsdp.meta-init-no-shard",
        "--init-model-with-meta-device is not supported with the no_shard sharding strategy.");
MR_RULE(kManualRegNeedsFsdp, "megatron-fsdp.manual-registration-needs-megatron-fsdp",
        "--fsdp-manual-registration needs --use-megatron-fsdp.");
MR_RULE(kManualRegNeedsNcclUb, "megatron-fsdp.manual-registration-needs-nccl-ub",
        "--fsdp-manual-registration needs --use-nccl-ub.");

namespace {

constexpr const char* kWhy = "megatron-fsdp";

std::string key(const Value& v) { return v.is_str() ? v.as_str() : v.py_repr(); }

void megatron_fsdp_block(Context& ctx) {
  // seed 1003: the deprecated alias is still set for code that reads it.
  ctx.set("use_custom_fsdp", true, kWhy);

  // seed 1005-1016
  if (ctx["megatron_fsdp_version"] == Value(2)) {
    ctx.require(!ctx.on("use_distributed_optimizer"), kV2NoDistOpt,
                "--megatron-fsdp-version 2 does not work with --use-distributed-optimizer; drop one of them",
                {"megatron_fsdp_version", "use_distributed_optimizer"});
  } else {
    if (!ctx.on("use_distributed_optimizer"))
      ctx.warn(kV1EnablesDistOpt,
               "Megatron-FSDP v1 requires the distributed optimizer; turning on --use-distributed-optimizer",
               {"use_megatron_fsdp", "use_distributed_optimizer"});
    assign(ctx, "use_distributed_optimizer", true, kWhy);
  }
  // seed 1018: the MXFP8 grad-buffer reuse belongs to the non-FSDP optimizer step.
  assign(ctx, "reuse_grad_buf_for_mxfp8_param_ag", false, kWhy);

  // seed 1019-1029
  if (ctx.on("moe_single_grouped_weight") || ctx.on("moe_single_grouped_bias"))
    ctx.fail(kSingleGroupedParams,
             "Megatron-FSDP cannot shard single grouped MoE parameters yet: drop --moe-single-grouped-weight / "
             "--moe-single-grouped-bias or use the DDP / distributed optimizer path",
             {"use_megatron_fsdp", "moe_single_grouped_weight", "moe_single_grouped_bias"});

  // seed 1031-1032
  const Value& opt = ctx["optimizer"];
  if (!(opt == Value("sgd") || opt == Value("adam")))
    ctx.fail(kOptimizer, "Megatron-FSDP supports only --optimizer sgd or adam, got " + opt.py_str(),
             {"optimizer", "use_megatron_fsdp"});

  // seed 1036-1038
  std::set<std::string> strategies{key(ctx["data_parallel_sharding_strategy"])};
  if (!ctx.is_none("expert_data_parallel_sharding_strategy"))
    strategies.insert(key(ctx["expert_data_parallel_sharding_strategy"]));
  const bool shards_grads = strategies.count("optim_grads_params") || strategies.count("optim_grads");

  // seed 1040-1047
  if (shards_grads && ctx.on("gradient_accumulation_fusion"))
    ctx.warn(kGradAccumFusion,
             "check that Transformer Engine supports fused gradient accumulation with Megatron-FSDP sharded "
             "gradients (or pass --no-gradient-accumulation-fusion)",
             {"gradient_accumulation_fusion", "data_parallel_sharding_strategy"});

  // seed 1049-1051
  if (strategies.count("optim_grads_params"))
    ctx.require(ctx.is_none("check_weight_hash_across_dp_replicas_interval"), kWeightHash,
                "--check-weight-hash-across-dp-replicas-interval cannot be used when parameters are sharded "
                "(optim_grads_params strategy)",
                {"check_weight_hash_across_dp_replicas_interval", "data_parallel_sharding_strategy",
                 "expert_data_parallel_sharding_strategy"});

  // seed 1053-1054
  auto conns = ctx.env_var("CUDA_DEVICE_MAX_CONNECTIONS");
  if (conns && *conns == "1")
    ctx.fail(kMaxConnections,
             "Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS greater than 1 or unset, the job sets it to 1",
             {"use_megatron_fsdp"});

  // seed 1056-1057
  if (ctx["ckpt_format"] != Value("fsdp_dtensor"))
    ctx.fail(kCkptFormat,
             "Megatron-FSDP requires --ckpt-format fsdp_dtensor, got " + ctx["ckpt_format"].py_str(),
             {"ckpt_format", "use_megatron_fsdp"});

  // seed 1059-1064
  if (ctx.on("nccl_ub")) {
    assign(ctx, "fsdp_manual_registration", true, kWhy);
    assign(ctx, "fsdp_double_buffer", true, kWhy);
    ctx.warn(kNcclUbDoubleBuffer,
             "--use-nccl-ub with Megatron-FSDP turns on --fsdp-double-buffer and --fsdp-manual-registration",
             {"nccl_ub", "fsdp_double_buffer", "fsdp_manual_registration"});
  }

  // seed 1066-1068: the max-pool allocator is a kind of double buffer.
  if (ctx.on("megatron_fsdp_max_pool_double_buffer")) assign(ctx, "fsdp_double_buffer", true, kWhy);

  // seed 1070-1074
  if (ctx.on("init_model_with_meta_device") && strategies == std::set<std::string>{"no_shard"})
    ctx.fail(kMetaInitNoShard,
             "--init-model-with-meta-device is neither supported nor needed with the no_shard sharding strategy",
             {"init_model_with_meta_device", "data_parallel_sharding_strategy"});
}

}  // namespace

void megatron_fsdp(Context& ctx) {
  // seed 996-997
  if (ctx["moe_megakernel_backend"] == Value("mok") && (ctx.on("use_megatron_fsdp") || ctx.on("use_torch_fsdp2")))
    ctx.fail(kMokFsdp, "--moe-megakernel-backend mok has not been validated with Megatron-FSDP or Torch FSDP2",
             {"moe_megakernel_backend", "use_megatron_fsdp", "use_torch_fsdp2"});

  if (ctx.on("use_megatron_fsdp")) megatron_fsdp_block(ctx);

  // seed 1076-1078
  if (ctx.on("fsdp_manual_registration")) {
    ctx.require(ctx.on("use_megatron_fsdp"), kManualRegNeedsFsdp,
                "--fsdp-manual-registration is only supported with --use-megatron-fsdp",
                {"fsdp_manual_registration", "use_megatron_fsdp"});
    ctx.require(ctx.on("nccl_ub"), kManualRegNeedsNcclUb,
                "--fsdp-manual-registration is only supported together with --use-nccl-ub",
                {"fsdp_manual_registration", "nccl_ub"});
  }
}

}  // namespace mr::section
