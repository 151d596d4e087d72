#include "config/optimizer_config_from_args.h"

namespace mr {

namespace {
template <class E>
  requires std::is_enum_v<E>
std::string str(E v) {
  return std::string(arg::to_string(v));
}
}  // namespace

OptimizerConfig optimizer_config_from(const Args& a) {
  OptimizerConfig c;
  c.lr = a.lr;
  c.min_lr = a.min_lr;
  c.decoupled_lr = a.decoupled_lr;
  c.decoupled_min_lr = a.decoupled_min_lr;
  c.weight_decay = a.weight_decay;
  c.rmsnorm_weight_decay_mult = a.rmsnorm_weight_decay_mult;
  c.embedding_min_norm = a.embedding_min_norm;
  c.apply_wd_to_qk_layernorm = a.apply_wd_to_qk_layernorm;

  c.fp8_recipe = str(a.fp8_recipe);
  c.fp16 = a.fp16;
  c.bf16 = a.bf16;
  c.reuse_grad_buf_for_mxfp8_param_ag = a.reuse_grad_buf_for_mxfp8_param_ag;
  c.params_dtype = a.params_dtype;
  c.use_precision_aware_optimizer = a.use_precision_aware_optimizer;
  c.main_grads_dtype = str(a.main_grads_dtype);
  c.main_params_dtype = str(a.main_params_dtype);
  c.exp_avg_dtype = str(a.exp_avg_dtype);
  c.exp_avg_sq_dtype = str(a.exp_avg_sq_dtype);
  c.optimizer = str(a.optimizer);

  c.loss_scale = a.loss_scale;
  c.initial_loss_scale = a.initial_loss_scale;
  c.min_loss_scale = a.min_loss_scale;
  c.loss_scale_window = a.loss_scale_window;
  c.hysteresis = a.hysteresis;

  c.adam_beta1 = a.adam_beta1;
  c.adam_beta2 = a.adam_beta2;
  c.adam_eps = a.adam_eps;
  c.sgd_momentum = a.sgd_momentum;
  c.muon_momentum = a.muon_momentum;
  c.muon_split_qkv = a.muon_split_qkv;
  c.muon_nesterov = a.muon_nesterov;
  c.muon_scale_mode = str(a.muon_scale_mode);
  c.muon_fp32_matmul_prec = str(a.muon_fp32_matmul_prec);
  c.muon_coefficient_type = a.muon_coefficient_type;
  c.muon_num_ns_steps = a.muon_num_ns_steps;
  c.muon_tp_mode = str(a.muon_tp_mode);
  c.muon_use_syrk = a.muon_use_syrk;
  c.muon_extra_scale_factor = a.muon_extra_scale_factor;
  c.muon_ns_batch_size = a.muon_ns_batch_size;
  c.muon_concurrent_groups = a.muon_concurrent_groups;
  c.muon_scalar_optimizer = str(a.muon_scalar_optimizer);
  c.lion_beta1 = a.lion_beta1;
  c.lion_beta2 = a.lion_beta2;

  c.use_distributed_optimizer = a.use_distributed_optimizer;
  c.overlap_param_gather = a.overlap_param_gather;
  c.overlap_param_gather_with_optimizer_step = a.overlap_param_gather_with_optimizer_step;

  c.optimizer_cpu_offload = a.optimizer_cpu_offload;
  c.optimizer_offload_fraction = a.optimizer_offload_fraction;
  c.use_torch_optimizer_for_cpu_offload = a.use_torch_optimizer_for_cpu_offload;
  c.overlap_cpu_optimizer_d2h_h2d = a.overlap_cpu_optimizer_d2h_h2d;
  c.pin_cpu_grads = a.pin_cpu_grads;
  c.pin_cpu_params = a.pin_cpu_params;

  c.clip_grad = a.clip_grad;
  c.log_num_zeros_in_grad = a.log_num_zeros_in_grad;
  c.barrier_with_L1_time = a.barrier_with_L1_time;
  c.config_logger_dir = a.config_logger_dir;
  c.optimizer_cuda_graph = a.optimizer_cuda_graph;
  // No flag writes store_param_remainders, decoupled_weight_decay, soap_*, adaptive_muon_*,
  // use_layer_wise_distributed_optimizer, grad_norm_skip_threshold or dsa_indexer_clip_grad: their defaults stay.
  return c;
}

DdpConfigView ddp_config_view_from(const Args& a) {
  DdpConfigView v;
  if (a.use_torch_fsdp2) return v;
  v.fp8_param_gather = a.fp8_param_gather;
  v.use_megatron_fsdp = a.use_megatron_fsdp;
  v.overlap_grad_reduce = a.overlap_grad_reduce;
  return v;
}

}  // namespace mr
