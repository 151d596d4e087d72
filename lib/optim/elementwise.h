// The per-element arithmetic of Adam/AdamW, SGD and Lion, shared by the CPU reference, the fast CPU kernels and
// the CUDA kernels, so the three agree bit for bit.
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

// torch.lerp(start, end, weight) as ATen's vectorized kernel computes it.
MR_HD float lerp_(float start, float end, float weight) {
  float diff = end - start;
  return (weight < 0.5f && weight > -0.5f) ? fmaf_(weight, diff, start) : fmaf_(weight - 1.0f, diff, end);
}
// torch.sign: -1, 0 or 1 (0 for NaN).
MR_HD float sign_(float x) { return static_cast<float>((0.0f < x) - (x < 0.0f)); }
MR_HD bool finite_(float x) { return (f32_bits(x) & 0x7f800000u) != 0x7f800000u; }

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

// One element. `g` is the (already scaled) gradient.
MR_HD void adam_element(float& p, float g, float& m, float& v, const AdamConsts& c) {
  if (c.has_weight_decay) {
    if (c.decoupled) p = p * c.decay_factor;
    else g = fmaf_(p, c.weight_decay, g);
  }
  m = fmaf_(g, c.one_minus_beta1, m * c.beta1);
  v = fmaf_(c.one_minus_beta2 * g, g, v * c.beta2);
  float denom = sqrtf_(v) / c.sqrt_bias_correction2 + c.eps;
  p = p + (c.neg_step_size * m) / denom;
}

// ---- SGD -----------------------------------------------------------------------------------------------------
struct SgdConsts {
  float momentum, one_minus_dampening, weight_decay, neg_lr;
  bool has_momentum, has_weight_decay, nesterov;
  bool first_step;  // torch initialises the momentum buffer with the first gradient
};

MR_HD void sgd_element(float& p, float g, float& buf, const SgdConsts& c) {
  float d = g;
  if (c.has_weight_decay) d = fmaf_(p, c.weight_decay, d);
  if (c.has_momentum) {
    buf = c.first_step ? d : fmaf_(d, c.one_minus_dampening, buf * c.momentum);
    d = c.nesterov ? fmaf_(buf, c.momentum, d) : buf;
  }
  p = fmaf_(d, c.neg_lr, p);
}

// ---- Lion (Emerging-Optimizers' calculate_lion_update + WeightDecayMixin) -------------------------------
struct LionConsts {
  float one_minus_beta1, one_minus_beta2, neg_lr;
  float neg_wd_lr;     // decoupled: param += param * (-weight_decay * lr)
  float weight_decay;  // l2: grad += weight_decay * param
  bool decoupled, has_weight_decay;
};

MR_HD void lion_element(float& p, float g, float& m, const LionConsts& c) {
  if (c.has_weight_decay) {
    if (c.decoupled) p = fmaf_(p, c.neg_wd_lr, p);
    else g = fmaf_(p, c.weight_decay, g);
  }
  float u = lerp_(m, g, c.one_minus_beta1);
  m = lerp_(m, g, c.one_minus_beta2);
  p = fmaf_(sign_(u), c.neg_lr, p);
}

// ---- Muon's elementwise parts (OrthogonalizedOptimizer.step) -----------------------------------------------
struct MuonMomentumConsts {
  float one_minus_momentum, momentum, neg_wd_lr, weight_decay;
  bool decoupled, has_weight_decay, nesterov;
};
// Weight decay, momentum EMA and (Nesterov) lookahead: returns the matrix to orthogonalize.
MR_HD float muon_momentum_element(float& p, float g, float& m, const MuonMomentumConsts& c) {
  if (c.has_weight_decay) {
    if (c.decoupled) p = fmaf_(p, c.neg_wd_lr, p);
    else g = fmaf_(p, c.weight_decay, g);
  }
  m = lerp_(m, g, c.one_minus_momentum);
  return c.nesterov ? lerp_(g, m, c.momentum) : m;
}
// The scaled orthogonal update: orth * scale_factor * extra_scale_factor, as two fp32 multiplies.
MR_HD float muon_scale_element(float orth, float scale, float extra_scale) { return (orth * scale) * extra_scale; }
// p.add_(update, alpha=-lr)
MR_HD void muon_apply_element(float& p, float update, float neg_lr) { p = fmaf_(update, neg_lr, p); }

}  // namespace mr::optim
