// OptimizerConfig's checks and finalization, with their rules: see optimizer_config.h. Seed:
// ../shared/spec/optimizer_config.py (line numbers below).
#include "config/optimizer_config.h"

#include <cmath>
#include <functional>

namespace mr {

// ---------------------------------------------------------------------------------------------------------
// Rules (ids optimizer.<name>), in seed order.
// ---------------------------------------------------------------------------------------------------------

// validate()
MR_RULE(kEmbeddingMinNormInvalid, "optimizer.embedding-min-norm-invalid",
        "--embedding-min-norm must be a finite positive value.");
MR_RULE(kEmbeddingMinNormCudaGraph, "optimizer.embedding-min-norm-with-cuda-graph",
        "--embedding-min-norm cannot be combined with --optimizer-cuda-graph.");
MR_RULE(kEmbeddingMinNormCpuOffload, "optimizer.embedding-min-norm-with-cpu-offload",
        "--embedding-min-norm cannot be combined with --optimizer-cpu-offload.");
MR_RULE(kRmsnormWdMultInvalid, "optimizer.rmsnorm-weight-decay-mult-invalid",
        "--rmsnorm-weight-decay-mult must be a finite nonnegative value.");
MR_WARNING(kDistMuonDeprecated, "optimizer.dist-muon-deprecated",
           "--optimizer dist_muon is deprecated in favour of --optimizer muon with --use-distributed-optimizer.");
MR_RULE(kMinLrAboveLr, "optimizer.min-lr-above-lr", "--min-lr must not exceed --lr.");
MR_WARNING(kMxfp8WithoutReuseGradBuf, "optimizer.mxfp8-without-reuse-grad-buf",
           "MXFP8 without --reuse-grad-buf-for-mxfp8-param-ag and --fp8-param-gather uses much more GPU memory.");
MR_RULE(kReuseGradBufWithOverlapStep, "optimizer.reuse-grad-buf-with-overlap-param-gather-step",
        "--reuse-grad-buf-for-mxfp8-param-ag cannot be combined with --overlap-param-gather-with-optimizer-step.");
MR_RULE(kCudaGraphWithGradNormSkip, "optimizer.cuda-graph-with-grad-norm-skip",
        "The optimizer CUDA graph does not support a finite grad_norm_skip_threshold.");
MR_RULE(kLayerShardedRequiresMuon, "optimizer.layer-sharded-requires-muon",
        "--muon-tp-mode layer_sharded requires --optimizer muon.");
MR_RULE(kLayerShardedRequiresLayerWise, "optimizer.layer-sharded-requires-layer-wise",
        "--muon-tp-mode layer_sharded requires the layer-wise distributed optimizer.");
MR_RULE(kLayerShardedSplitQkv, "optimizer.layer-sharded-split-qkv",
        "--muon-tp-mode layer_sharded requires --muon-no-split-qkv.");
MR_RULE(kPrecisionAwareRequiresAdam, "optimizer.precision-aware-requires-adam",
        "--use-precision-aware-optimizer is only supported with --optimizer adam.");
MR_RULE(kPrecisionAwareTeFusedAdam, "optimizer.precision-aware-te-fused-adam-outdated",
        "--use-precision-aware-optimizer needs a Transformer Engine FusedAdam with low-precision state options.");
MR_RULE(kPrecisionAwareRequiresTe, "optimizer.precision-aware-requires-te",
        "--use-precision-aware-optimizer needs Transformer Engine's FusedAdam (or --optimizer-cpu-offload).");
MR_RULE(kDtypeRequiresPrecisionAware, "optimizer.dtype-requires-precision-aware",
        "Main grads/params and Adam state dtypes other than fp32 need --use-precision-aware-optimizer.");
MR_RULE(kCpuOffloadRequiresPrecisionAware, "optimizer.cpu-offload-requires-precision-aware",
        "--optimizer-cpu-offload requires --use-precision-aware-optimizer.");
MR_RULE(kOverlapStepRequiresDistOpt, "optimizer.overlap-param-gather-step-requires-dist-opt",
        "--overlap-param-gather-with-optimizer-step requires --use-distributed-optimizer.");
MR_RULE(kOverlapStepRequiresOverlapParamGather, "optimizer.overlap-param-gather-step-requires-overlap-param-gather",
        "--overlap-param-gather-with-optimizer-step requires --overlap-param-gather.");
// finalize_optimizer_config()
MR_RULE(kUnknownDtype, "optimizer.unknown-dtype",
        "Optimizer dtypes must be one of fp32, bf16, fp16, fp8, auto (or a torch dtype).");
// validate_run()
MR_RULE(kCpuOffloadFp8ParamGather, "optimizer.cpu-offload-fp8-param-gather-requires-delayed",
        "--optimizer-cpu-offload with --fp8-param-gather requires --fp8-recipe delayed.");
MR_RULE(kOverlapParamGatherRequiresDistOpt, "optimizer.overlap-param-gather-requires-dist-opt",
        "--overlap-param-gather requires the distributed optimizer, Megatron FSDP or dist_muon.");
MR_RULE(kOverlapParamGatherRequiresOverlapGradReduce, "optimizer.overlap-param-gather-requires-overlap-grad-reduce",
        "--overlap-param-gather requires --overlap-grad-reduce.");
MR_RULE(kDistOptWithTorchFsdp2, "optimizer.dist-opt-with-torch-fsdp2",
        "--use-distributed-optimizer cannot be combined with --use-torch-fsdp2.");
MR_RULE(kOverlapStepRequiresTorchCkpt, "optimizer.overlap-param-gather-step-requires-torch-ckpt",
        "--overlap-param-gather-with-optimizer-step requires --ckpt-format torch.");
// validate_model()
MR_RULE(kLayerWiseWithSingleGroupedWeight, "optimizer.layer-wise-with-moe-single-grouped-weight",
        "The layer-wise distributed optimizer does not support --moe-single-grouped-weight.");
MR_RULE(kOverlapStepRequiresVpp, "optimizer.overlap-param-gather-step-requires-vpp",
        "--overlap-param-gather-with-optimizer-step requires interleaved pipeline parallelism.");

namespace {

// Both count a hit on the rule (rule.h); the validation chain reports them without counting again.
[[noreturn]] void raise(const Rule& rule, std::string message, std::vector<std::string> fields) {
  rule.record_hit();
  throw OptimizerConfigError(OptimizerConfigIssue{&rule, std::move(message), std::move(fields)});
}

void warn(std::vector<OptimizerConfigIssue>* out, const Rule& rule, std::string message,
          std::vector<std::string> fields) {
  rule.record_hit();
  if (out) out->push_back(OptimizerConfigIssue{&rule, std::move(message), std::move(fields)});
}

std::string num(double v) { return py_float_repr(v); }
std::string show(const std::optional<std::string>& s) { return s ? *s : "None"; }

// `d in (torch.float32, 'fp32')`: dtypes may still be command-line spellings before finalization.
bool is_fp32(const DtypeSpec& d) { return d && (*d == "torch.float32" || *d == "fp32"); }

// Megatron's import of transformer_engine fails when it is not installed; the target environment says
// so with an empty TE version or "none" (an inference: the seed only tries the import).
bool te_installed(const TargetEnv& env) {
  const std::string& v = env.te_version;
  return !(v.empty() || v == "none" || v == "None");
}

// TE's FusedAdam has had master_weight_dtype, exp_avg_dtype, exp_avg_sq_dtype and use_decoupled_grad since
// 1.13 (TransformerEngine commit 05c0fb0, first released in v1.13); the seed inspects the signature instead.
constexpr const char* kTeFusedAdamLowPrecisionVersion = "1.13.0";

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Checks and finalization
// ---------------------------------------------------------------------------------------------------------

bool OptimizerConfig::will_be_layer_wise() const {
  return use_layer_wise_distributed_optimizer ||
         (optimizer != "sgd" && optimizer != "adam" && (use_distributed_optimizer || optimizer == "dist_muon"));
}

// seed optimizer_config.py:448 validate
void OptimizerConfig::validate(const TargetEnv& env, std::vector<OptimizerConfigIssue>* warnings) const {
  // seed 450-461: the embedding row-norm floor.
  if (embedding_min_norm && (!std::isfinite(*embedding_min_norm) || *embedding_min_norm <= 0.0))
    raise(kEmbeddingMinNormInvalid,
          "--embedding-min-norm (" + num(*embedding_min_norm) + ") must be finite and greater than 0",
          {"embedding_min_norm"});
  if (embedding_min_norm && optimizer_cuda_graph)
    raise(kEmbeddingMinNormCudaGraph, "--embedding-min-norm is not supported together with --optimizer-cuda-graph",
          {"embedding_min_norm", "optimizer_cuda_graph"});
  if (embedding_min_norm && optimizer_cpu_offload)
    raise(kEmbeddingMinNormCpuOffload,
          "--embedding-min-norm is not supported together with --optimizer-cpu-offload (the CPU master copy "
          "would overwrite the rescaled rows)",
          {"embedding_min_norm", "optimizer_cpu_offload"});
  // seed 462-466
  if (rmsnorm_weight_decay_mult &&
      (!std::isfinite(*rmsnorm_weight_decay_mult) || *rmsnorm_weight_decay_mult < 0.0))
    raise(kRmsnormWdMultInvalid,
          "--rmsnorm-weight-decay-mult (" + num(*rmsnorm_weight_decay_mult) + ") must be finite and not negative",
          {"rmsnorm_weight_decay_mult"});
  // seed 467-471
  if (optimizer == "dist_muon")
    warn(warnings, kDistMuonDeprecated,
         "--optimizer dist_muon is deprecated: use --optimizer muon together with --use-distributed-optimizer",
         {"optimizer"});
  // seed 472-473
  // Megatron's `assert min_lr <= lr` fails on a NaN too: the message names which one is not a number rather than
  // calling nan smaller or greater.
  if (lr && min_lr && !(*min_lr <= *lr)) {
    const bool lr_nan = std::isnan(*lr), min_nan = std::isnan(*min_lr);
    if (lr_nan || min_nan)
      raise(kMinLrAboveLr,
            std::string(lr_nan && min_nan ? "--lr and --min-lr are" : lr_nan ? "--lr is" : "--min-lr is") +
                " not a number (nan): Megatron's check that --min-lr (" + num(*min_lr) +
                ") is not greater than --lr (" + num(*lr) + ") fails",
            {"min_lr", "lr"});
    raise(kMinLrAboveLr, "--min-lr (" + num(*min_lr) + ") must not be greater than --lr (" + num(*lr) + ")",
          {"min_lr", "lr"});
  }
  // seed 474-483
  if (fp8_recipe == "mxfp8" && !reuse_grad_buf_for_mxfp8_param_ag)
    warn(warnings, kMxfp8WithoutReuseGradBuf,
         "--fp8-recipe mxfp8 without --reuse-grad-buf-for-mxfp8-param-ag and --fp8-param-gather takes a lot of "
         "extra GPU memory; both flags are recommended for MXFP8 training",
         {"fp8_recipe", "reuse_grad_buf_for_mxfp8_param_ag"});
  // seed 485-489
  if (reuse_grad_buf_for_mxfp8_param_ag && overlap_param_gather_with_optimizer_step)
    raise(kReuseGradBufWithOverlapStep,
          "--overlap-param-gather-with-optimizer-step is not supported with --reuse-grad-buf-for-mxfp8-param-ag",
          {"overlap_param_gather_with_optimizer_step", "reuse_grad_buf_for_mxfp8_param_ag"});
  // seed 491-494
  if (optimizer_cuda_graph && std::isfinite(grad_norm_skip_threshold))
    raise(kCudaGraphWithGradNormSkip,
          "--optimizer-cuda-graph does not support skipping updates on a large gradient norm (grad_norm_skip_threshold " +
              num(grad_norm_skip_threshold) + " is finite)",
          {"optimizer_cuda_graph", "grad_norm_skip_threshold"});
  // seed 496-521: layer-sharded Muon, checked against the value finalize_optimizer_config() will produce.
  if (muon_tp_mode == "layer_sharded") {
    if (optimizer != "muon" && optimizer != "dist_muon")
      raise(kLayerShardedRequiresMuon,
            "--muon-tp-mode layer_sharded requires --optimizer muon (got " + Value(optimizer).py_repr() +
                "); no other optimizer, adaptive_muon included, implements layer sharding",
            {"muon_tp_mode", "optimizer"});
    if (!will_be_layer_wise())
      raise(kLayerShardedRequiresLayerWise,
            "--muon-tp-mode layer_sharded requires the layer-wise distributed optimizer "
            "(--optimizer muon with --use-distributed-optimizer)",
            {"muon_tp_mode", "use_distributed_optimizer"});
    if (muon_split_qkv)
      raise(kLayerShardedSplitQkv,
            "--muon-tp-mode layer_sharded has no split-QKV Newton-Schulz; add --muon-no-split-qkv",
            {"muon_tp_mode", "muon_split_qkv"});
  }
  // seed 523-569: precision-aware optimizer; dtypes may still be command-line spellings here.
  if (use_precision_aware_optimizer) {
    if (optimizer != "adam")
      raise(kPrecisionAwareRequiresAdam,
            "--use-precision-aware-optimizer is only supported with --optimizer adam (got " +
                Value(optimizer).py_repr() + ")",
            {"use_precision_aware_optimizer", "optimizer"});
    // Only TE's FusedAdam (or the CPU-offload hybrid optimizer) handles the low-precision states.
    if (!optimizer_cpu_offload) {
      if (!te_installed(env))
        raise(kPrecisionAwareRequiresTe,
              "--use-precision-aware-optimizer needs FusedAdam from Transformer Engine, which is not installed",
              {"use_precision_aware_optimizer"});
      if (compare_versions(env.te_version, kTeFusedAdamLowPrecisionVersion) < 0)
        raise(kPrecisionAwareTeFusedAdam,
              "--use-precision-aware-optimizer: the FusedAdam of Transformer Engine " + env.te_version +
                  " lacks master_weight_dtype/exp_avg_dtype/exp_avg_sq_dtype/use_decoupled_grad; update TE",
              {"use_precision_aware_optimizer"});
    }
  } else {
    const std::pair<const char*, const DtypeSpec*> dtypes[] = {{"main_grads_dtype", &main_grads_dtype},
                                                               {"main_params_dtype", &main_params_dtype},
                                                               {"exp_avg_dtype", &exp_avg_dtype},
                                                               {"exp_avg_sq_dtype", &exp_avg_sq_dtype}};
    for (const auto& [field, value] : dtypes) {
      if (is_fp32(*value)) continue;
      std::string flag = std::string("--") + field;
      for (char& ch : flag)
        if (ch == '_') ch = '-';
      raise(kDtypeRequiresPrecisionAware,
            flag + " (" + show(*value) + ") must be fp32 unless --use-precision-aware-optimizer is set",
            {field, "use_precision_aware_optimizer"});
    }
  }
  // seed 571-576
  if (optimizer_cpu_offload && !use_precision_aware_optimizer)
    raise(kCpuOffloadRequiresPrecisionAware,
          "--optimizer-cpu-offload requires --use-precision-aware-optimizer (the hybrid device optimizer runs on "
          "its code path)",
          {"optimizer_cpu_offload", "use_precision_aware_optimizer"});
  // seed 577-585
  if (overlap_param_gather_with_optimizer_step) {
    if (!use_distributed_optimizer)
      raise(kOverlapStepRequiresDistOpt,
            "--overlap-param-gather-with-optimizer-step is only supported with --use-distributed-optimizer",
            {"overlap_param_gather_with_optimizer_step", "use_distributed_optimizer"});
    if (!overlap_param_gather)
      raise(kOverlapStepRequiresOverlapParamGather,
            "--overlap-param-gather-with-optimizer-step requires --overlap-param-gather",
            {"overlap_param_gather_with_optimizer_step", "overlap_param_gather"});
  }
}

// seed optimizer_config.py:667 finalize_optimizer_config
void OptimizerConfig::finalize_optimizer_config(const TargetEnv& env) {
  // Command-line spellings to torch dtypes; a torch dtype stays; 'auto' and None become None.
  auto map_dtype = [](const char* field, const DtypeSpec& d) -> DtypeSpec {
    if (!d) return std::nullopt;
    if (d->rfind("torch.", 0) == 0) return d;
    if (*d == "fp32") return "torch.float32";
    if (*d == "bf16") return "torch.bfloat16";
    if (*d == "fp16") return "torch.float16";
    if (*d == "fp8") return "torch.uint8";
    if (*d == "auto") return std::nullopt;
    raise(kUnknownDtype,
          std::string(field) + " " + Value(*d).py_repr() + " is not a known dtype (fp32, bf16, fp16, fp8 or auto)",
          {field});
  };
  main_grads_dtype = map_dtype("main_grads_dtype", main_grads_dtype);
  main_params_dtype = map_dtype("main_params_dtype", main_params_dtype);
  exp_avg_dtype = map_dtype("exp_avg_dtype", exp_avg_dtype);
  exp_avg_sq_dtype = map_dtype("exp_avg_sq_dtype", exp_avg_sq_dtype);

  // TE's FusedAdam stores parameter remainders from 2.1 on.
  if (use_precision_aware_optimizer && !env.te_stores_param_remainders()) store_param_remainders = false;

  // Emerging optimizers: the deprecated dist_muon alias, and the distributed optimizer -> layer-wise path.
  if (optimizer != "sgd" && optimizer != "adam") {
    if (optimizer == "dist_muon") {
      optimizer = "muon";
      use_layer_wise_distributed_optimizer = true;
    }
    if (use_distributed_optimizer) {
      use_layer_wise_distributed_optimizer = true;
      use_distributed_optimizer = false;
    }
  }
}

// seed optimizer_config.py:587 validate_run
void OptimizerConfig::validate_run(const DdpConfigView& ddp_config, bool use_torch_fsdp2,
                                   const std::optional<std::string>& ckpt_format) const {
  if (optimizer_cpu_offload && !(!ddp_config.fp8_param_gather || fp8_recipe == "delayed"))
    raise(kCpuOffloadFp8ParamGather,
          "--optimizer-cpu-offload with --fp8-param-gather requires --fp8-recipe delayed (got " + show(fp8_recipe) +
              ")",
          {"optimizer_cpu_offload", "fp8_param_gather", "fp8_recipe"});
  if (overlap_param_gather) {
    // finalize_optimizer_config() may already have moved the distributed optimizer to the layer-wise one.
    if (!(use_distributed_optimizer || use_layer_wise_distributed_optimizer || ddp_config.use_megatron_fsdp ||
          optimizer == "dist_muon"))
      raise(kOverlapParamGatherRequiresDistOpt,
            "--overlap-param-gather is only supported with --use-distributed-optimizer, --use-megatron-fsdp or "
            "--optimizer dist_muon",
            {"overlap_param_gather", "use_distributed_optimizer"});
    if (!ddp_config.overlap_grad_reduce)
      raise(kOverlapParamGatherRequiresOverlapGradReduce, "--overlap-param-gather requires --overlap-grad-reduce",
            {"overlap_param_gather", "overlap_grad_reduce"});
  }
  if (use_distributed_optimizer && use_torch_fsdp2)
    raise(kDistOptWithTorchFsdp2,
          "--use-torch-fsdp2 cannot be combined with Megatron Core's distributed optimizer "
          "(--use-distributed-optimizer)",
          {"use_distributed_optimizer", "use_torch_fsdp2"});
  if (overlap_param_gather_with_optimizer_step && ckpt_format != "torch")
    raise(kOverlapStepRequiresTorchCkpt,
          "--overlap-param-gather-with-optimizer-step does not support distributed checkpointing yet: it needs "
          "--ckpt-format torch (got " + show(ckpt_format) + ")",
          {"overlap_param_gather_with_optimizer_step", "ckpt_format"});
}

// seed optimizer_config.py:628 validate_model
void OptimizerConfig::validate_model(bool moe_single_grouped_weight,
                                     std::optional<int64_t> virtual_pipeline_model_parallel_size) const {
  if (will_be_layer_wise() && moe_single_grouped_weight)
    raise(kLayerWiseWithSingleGroupedWeight,
          "the layer-wise distributed optimizer (" + optimizer +
              " with the distributed optimizer) does not support --moe-single-grouped-weight: Muon is not defined "
              "for one grouped expert weight; drop --moe-single-grouped-weight or use Adam with the distributed "
              "optimizer",
          {"moe_single_grouped_weight", "optimizer", "use_distributed_optimizer"});
  if (overlap_param_gather_with_optimizer_step && !virtual_pipeline_model_parallel_size)
    raise(kOverlapStepRequiresVpp,
          "--overlap-param-gather-with-optimizer-step is only supported with interleaved pipeline parallelism "
          "(--num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank)",
          {"overlap_param_gather_with_optimizer_step", "virtual_pipeline_model_parallel_size"});
}

// seed optimizer_config.py:648 use_precision_aware_optimizer_no_fp8_or_ds_fp8
bool OptimizerConfig::use_precision_aware_optimizer_no_fp8_or_ds_fp8() const {
  return use_precision_aware_optimizer &&
         (!is_fp32(main_params_dtype) || !fp8_recipe || fp8_recipe == "delayed" || optimizer_cpu_offload);
}

}  // namespace mr
