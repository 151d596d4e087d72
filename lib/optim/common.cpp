// Step constants and slot checks shared by every implementation.
#include <cmath>
#include <string>

#include "optim/kernels.h"

namespace mr::optim {

AdamConsts adam_consts(const AdamOptions& o, const GroupHyper& g) {
  // torch::optim::Adam(W)::step: every scalar is a double until it meets the fp32 tensor.
  double bc1 = o.bias_correction ? 1.0 - std::pow(o.beta1, static_cast<double>(g.step)) : 1.0;
  double bc2 = o.bias_correction ? 1.0 - std::pow(o.beta2, static_cast<double>(g.step)) : 1.0;
  AdamConsts c{};
  c.beta1 = static_cast<float>(o.beta1);
  c.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  c.beta2 = static_cast<float>(o.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  c.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bc2));
  c.eps = static_cast<float>(o.eps);
  c.neg_step_size = static_cast<float>(-(g.lr / bc1));
  c.weight_decay = static_cast<float>(g.weight_decay);
  c.decay_factor = static_cast<float>(1.0 - g.lr * g.weight_decay);
  c.decoupled = o.decoupled_weight_decay;
  c.has_weight_decay = g.weight_decay != 0.0;
  return c;
}

SgdConsts sgd_consts(const SgdOptions& o, const GroupHyper& g) {
  SgdConsts c{};
  c.momentum = static_cast<float>(o.momentum);
  c.one_minus_dampening = static_cast<float>(1.0 - o.dampening);
  c.weight_decay = static_cast<float>(g.weight_decay);
  c.neg_lr = static_cast<float>(-1.0 * g.lr);
  c.has_momentum = o.momentum != 0.0;
  c.has_weight_decay = g.weight_decay != 0.0;
  c.nesterov = o.nesterov;
  c.first_step = g.step <= 1;
  return c;
}

LionConsts lion_consts(const LionOptions& o, const GroupHyper& g) {
  LionConsts c{};
  c.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  c.neg_lr = static_cast<float>(-g.lr);
  c.neg_wd_lr = static_cast<float>(-g.weight_decay * g.lr);
  c.weight_decay = static_cast<float>(g.weight_decay);
  c.decoupled = o.decoupled_weight_decay;
  c.has_weight_decay = g.weight_decay != 0.0;
  return c;
}

void check_slots(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const char* kind,
                 bool needs_exp_avg, bool needs_exp_avg_sq) {
  auto fail = [&](size_t i, const std::string& why) {
    throw std::invalid_argument(std::string(kind) + " step: tensor " + std::to_string(i) + ": " + why);
  };
  for (size_t i = 0; i < slots.size(); ++i) {
    const TensorSlot& s = slots[i];
    if (s.numel < 0) fail(i, "negative numel");
    if (s.group < 0 || static_cast<size_t>(s.group) >= groups.size())
      fail(i, "group " + std::to_string(s.group) + " out of range (" + std::to_string(groups.size()) + " groups)");
    if (s.numel == 0) continue;
    if (!s.param || !s.grad) fail(i, "param and grad are required");
    if (s.param_dtype == DType::E4M3 || s.grad_dtype == DType::E4M3)
      fail(i, "fp8 is an optimizer state's dtype here, not a parameter's or a gradient's");
    if (s.param_dtype == DType::F32 && (s.master || s.remainder))
      fail(i, "fp32 params take no master copy or remainder");
    if (s.remainder && (s.param_dtype != DType::BF16 || s.master))
      fail(i, "store_param_remainders needs bf16 params and no master buffer");
    if (s.master) {
      if (s.master_dtype == DType::BF16 || s.master_dtype == DType::E4M3) fail(i, "master params must be fp32 or fp16");
      if (s.master_dtype == DType::F16 && !s.master_scale) fail(i, "fp16 master params need a scale");
    }
    if (needs_exp_avg) {
      if (!s.exp_avg) fail(i, "exp_avg buffer is required");
      if (scaled_state(s.exp_avg_dtype) && !s.exp_avg_scale)
        fail(i, std::string(dtype_name(s.exp_avg_dtype)) + " exp_avg needs a scale");
    }
    if (needs_exp_avg_sq) {
      if (!s.exp_avg_sq) fail(i, "exp_avg_sq buffer is required");
      if (scaled_state(s.exp_avg_sq_dtype) && !s.exp_avg_sq_scale)
        fail(i, std::string(dtype_name(s.exp_avg_sq_dtype)) + " exp_avg_sq needs a scale");
    }
  }
}

}  // namespace mr::optim
