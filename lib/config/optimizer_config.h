// Megatron's OptimizerConfig (seed: ../shared/spec/optimizer_config.py) as a plain C++ type, no LibTorch.
//
// Built from the resolved arguments the way Megatron's training code does (every field whose name is an
// argument dest is copied from it), then checked and finalized in the order the launcher runs them:
// validate(), finalize_optimizer_config(), validate_run(), validate_model().
//
// Dtypes are strings: a torch dtype is spelled as Python prints it ("torch.float32"); before finalization
// the dtype fields may still hold the command-line spelling ("fp32", "bf16", "fp16", "fp8", "auto").
// std::nullopt stands for Python's None.
//
// The checks and finalization, with their rules, are in optimizer_config_rules.cpp; ParamKey (grouping
// parameters for per-group configs) in param_key.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/namespace.h"
#include "config/target_env.h"
#include "config/rule.h"
#include "config/value.h"

namespace mr {

// ---------------------------------------------------------------------------------------------------------
// OptimizerConfig
// ---------------------------------------------------------------------------------------------------------

// A failed check (or a warning) of OptimizerConfig: the rule, a message naming the flags, the fields involved.
struct OptimizerConfigIssue {
  const Rule* rule = nullptr;
  std::string message;
  std::vector<std::string> fields;  // OptimizerConfig field names (the same as the argument dests)
};

// Thrown by the OptimizerConfig checks (Python's failed assert / raise).
struct OptimizerConfigError : std::runtime_error {
  explicit OptimizerConfigError(OptimizerConfigIssue i) : std::runtime_error(i.message), issue(std::move(i)) {}
  OptimizerConfigIssue issue;
};

// The parts of DistributedDataParallelConfig that validate_run() reads, built as Megatron's
// get_megatron_ddp_config() builds that config from the arguments.
struct DdpConfigView {
  bool fp8_param_gather = false;
  bool use_megatron_fsdp = false;
  bool overlap_grad_reduce = false;

  // With --use-torch-fsdp2 the DDP config is a TorchFullyShardedDataParallelConfig with default fields;
  // otherwise the fields are copied from the arguments of the same name.
  static DdpConfigView from_args(const Namespace& args);
};

// The fields of OptimizerConfig that are argument dests, each copied from the argument of the same name as
// Megatron's get_megatron_optimizer_config() copies them. The other fields (store_param_remainders,
// decoupled_weight_decay, soap_*, adaptive_muon_*, use_layer_wise_distributed_optimizer, grad_norm_skip_threshold,
// dsa_indexer_clip_grad, timers) have no flag and keep their defaults. One list, two builders expand it:
// OptimizerConfig::from_args (the namespace, for validation) and optimizer_config_from (the typed view, for the
// run: optimizer_config_from_args.h); both name each dest by its ArgId and take a dest's absent value from the
// schema's default, so they agree.
#define MR_OPTIMIZER_CONFIG_ARGS(X)                                                                              \
  X(lr) X(min_lr) X(decoupled_lr) X(decoupled_min_lr) X(weight_decay) X(rmsnorm_weight_decay_mult)               \
  X(embedding_min_norm) X(apply_wd_to_qk_layernorm) X(fp8_recipe) X(fp16) X(bf16)                                \
  X(reuse_grad_buf_for_mxfp8_param_ag) X(params_dtype) X(use_precision_aware_optimizer) X(main_grads_dtype)      \
  X(main_params_dtype) X(exp_avg_dtype) X(exp_avg_sq_dtype) X(optimizer) X(loss_scale) X(initial_loss_scale)     \
  X(min_loss_scale) X(loss_scale_window) X(hysteresis) X(adam_beta1) X(adam_beta2) X(adam_eps) X(sgd_momentum)   \
  X(muon_momentum) X(muon_split_qkv) X(muon_nesterov) X(muon_scale_mode) X(muon_fp32_matmul_prec)                \
  X(muon_coefficient_type) X(muon_num_ns_steps) X(muon_tp_mode) X(muon_use_syrk) X(muon_extra_scale_factor)      \
  X(muon_ns_batch_size) X(muon_concurrent_groups) X(muon_scalar_optimizer) X(lion_beta1) X(lion_beta2)           \
  X(use_distributed_optimizer) X(overlap_param_gather) X(overlap_param_gather_with_optimizer_step)               \
  X(optimizer_cpu_offload) X(optimizer_offload_fraction) X(use_torch_optimizer_for_cpu_offload)                  \
  X(overlap_cpu_optimizer_d2h_h2d) X(pin_cpu_grads) X(pin_cpu_params) X(clip_grad) X(log_num_zeros_in_grad)      \
  X(barrier_with_L1_time) X(config_logger_dir) X(optimizer_cuda_graph)

// The fields of DdpConfigView, copied likewise from the arguments of the same name.
#define MR_DDP_CONFIG_ARGS(X) X(fp8_param_gather) X(use_megatron_fsdp) X(overlap_grad_reduce)

// A dtype: "torch.<name>" once resolved, a command-line spelling ("fp32", ...) before; nullopt is None.
using DtypeSpec = std::optional<std::string>;

struct OptimizerConfig {
  // General.
  std::optional<double> lr;
  std::optional<double> min_lr;
  std::optional<double> decoupled_lr;
  std::optional<double> decoupled_min_lr;
  double weight_decay = 0.01;
  std::optional<double> rmsnorm_weight_decay_mult;
  std::optional<double> embedding_min_norm;
  bool apply_wd_to_qk_layernorm = false;

  // Precision.
  std::optional<std::string> fp8_recipe;
  bool fp16 = false;
  bool bf16 = false;
  bool reuse_grad_buf_for_mxfp8_param_ag = false;
  std::string params_dtype = "torch.float32";
  bool use_precision_aware_optimizer = false;
  bool store_param_remainders = true;
  DtypeSpec main_grads_dtype = "torch.float32";
  DtypeSpec main_params_dtype = "torch.float32";
  DtypeSpec exp_avg_dtype = "torch.float32";
  DtypeSpec exp_avg_sq_dtype = "torch.float32";
  std::string optimizer = "adam";

  // Loss scaling.
  std::optional<double> loss_scale;
  double initial_loss_scale = 4294967296.0;  // 2**32
  double min_loss_scale = 1.0;
  double loss_scale_window = 1000;
  int64_t hysteresis = 2;

  // Adam.
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-08;
  bool decoupled_weight_decay = true;
  // SGD.
  double sgd_momentum = 0.9;
  // Emerging optimizers.
  double muon_momentum = 0.95;
  bool muon_split_qkv = true;
  bool muon_nesterov = false;
  std::string muon_scale_mode = "spectral";
  std::string muon_fp32_matmul_prec = "medium";
  std::string muon_coefficient_type = "quintic";
  int64_t muon_num_ns_steps = 5;
  std::string muon_tp_mode = "duplicated";
  bool muon_use_syrk = false;
  double muon_extra_scale_factor = 1.0;
  int64_t muon_ns_batch_size = 1;
  bool muon_concurrent_groups = true;
  std::string muon_scalar_optimizer = "adam";
  // Lion.
  double lion_beta1 = 0.95;
  double lion_beta2 = 0.98;
  double soap_shampoo_beta = 0.95;
  bool soap_use_kl_shampoo = true;
  std::string adaptive_muon_moment2_method = "adamuon";
  double adaptive_muon_beta2 = 0.95;
  double adaptive_muon_eps = 1e-8;

  // Distributed optimizer.
  bool use_distributed_optimizer = false;
  bool use_layer_wise_distributed_optimizer = false;
  bool overlap_param_gather = false;
  bool overlap_param_gather_with_optimizer_step = false;

  // Optimizer offload.
  bool optimizer_cpu_offload = false;
  double optimizer_offload_fraction = 0.0;
  bool use_torch_optimizer_for_cpu_offload = false;
  bool overlap_cpu_optimizer_d2h_h2d = false;
  bool pin_cpu_grads = true;
  bool pin_cpu_params = true;

  // Miscellaneous.
  double clip_grad = 1.0;
  double grad_norm_skip_threshold = std::numeric_limits<double>::infinity();
  std::optional<double> dsa_indexer_clip_grad;
  bool log_num_zeros_in_grad = false;
  bool barrier_with_L1_time = false;
  std::function<void()> timers;  // "function to get timers": an opaque handle, never read by the checks
  std::string config_logger_dir;
  bool optimizer_cuda_graph = false;

  // Every field of MR_OPTIMIZER_CONFIG_ARGS takes that argument's value, or the schema's default where `args` lacks
  // the dest (Megatron's args always hold every dest, so its defaults win over the dataclass's: --muon-momentum 0.9,
  // --optimizer-offload-fraction 1.0); the same config optimizer_config_from(Args::from(args)) builds. The other
  // fields keep their defaults.
  static OptimizerConfig from_args(const Namespace& args);

  // Optimizer-local checks; does not modify the config. `env` answers Transformer Engine questions;
  // warnings (not fatal) are appended to `warnings` when given. Throws OptimizerConfigError.
  void validate(const TargetEnv& env = {}, std::vector<OptimizerConfigIssue>* warnings = nullptr) const;

  // Maps dtype spellings to torch dtypes, drops store_param_remainders on old TE, and turns emerging
  // optimizers with the distributed optimizer (or the deprecated 'dist_muon') into the layer-wise path.
  // Throws OptimizerConfigError for a dtype spelling it does not know.
  void finalize_optimizer_config(const TargetEnv& env = {});

  // Checks shared with DDP and checkpointing; does not modify the config. Throws OptimizerConfigError.
  void validate_run(const DdpConfigView& ddp_config, bool use_torch_fsdp2,
                    const std::optional<std::string>& ckpt_format) const;

  // Model-dependent checks; does not modify the config. Throws OptimizerConfigError.
  void validate_model(bool moe_single_grouped_weight,
                      std::optional<int64_t> virtual_pipeline_model_parallel_size) const;

  // Whether decoupled grads / precision-aware handling applies outside FP8 (FP8 delayed scaling excepted).
  bool use_precision_aware_optimizer_no_fp8_or_ds_fp8() const;

  // finalize_optimizer_config() takes the layer-wise path for non-sgd/adam optimizers that use the
  // distributed optimizer (or 'dist_muon'): true when the config has it or will have it after finalizing.
  bool will_be_layer_wise() const;
};

// Deprecated aliases kept by Megatron.
using AdamOptimizerConfig = OptimizerConfig;
using SGDOptimizerConfig = OptimizerConfig;

}  // namespace mr
