// The per-element arithmetic of Adam/AdamW, SGD, Lion, Muon's elementwise parts (Adaptive Muon's and Newton-Schulz's
// normalisation included), SOAP's inner Adam, and the gradient's unscale / found-inf check and scaling, shared by
// the CPU reference, the fast CPU kernels and the CUDA kernels, so the three agree bit for bit.
//
// Each update is written in the order LibTorch's own optimizers evaluate it (torch/csrc/api/src/optim/*.cpp),
// with fp32 scalars, and with a fused multiply-add exactly where ATen's vectorized CPU kernels fuse one
// (`add(x, alpha)` -> fma(x, alpha, self); `addcmul(a, b, value)` -> fma(value*a, b, self); `lerp` as in
// ATen's lerp_vec). Nothing else may contract: kernel translation units build with -ffp-contract=off (C++) and
// -fmad=false (CUDA), and no fast-math. With that, fp32 AdamW/Adam/SGD are bit-equal to LibTorch 1.13 on x86.
#pragma once

#include <cmath>
#include <cstdint>

#include "optim/dtype.h"

namespace mr::optim {

MR_HD float fmaf_(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}
MR_HD float sqrtf_(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);
#endif
}
MR_HD double sqrt_(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return __builtin_sqrt(x);
#endif
}

// torch.lerp(start, end, weight) = start + weight * (end - start), as ATen's vectorized kernel computes it.
MR_HD float lerp_(float start, float end, float weight) {
  float diff = end - start;
  // Small weights step forward from `start`; the others step back from `end` by (1 - weight) * diff, which
  // keeps lerp(a, b, 1) == b exactly. One fma either way.
  return (weight < 0.5f && weight > -0.5f) ? fmaf_(weight, diff, start) : fmaf_(weight - 1.0f, diff, end);
}
// torch.sign: -1, 0 or 1 (0 for NaN).
MR_HD float sign_(float x) { return static_cast<float>((0.0f < x) - (x < 0.0f)); }
// Neither inf nor NaN: the exponent field is not all ones (the found-inf check of loss scaling).
MR_HD bool finite_(float x) { return (f32_bits(x) & 0x7f800000u) != 0x7f800000u; }

// ---- The gradient's unscale, found-inf check and sum of squares; its scaling --------------------------------
// One element of unscale_and_check (kernels.h; also the L2 grad norm's read-only pass, clip_grads.h): returns
// g * inv (what the caller stores back when unscaling in place), adds its square to `sum` and raises `bad` if g
// is inf or NaN. `Flag`: bool, or an integer where a loop keeps the flag in a vector register.
template <class Flag>
MR_HD float unscale_element(float g, float inv, double& sum, Flag& bad) {
  // Found-inf (torch._amp_foreach_non_finite_check_and_unscale_): the gradient as it arrived, before the unscale,
  // is inf or NaN.
  bad |= static_cast<Flag>(!finite_(g));
  // The unscaled gradient: one fp32 rounding, y = g * (1 / loss_scale).
  const float y = g * inv;
  // Its square in double, summed in the caller's order: ||y||_2^2 += y^2 (exact: a float squared fits a double).
  sum += static_cast<double>(y) * static_cast<double>(y);
  return y;
}
// One element of the gradient scaled in place (clip by total norm, the batch average): x * factor, one fp32
// rounding, as torch's grad.mul_(clip_coeff).
MR_HD float scale_element(float x, float factor) { return x * factor; }

// ---- Adam / AdamW ------------------------------------------------------------------------------------------
// The fp32 scalars of one step of one parameter group.
struct AdamConsts {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float sqrt_bias_correction2;  // sqrt(1 - beta2^step), computed in double
  float eps;
  float neg_step_size;          // -lr / (1 - beta1^step), computed in double
  float weight_decay;           // L2 Adam: grad += weight_decay * param
  float decay_factor;           // AdamW: param *= 1 - lr * weight_decay
  bool decoupled;               // AdamW
  bool has_weight_decay;
};

// Adam's two moments for one element, the first half of adam_element below (alone: the new absmax of a scaled
// state, which needs no step). `p` is the weight before the step.
MR_HD void adam_moments(float p, float g, float& m, float& v, const AdamConsts& c) {
  // Adam with L2 regularisation: the decay joins the gradient, g <- g + wd * p, and is averaged into m and v.
  if (c.has_weight_decay && !c.decoupled) g = fmaf_(p, c.weight_decay, g);
  // First moment, an exponential moving average of the gradient: m <- beta1 * m + (1 - beta1) * g
  // (torch: exp_avg.mul_(beta1).add_(g, 1 - beta1)).
  m = fmaf_(g, c.one_minus_beta1, m * c.beta1);
  // Second moment, the average of the squared gradient: v <- beta2 * v + (1 - beta2) * g^2
  // (torch: exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)).
  v = fmaf_(c.one_minus_beta2 * g, g, v * c.beta2);
}

// One element of torch::optim::Adam / AdamW (Megatron --optimizer adam; --adam-beta1/2, --adam-eps,
// --weight-decay). `p` is the fp32 (master) weight, `g` the gradient (already multiplied by grad_scale), `m` and
// `v` the first and second moments (exp_avg, exp_avg_sq), `c` the group's scalars for this step t.
MR_HD void adam_element(float& p, float g, float& m, float& v, const AdamConsts& c) {
  const float p0 = p;
  // AdamW, decoupled weight decay: the weight shrinks on its own, p <- p * (1 - lr * wd), before the update; the
  // decay never passes through the moments (Adam's L2 decay does: adam_moments).
  if (c.has_weight_decay && c.decoupled) p = p * c.decay_factor;
  adam_moments(p0, g, m, v, c);
  // The denominator with v's bias correction folded in: sqrt(v / bc2) + eps, bc2 = 1 - beta2^t, taken as
  // sqrt(v) / sqrt(bc2) (eps is added after the correction, outside the square root, as in torch).
  float denom = sqrtf_(v) / c.sqrt_bias_correction2 + c.eps;
  // The step, with m's bias correction in the step size: p <- p - (lr / bc1) * m / denom, bc1 = 1 - beta1^t
  // (torch: p.addcdiv_(exp_avg, denom, -lr / bc1)). Together: p -= lr * m_hat / (sqrt(v_hat) + eps).
  p = p + (c.neg_step_size * m) / denom;
}

// ---- Weight decay before the update (Emerging-Optimizers' WeightDecayMixin: Lion, Muon, SOAP) --------------
// Decoupled weight decay ("decoupled", the default): the weight shrinks on its own, p <- p - lr * wd * p
// (p.add_(p, alpha=-wd * lr)); `neg_wd_lr` is -wd * lr.
MR_HD void decay_element(float& p, float neg_wd_lr) { p = fmaf_(p, neg_wd_lr, p); }
// Either form of the mixin (--decoupled-weight-decay or not): decoupled as above, else L2, the decay joins the
// gradient, g <- g + wd * p. Without weight decay neither changes. (Adam's and SGD's are torch's forms, in their
// element functions.)
MR_HD void weight_decay_element(float& p, float& g, float neg_wd_lr, float weight_decay, bool decoupled,
                                bool has_weight_decay) {
  if (!has_weight_decay) return;
  if (decoupled) decay_element(p, neg_wd_lr);
  else g = fmaf_(p, weight_decay, g);
}

// ---- SGD -----------------------------------------------------------------------------------------------------
struct SgdConsts {
  float momentum, one_minus_dampening, weight_decay, neg_lr;
  bool has_momentum, has_weight_decay, nesterov;
  bool first_step;  // torch initialises the momentum buffer with the first gradient
};

// One element of torch::optim::SGD (Megatron --optimizer sgd, --sgd-momentum). `buf` is the momentum buffer.
MR_HD void sgd_element(float& p, float g, float& buf, const SgdConsts& c) {
  // The descent direction starts as the gradient.
  float d = g;
  // Weight decay as L2 regularisation (SGD has no decoupled form): d <- g + wd * p.
  if (c.has_weight_decay) d = fmaf_(p, c.weight_decay, d);
  if (c.has_momentum) {
    // Heavy-ball momentum: the first step starts the buffer at d itself; later steps
    // buf <- momentum * buf + (1 - dampening) * d (torch: buf.mul_(momentum).add_(d, 1 - dampening)).
    buf = c.first_step ? d : fmaf_(d, c.one_minus_dampening, buf * c.momentum);
    // Nesterov looks ahead along the buffer, d <- d + momentum * buf; plain momentum steps along buf itself.
    d = c.nesterov ? fmaf_(buf, c.momentum, d) : buf;
  }
  // The step: p <- p - lr * d (torch: p.add_(d, -lr)).
  p = fmaf_(d, c.neg_lr, p);
}

// ---- Lion (Emerging-Optimizers' calculate_lion_update + WeightDecayMixin) -------------------------------
struct LionConsts {
  float one_minus_beta1, one_minus_beta2, neg_lr;
  float neg_wd_lr;     // decoupled: param += param * (-weight_decay * lr)
  float weight_decay;  // l2: grad += weight_decay * param
  bool decoupled, has_weight_decay;
};

// One element of Lion (--lion-beta1/2; also Muon's scalar optimizer with --muon-scalar-optimizer lion). `m` is
// the momentum (exp_avg). Two betas: beta1 mixes the update, beta2 the momentum that is kept.
MR_HD void lion_element(float& p, float g, float& m, const LionConsts& c) {
  // Weight decay (WeightDecayMixin): decoupled p <- p - lr * wd * p, or L2 g <- g + wd * p.
  weight_decay_element(p, g, c.neg_wd_lr, c.weight_decay, c.decoupled, c.has_weight_decay);
  // The update direction interpolates momentum and gradient: u = beta1 * m + (1 - beta1) * g (m.lerp(g, 1 - beta1)).
  float u = lerp_(m, g, c.one_minus_beta1);
  // The momentum kept for the next step uses the other beta: m <- beta2 * m + (1 - beta2) * g.
  m = lerp_(m, g, c.one_minus_beta2);
  // Only the sign of u is used, so every coordinate moves by exactly lr: p <- p - lr * sign(u).
  p = fmaf_(sign_(u), c.neg_lr, p);
}

// ---- Muon's elementwise parts (OrthogonalizedOptimizer.step) -----------------------------------------------
struct MuonMomentumConsts {
  float one_minus_momentum, momentum, neg_wd_lr, weight_decay;
  bool decoupled, has_weight_decay, nesterov;
};
// Weight decay, momentum EMA and (Nesterov) lookahead: returns the matrix to orthogonalize.
// (--muon-momentum, --muon-nesterov; `m` is the momentum buffer.)
MR_HD float muon_momentum_element(float& p, float g, float& m, const MuonMomentumConsts& c) {
  // Weight decay (WeightDecayMixin; decoupled is Muon's default): p <- p - lr * wd * p, or L2 g <- g + wd * p.
  weight_decay_element(p, g, c.neg_wd_lr, c.weight_decay, c.decoupled, c.has_weight_decay);
  // Momentum, an exponential moving average of the gradient: m <- momentum * m + (1 - momentum) * g
  // (exp_avg.lerp_(g, 1 - momentum)).
  m = lerp_(m, g, c.one_minus_momentum);
  // What Newton-Schulz orthogonalises: with Nesterov the gradient pulled towards the new momentum,
  // g + momentum * (m - g) (g.lerp(m, momentum)); otherwise the momentum itself.
  return c.nesterov ? lerp_(g, m, c.momentum) : m;
}
// The scaled orthogonal update: orth * scale_factor * extra_scale_factor, as two fp32 multiplies.
// (scale_factor from --muon-scale-mode and the matrix's shape, muon_scale_factor(); extra: --muon-extra-scale-factor.)
MR_HD float muon_scale_element(float orth, float scale, float extra_scale) { return (orth * scale) * extra_scale; }
// The step along the orthogonalised update: p <- p - lr * update (p.add_(update, alpha=-lr)).
MR_HD void muon_apply_element(float& p, float update, float neg_lr) { p = fmaf_(update, neg_lr, p); }

// ---- Newton-Schulz's normalisation (Emerging-Optimizers' newton_schulz: X / X.norm().clamp_min(eps)) ------------
// The denominator of one whole matrix from its sum of squares in double: max(||X||_F, eps), the root taken in double
// and rounded once to fp32; a NaN norm stays NaN (clamp_min propagates it: std::max's order, not fmaxf's).
MR_HD float ns_denom(double sumsq, float eps) {
  const float norm = static_cast<float>(sqrt_(sumsq));  // ||X||_F = sqrt(sum x^2), one rounding to fp32
  return norm < eps ? eps : norm;                       // clamp_min(eps)
}
// The same for a matrix sharded over TP ranks (distributed Newton-Schulz): each rank's sum of squares is rounded to
// fp32 and all-reduced in fp32, so the root is an fp32 one: max(sqrt(total), eps).
MR_HD float ns_denom_f32(float sumsq, float eps) {
  const float norm = sqrtf_(sumsq);  // ||X||_F from the fp32 all-reduced sum of squares
  return norm < eps ? eps : norm;    // clamp_min(eps)
}
// One element of the normalised matrix Newton-Schulz iterates on: x / denom (an fp32 division, no reciprocal).
MR_HD float ns_normalize_element(float x, float denom) { return x / denom; }

// ---- Adaptive Muon's second moment (--optimizer adaptive_muon; Emerging-Optimizers' AdaptiveMuon, moment2_method
// "adamuon", as Megatron's TensorParallelAdaptiveMuon runs it) ------------------------------------------------------
struct AdaMuonConsts {
  float one_minus_beta2;  // 1 - adaptive_muon_beta2
  float eps;              // adaptive_muon_eps
};
// One element of the orthogonalised update `orth` (already Muon-scaled by the whole matrix's shape), normalised by
// its own running second moment `v` (moment2_buffer). The caller scales the result once more by the shard's shape.
MR_HD float adamuon_element(float orth, float& v, const AdaMuonConsts& c) {
  // Second moment, an exponential moving average of the squared update: v <- beta2 * v + (1 - beta2) * orth^2
  // (moment2.lerp_(orth_grad.square(), 1 - beta2)).
  v = lerp_(v, orth * orth, c.one_minus_beta2);
  // AdamW-style normalisation, eps outside the root: orth / (sqrt(v) + eps) (orth_grad / (moment2.sqrt() + eps)).
  return orth / (sqrtf_(v) + c.eps);
}

// ---- SOAP's inner Adam (--optimizer soap; Emerging-Optimizers' calculate_adam_update, run on the gradient projected
// into the preconditioner's eigenbasis) and its weight decay / step -------------------------------------------------
struct SoapAdamConsts {
  float one_minus_beta1, one_minus_beta2;  // 1 - adam_beta1, 1 - adam_beta2
  float bias_correction1, bias_correction2;  // 1 - beta^t (1 without correct_bias), computed in double
  float eps;
};
// One element of the projected gradient `gp`: updates the moments `m`, `v` (exp_avg, exp_avg_sq, both in the
// eigenbasis) and returns the Adam direction there, which the caller projects back out.
// Not adam_element: Emerging-Optimizers' calculate_adam_update is its own formula (lerp moments, bias correction
// inside the root, no weight decay or lr), not torch.optim.Adam's (mul/add moments, sqrt(v)/sqrt(bc2), fused step).
MR_HD float soap_adam_element(float gp, float& m, float& v, const SoapAdamConsts& c) {
  // First moment: m <- beta1 * m + (1 - beta1) * gp (exp_avg.lerp_(grad, 1 - beta1)).
  m = lerp_(m, gp, c.one_minus_beta1);
  // Second moment of the projected gradient: v <- beta2 * v + (1 - beta2) * gp^2 (exp_avg_sq.lerp_(grad.square(), ...)).
  v = lerp_(v, gp * gp, c.one_minus_beta2);
  // Bias-corrected momentum m / bc1 over the corrected root sqrt(v / bc2) plus eps (outside the root).
  return (m / c.bias_correction1) / (sqrtf_(v / c.bias_correction2) + c.eps);
}
// SOAP's weight decay is decay_element above (WeightDecayMixin's decoupled default).

}  // namespace mr::optim
