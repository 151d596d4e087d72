#include "optim/config.h"

#include <algorithm>

namespace mr::optim {

AdamOptions adam_options(const OptimizerConfig& c) {
  AdamOptions o;
  o.beta1 = c.adam_beta1;
  o.beta2 = c.adam_beta2;
  o.eps = c.adam_eps;
  o.decoupled_weight_decay = c.decoupled_weight_decay;
  return o;
}

SgdOptions sgd_options(const OptimizerConfig& c) {
  SgdOptions o;
  o.momentum = c.sgd_momentum;
  return o;
}

LionOptions lion_options(const OptimizerConfig& c) {
  LionOptions o;
  o.beta1 = c.lion_beta1;
  o.beta2 = c.lion_beta2;
  return o;
}

MuonOptions muon_options(const OptimizerConfig& c, std::vector<int64_t> qkv_split_shapes) {
  MuonOptions o;
  o.momentum = c.muon_momentum;
  o.nesterov = c.muon_nesterov;
  o.ns.coefficients = ns_coefficients_from_string(c.muon_coefficient_type);
  o.ns.steps = static_cast<int>(c.muon_num_ns_steps);
  ns_schedule(o.ns.coefficients, o.ns.steps);  // validates the step count
  o.ns.precision = matmul_precision_from_string(c.muon_fp32_matmul_prec);
  // Emerging-Optimizers' newton_schulz takes the SYRK step only under float32 matmul precision "medium".
  o.ns.use_syrk = c.muon_use_syrk && o.ns.precision == MatmulPrecision::Medium;
  o.scale_mode = muon_scale_mode_from_string(c.muon_scale_mode);
  o.extra_scale_factor = c.muon_extra_scale_factor;
  o.decoupled_weight_decay = true;
  o.split_qkv = c.muon_split_qkv;
  o.qkv_split_shapes = std::move(qkv_split_shapes);
  o.tp_mode = muon_tp_mode_from_string(c.muon_tp_mode);
  o.ns_batch_size = static_cast<int>(std::max<int64_t>(1, c.muon_ns_batch_size));
  if (c.optimizer == "adaptive_muon") {
    o.adaptive.method = moment2_method_from_string(c.adaptive_muon_moment2_method);
    o.adaptive.beta2 = c.adaptive_muon_beta2;
    o.adaptive.eps = c.adaptive_muon_eps;
  }
  return o;
}

SoapOptions soap_options(const OptimizerConfig& c) {
  SoapOptions o;
  o.beta1 = c.adam_beta1;
  o.beta2 = c.adam_beta2;
  o.shampoo_beta = c.soap_shampoo_beta;
  o.use_kl_shampoo = c.soap_use_kl_shampoo;
  return o;
}

ScalarOptimizer muon_scalar_optimizer(const OptimizerConfig& c) {
  return scalar_optimizer_from_string(c.muon_scalar_optimizer);
}

}  // namespace mr::optim
