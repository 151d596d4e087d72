// Constant and dynamic loss scalers (grad_scaler.h). The scale and the factors are fp32 values and every update
// is one fp32 multiply (and a max), so a run of update() calls gives the bits Megatron's fp32 tensors hold.
#include "optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mr::optim {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("grad scaler: " + what);
}

// Megatron's max(a, b) of two one-element tensors: NaN in either gives NaN.
float tensor_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::nanf("");
  return std::max(a, b);
}

}  // namespace

GradScaler GradScaler::constant(double scale) {
  require(scale > 0.0, "the loss scale must be positive, got " + std::to_string(scale));
  GradScaler s;
  s.scale_ = static_cast<float>(scale);
  return s;
}

GradScaler GradScaler::dynamic(const DynamicScalerOptions& o) {
  require(o.initial_scale > 0.0, "initial_scale must be positive");
  require(o.min_scale > 0.0, "min_scale must be positive");
  require(o.min_scale <= o.initial_scale, "min_scale must not exceed initial_scale");
  require(o.growth_factor > 1.0, "growth_factor must be greater than 1");
  require(o.backoff_factor > 0.0 && o.backoff_factor < 1.0, "backoff_factor must lie in (0, 1)");
  require(o.growth_interval > 0.0, "growth_interval must be positive");
  require(o.hysteresis > 0, "hysteresis must be positive");
  GradScaler s;
  s.dynamic_ = true;
  s.options_ = o;
  s.scale_ = static_cast<float>(o.initial_scale);
  s.min_scale_ = static_cast<float>(o.min_scale);
  s.growth_factor_ = static_cast<float>(o.growth_factor);
  s.backoff_factor_ = static_cast<float>(o.backoff_factor);
  s.growth_tracker_ = 0;
  s.hysteresis_tracker_ = o.hysteresis;
  return s;
}

void GradScaler::update(bool found_inf) {
  if (!dynamic_) return;
  if (found_inf) {
    growth_tracker_ = 0;
    --hysteresis_tracker_;
    if (hysteresis_tracker_ <= 0) scale_ = tensor_max(scale_ * backoff_factor_, min_scale_);
    return;
  }
  ++growth_tracker_;
  if (static_cast<double>(growth_tracker_) == options_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = options_.hysteresis;
    scale_ = scale_ * growth_factor_;
  }
}

std::optional<GradScalerState> GradScaler::state() const {
  if (!dynamic_) return std::nullopt;
  return GradScalerState{scale_, growth_tracker_, hysteresis_tracker_};
}

void GradScaler::load_state(const GradScalerState& s) {
  if (!dynamic_) return;
  scale_ = s.scale;
  growth_tracker_ = s.growth_tracker;
  hysteresis_tracker_ = s.hysteresis_tracker;
}

std::optional<GradScaler> make_grad_scaler(const OptimizerConfig& c, bool emerging_optimizer_params) {
  if (emerging_optimizer_params) {
    if (c.fp16) throw std::invalid_argument("grad scaler: emerging optimizer with fp16 is not supported");
    return std::nullopt;
  }
  if (!(c.fp16 || c.bf16 || c.use_distributed_optimizer)) return std::nullopt;
  if (c.loss_scale && *c.loss_scale != 0.0) return GradScaler::constant(*c.loss_scale);  // Python truthiness
  if (c.fp16) {
    DynamicScalerOptions o;
    o.initial_scale = c.initial_loss_scale;
    o.min_scale = c.min_loss_scale;
    o.growth_factor = 2.0;
    o.backoff_factor = 0.5;
    o.growth_interval = c.loss_scale_window;
    o.hysteresis = c.hysteresis;
    return GradScaler::dynamic(o);
  }
  return std::nullopt;
}

}  // namespace mr::optim
