// Kernel options from Megatron's OptimizerConfig (the resolved --adam-*, --sgd-*, --lion-*, --muon-* flags),
// following how Megatron's get_megatron_optimizer / _muon_config_to_kwargs pass them on.
#pragma once

#include <vector>

#include "config/optimizer_config.h"
#include "optim/kernels.h"
#include "optim/muon.h"
#include "optim/soap.h"

namespace mr::optim {

AdamOptions adam_options(const OptimizerConfig& c);  // adam_beta1/2, adam_eps, decoupled_weight_decay
SgdOptions sgd_options(const OptimizerConfig& c);    // sgd_momentum (Megatron's SGD: no dampening, no Nesterov)
LionOptions lion_options(const OptimizerConfig& c);  // lion_beta1/2, decoupled weight decay

// muon_momentum, muon_nesterov, muon_coefficient_type, muon_num_ns_steps, muon_fp32_matmul_prec, muon_use_syrk,
// muon_scale_mode, muon_extra_scale_factor, muon_split_qkv, muon_tp_mode, muon_ns_batch_size; the QKV split
// comes from the model (qkv_split_shapes()). Weight decay is always decoupled: TensorParallelMuon's
// `use_decoupled_weight_decay` has no OptimizerConfig field of that name, so Megatron leaves it at True.
// With optimizer adaptive_muon (dist_adaptive_muon is not a choice) also adaptive_muon_moment2_method, _beta2, _eps.
// Throws std::invalid_argument for values the kernels do not implement (e.g. a fixed 5-step coefficient type with
// another step count); muon_tp_mode auto is refused later, by the planner, where a TP group has more than one rank.
MuonOptions muon_options(const OptimizerConfig& c, std::vector<int64_t> qkv_split_shapes = {});
// --optimizer soap, as _default_adam_based_eopt_config_to_kwargs builds SOAP: betas (adam_beta1, adam_beta2),
// shampoo_beta and use_kl_shampoo from soap_shampoo_beta / soap_use_kl_shampoo (config fields without a flag); SOAP's
// eps (1e-8: OptimizerConfig has adam_eps, no `eps`), decoupled weight decay, bias correction, no Nesterov, one
// power-iteration step and no update-RMS clip are SOAP's defaults, since no config field carries their names.
SoapOptions soap_options(const OptimizerConfig& c);
// muon_scalar_optimizer: what the params muon_excluded() routes away from Muon use.
ScalarOptimizer muon_scalar_optimizer(const OptimizerConfig& c);

}  // namespace mr::optim
