// Gradient clipping by the global norm, and the zero count: Megatron's get_grad_norm_fp32,
// clip_grad_by_total_norm_fp32 and count_zeros_fp32 (megatron/core/optimizer/clip_grads.py) with
// MegatronOptimizer.clip_grad_norm on top, over raw gradient buffers (GradSlot: fp32, bf16 or fp16).
//
// The cross-rank reduction (Megatron's all_reduce over the grad-stats group: the model-parallel group, or the
// whole world with the distributed optimizer) is a callback the caller supplies, so the distributed layer can
// plug in later; without one the local value is the result (single rank). Every function calls it exactly
// once, on every rank, even with no local gradients (it stands for a collective).
//
// CPU only (OpenMP teams of cpu::threads() threads, SIMD loops); results do not depend on the thread count.
// There is no CUDA version yet (docs/optim.md, "Loss scaling and gradient clipping").
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "optim/kernels.h"

namespace mr::optim {

enum class ReduceOp { Sum, Max };

// All-reduce `values` in place across the ranks that share the gradient statistics. Empty: single rank.
using ReduceFn = std::function<void(std::span<double> values, ReduceOp op)>;

// One gradient for the norm / clip / zero count.
//
// `counted`: whether the gradient enters the norm and the zero count. Megatron counts a parameter's gradient
// only when the parameter is
//   - not a tensor-parallel duplicate: it is TP-partitioned (tensor_model_parallel), or this is TP rank 0
//     (param_is_not_tensor_parallel_duplicate; expert parameters use the expert TP rank), and not a duplicate
//     across generalized-TP ranks (param_is_not_gtp_duplicate);
//   - not marked `shared` (param_is_not_shared). Megatron marks the extra copies: the output layer's copy of
//     word embeddings tied to it on the last pipeline stage, and zeroed embedding copies (e.g. for MTP), so a
//     tied weight counts once, on the stage that owns it.
// The caller, who knows the parallel layout, sets counted = false for the duplicates. Duplicates are still
// clipped: clipping scales every gradient of the optimizer by the same coefficient.
struct ClipSlot {
  GradSlot grad;
  bool counted = true;
};

// Megatron's clip coefficient: max_norm / (total_norm + 1e-6). Clipping scales the gradients only when it is
// below 1 (a NaN total norm gives a NaN coefficient: no scaling).
inline double clip_coefficient(double max_norm, double total_norm) { return max_norm / (total_norm + 1.0e-6); }

// The factor to fold into StepControl::grad_scale for a clip: the coefficient (as fp32) when it is below 1,
// else 1.
inline float clip_factor(double max_norm, double total_norm) {
  double c = clip_coefficient(max_norm, total_norm);
  return c < 1.0 ? static_cast<float>(c) : 1.0f;
}

namespace cpu {

// The global norm of the counted gradients, each element multiplied by `inv_scale` first (1: the gradients as
// they are; 1/loss_scale: the norm of the unscaled gradients without writing them, for the fused order in
// docs/optim.md). norm_type 2: the local sum of squares (in double, per-chunk partials added in a fixed order;
// cpu::unscale_and_check's pass) is reduced with Sum, then the square root. norm_type +inf: the local max |g|
// is reduced with Max. Any inf/NaN gradient gives an inf/NaN norm (NaN wins over inf in the max). Other
// norm types: std::invalid_argument.
double grad_norm(std::span<const ClipSlot> slots, double norm_type = 2.0, const ReduceFn& reduce = {},
                 float inv_scale = 1.0f);

// Multiplies every gradient in place by the fp32 `coeff` (apex / TE multi_tensor_scale; 16-bit gradients are
// decoded, multiplied in fp32 and rounded to nearest even).
void scale_grads(std::span<const GradSlot> grads, float coeff);

// Megatron's clip_grad_by_total_norm_fp32: with coeff = clip_coefficient(max_norm, total_norm), scales every
// slot's gradient (counted or not) by fp32(coeff) when coeff < 1; otherwise leaves them untouched. Returns the
// factor applied (1 when none).
float clip_grads_by_total_norm(std::span<const ClipSlot> slots, double max_norm, double total_norm);

// MegatronOptimizer.clip_grad_norm: the total norm (grad_norm with `reduce`), then, when max_norm > 0, the clip.
// Returns the total norm.
double clip_grad_norm(std::span<const ClipSlot> slots, double max_norm, double norm_type = 2.0,
                      const ReduceFn& reduce = {});

// Megatron's count_zeros_fp32: the number of elements equal to zero (+0 or -0; NaN is not zero) in the counted
// gradients, reduced with Sum (a double: exact up to 2^53).
double count_zeros(std::span<const ClipSlot> slots, const ReduceFn& reduce = {});

}  // namespace cpu
}  // namespace mr::optim
