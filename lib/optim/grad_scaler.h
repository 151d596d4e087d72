// Loss scaling for mixed-precision steps: Megatron's constant and dynamic grad scalers
// (megatron/core/optimizer/grad_scaler.py) as a small value type, and the rule by which
// get_megatron_optimizer picks one from the OptimizerConfig. No LibTorch, no device: the scale is a host fp32
// value, updated with the same fp32 arithmetic Megatron's one-element CUDA tensors use.
//
// How a step uses it (MixedPrecisionOptimizer.prepare_grads / step):
//   scaler.inv_scale() -> unscale the grads and look for inf/NaN (cpu::unscale_and_check, or the step's fused
//   StepControl::grad_scale) -> reduce found_inf with MAX over the grad-stats group -> scaler.update(found_inf)
//   -> skip the step when found_inf, else clip (clip_grads.h) and step. docs/optim.md, "Loss scaling and
//   gradient clipping".
#pragma once

#include <cstdint>
#include <optional>

#include "config/optimizer_config.h"

namespace mr::optim {

// What a dynamic scaler saves in a checkpoint (Megatron's state_dict keys 'scale', 'growth_tracker',
// 'hysteresis_tracker'). A constant scaler saves nothing (Megatron: an empty dict) and ignores what it is given.
struct GradScalerState {
  float scale = 1.0f;
  int64_t growth_tracker = 0;
  int64_t hysteresis_tracker = 0;
  friend bool operator==(const GradScalerState&, const GradScalerState&) = default;
};

// The parameters of a dynamic scaler. get_megatron_optimizer fixes growth_factor 2 and backoff_factor 0.5 and
// takes the rest from --initial-loss-scale, --min-loss-scale, --loss-scale-window and --hysteresis.
struct DynamicScalerOptions {
  double initial_scale = 4294967296.0;  // 2**32
  double min_scale = 1.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  // Consecutive good steps before the scale grows. A double because Megatron's loss_scale_window is a float
  // and its tracker is compared with == : a window that is not a whole number never grows the scale.
  double growth_interval = 1000.0;
  int64_t hysteresis = 2;  // steps with inf/NaN (since the last growth) before the scale backs off
};

class GradScaler {
 public:
  // A fixed scale (--loss-scale); update() never changes it. Throws std::invalid_argument unless scale > 0.
  static GradScaler constant(double scale);
  // Megatron's DynamicGradScaler. Throws std::invalid_argument for the values Megatron's asserts refuse:
  // initial_scale <= 0, min_scale <= 0 or > initial_scale, growth_factor <= 1, backoff_factor outside (0, 1),
  // growth_interval <= 0, hysteresis <= 0.
  static GradScaler dynamic(const DynamicScalerOptions& o);

  bool is_dynamic() const { return dynamic_; }
  // The loss scale (fp32, as Megatron keeps it) and its reciprocal formed in double then rounded to fp32
  // (Megatron's `scale.double().reciprocal().float()`).
  float scale() const { return scale_; }
  float inv_scale() const { return static_cast<float>(1.0 / static_cast<double>(scale_)); }

  // After each step's inf/NaN check (found_inf already reduced over the ranks). Dynamic:
  //   found_inf: growth tracker = 0; hysteresis tracker -= 1; when it is <= 0 the scale becomes
  //              max(scale * backoff_factor, min_scale) -- on this and every further overflow until a growth;
  //   else:      growth tracker += 1; when it reaches growth_interval: growth tracker = 0, hysteresis tracker =
  //              hysteresis, scale *= growth_factor (no upper bound, as in Megatron).
  // A good step alone does not refill the hysteresis tracker; only a growth does.
  void update(bool found_inf);

  // Checkpoint state: std::nullopt for a constant scaler. load_state() restores all three fields of a dynamic
  // scaler (the saved scale wins over initial_scale) and is ignored by a constant one.
  std::optional<GradScalerState> state() const;
  void load_state(const GradScalerState& s);

  const DynamicScalerOptions& options() const { return options_; }  // dynamic only
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t hysteresis_tracker() const { return hysteresis_tracker_; }

 private:
  GradScaler() = default;
  bool dynamic_ = false;
  float scale_ = 1.0f;
  float min_scale_ = 1.0f, growth_factor_ = 2.0f, backoff_factor_ = 0.5f;  // fp32, as Megatron's tensors
  DynamicScalerOptions options_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_tracker_ = 0;
};

// The scaler get_megatron_optimizer builds for `c`, or std::nullopt where it uses none:
//   fp16, bf16 or use_distributed_optimizer, and loss_scale set and non-zero -> constant(loss_scale);
//   otherwise fp16                                                            -> dynamic(initial_loss_scale,
//                                     min_loss_scale, growth 2, backoff 0.5, loss_scale_window, hysteresis);
//   otherwise (bf16 or fp32 without loss_scale; plain fp32 even with it)      -> none.
// `emerging_optimizer_params`: the parameters an emerging optimizer (Muon) steps itself get no scaler in
// Megatron (fp16 is refused there: std::invalid_argument); its scalar-optimizer groups follow the rule above with
// the config Megatron hands them (the same config, except use_distributed_optimizer for the layer-wise path).
std::optional<GradScaler> make_grad_scaler(const OptimizerConfig& c, bool emerging_optimizer_params = false);

}  // namespace mr::optim
