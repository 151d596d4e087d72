// Global gradient norm, clip by total norm, zero count (clip_grads.h), CPU.
//
// Same organisation as cpu_kernels.cpp: the gradient list is cut into a work list of kChunk-element chunks that
// threads() OpenMP threads share with a static schedule; each chunk's result lands in its own slot of a vector
// and the slots are combined in work-list order afterwards, so no result depends on the thread count. The L2
// sum of squares is cpu::unscale_and_check's (read-only) pass. The loops here use integer arithmetic on the bit
// patterns (max |g|, zero test) or one fp32 multiply (scale), so the SIMD variants cannot differ in rounding.
#include "optim/clip_grads.h"
#include "optim/work_list.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MR_CLIP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MR_CLIP_CLONES
#endif

namespace mr::optim::cpu {
namespace {

using detail::kChunk;
using detail::Work;
using detail::work_list;

void check_grads(std::span<const GradSlot> grads) {
  for (const auto& g : grads)
    if (g.numel < 0 || (g.numel > 0 && !g.grad) || g.dtype == DType::E4M3)
      throw std::invalid_argument("clip_grads: a gradient slot has a negative size, no buffer or an fp8 dtype");
}

std::vector<GradSlot> counted_grads(std::span<const ClipSlot> slots) {
  std::vector<GradSlot> out;
  for (const auto& s : slots)
    if (s.counted) out.push_back(s.grad);
  check_grads(out);
  return out;
}

double reduced(const ReduceFn& reduce, double local, ReduceOp op) {
  if (reduce) reduce(std::span<double>(&local, 1), op);
  return local;
}

// ---- SIMD loops -----------------------------------------------------------------------------------------------

// The largest |x| as a bit pattern: for non-negative IEEE values the integer order is the numeric order, and a
// NaN's pattern is above infinity's, so a NaN anywhere wins (torch's max propagates NaN as well).
MR_CLIP_CLONES uint32_t absmax_bits_f32(const float* __restrict x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, f32_bits(x[i]) & 0x7fffffffu);
  return m;
}
MR_CLIP_CLONES uint16_t absmax_bits_16(const uint16_t* __restrict x, int64_t n) {  // bf16 and fp16 alike
  uint16_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<uint16_t>(x[i] & 0x7fffu));
  return m;
}

MR_CLIP_CLONES int64_t zeros_f32(const float* __restrict x, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += (f32_bits(x[i]) & 0x7fffffffu) == 0u;
  return c;
}
MR_CLIP_CLONES int64_t zeros_16(const uint16_t* __restrict x, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += (x[i] & 0x7fffu) == 0u;
  return c;
}

MR_CLIP_CLONES void scale_f32(float* __restrict g, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) g[i] = scale_element(g[i], c);
}
MR_CLIP_CLONES void scale_bf16(uint16_t* __restrict g, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) g[i] = f32_to_bf16(scale_element(bf16_to_f32(g[i]), c));
}
MR_CLIP_CLONES void scale_f16(uint16_t* __restrict g, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) g[i] = f32_to_f16(scale_element(f16_to_f32(g[i]), c));
}

// |x| as fp32 bits, from a chunk's absmax in its own dtype (the conversions are exact and keep NaN a NaN).
uint32_t as_f32_bits(uint32_t bits, DType d) {
  switch (d) {
    case DType::F32: return bits;
    case DType::BF16: return f32_bits(bf16_to_f32(static_cast<uint16_t>(bits)));
    case DType::F16: return f32_bits(f16_to_f32(static_cast<uint16_t>(bits)));
    case DType::E4M3: break;  // no gradient is fp8 (check_grads)
  }
  return bits;
}

// The largest |g| over the slots as a float (NaN if any element is NaN; 0 for no elements).
float absmax(std::span<const GradSlot> grads) {
  auto work = work_list(grads);
  const int64_t nw = static_cast<int64_t>(work.size());
  std::vector<uint32_t> partial(work.size(), 0u);
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t w = 0; w < nw; ++w) {
    const Work& wk = work[static_cast<size_t>(w)];
    const GradSlot& g = grads[static_cast<size_t>(wk.slot)];
    uint32_t m = g.dtype == DType::F32
                     ? absmax_bits_f32(static_cast<const float*>(g.grad) + wk.begin, wk.len)
                     : absmax_bits_16(static_cast<const uint16_t*>(g.grad) + wk.begin, wk.len);
    partial[static_cast<size_t>(w)] = as_f32_bits(m, g.dtype);
  }
  uint32_t m = 0;
  for (uint32_t p : partial) m = std::max(m, p);
  return bits_f32(m);
}

}  // namespace

double grad_norm(std::span<const ClipSlot> slots, double norm_type, const ReduceFn& reduce, float inv_scale) {
  const bool l2 = norm_type == 2.0, linf = norm_type == std::numeric_limits<double>::infinity();
  if (!l2 && !linf)
    throw std::invalid_argument("grad_norm: norm_type must be 2 or inf, got " + std::to_string(norm_type));
  std::vector<GradSlot> counted = counted_grads(slots);
  if (l2) {
    // The deterministic sum of squares of grad * inv_scale (read-only: in_place = false).
    double local = counted.empty() ? 0.0 : unscale_and_check(counted, inv_scale, false).sum_sq;
    return std::sqrt(reduced(reduce, local, ReduceOp::Sum));
  }
  // max |g * s| == max |g| * s exactly: rounding a product is monotonic in the factor.
  const float local = absmax(counted) * inv_scale;
  return reduced(reduce, static_cast<double>(local), ReduceOp::Max);
}

void scale_grads(std::span<const GradSlot> grads, float coeff) {
  check_grads(grads);
  auto work = work_list(grads);
  const int64_t nw = static_cast<int64_t>(work.size());
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t w = 0; w < nw; ++w) {
    const Work& wk = work[static_cast<size_t>(w)];
    const GradSlot& g = grads[static_cast<size_t>(wk.slot)];
    switch (g.dtype) {
      case DType::F32: scale_f32(static_cast<float*>(g.grad) + wk.begin, wk.len, coeff); break;
      case DType::BF16: scale_bf16(static_cast<uint16_t*>(g.grad) + wk.begin, wk.len, coeff); break;
      case DType::F16: scale_f16(static_cast<uint16_t*>(g.grad) + wk.begin, wk.len, coeff); break;
      case DType::E4M3: break;  // no gradient is fp8 (check_grads)
    }
  }
}

float clip_grads_by_total_norm(std::span<const ClipSlot> slots, double max_norm, double total_norm) {
  const double coeff = clip_coefficient(max_norm, total_norm);
  if (!(coeff < 1.0)) return 1.0f;  // Megatron scales only below 1 (and not for a NaN coefficient)
  std::vector<GradSlot> grads;
  grads.reserve(slots.size());
  for (const auto& s : slots) grads.push_back(s.grad);
  const float c = static_cast<float>(coeff);
  scale_grads(grads, c);
  return c;
}

double clip_grad_norm(std::span<const ClipSlot> slots, double max_norm, double norm_type, const ReduceFn& reduce) {
  const double total = grad_norm(slots, norm_type, reduce);
  if (max_norm > 0.0) clip_grads_by_total_norm(slots, max_norm, total);
  return total;
}

double count_zeros(std::span<const ClipSlot> slots, const ReduceFn& reduce) {
  std::vector<GradSlot> counted = counted_grads(slots);
  auto work = work_list<GradSlot>(counted);
  const int64_t nw = static_cast<int64_t>(work.size());
  std::vector<int64_t> partial(work.size(), 0);
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t w = 0; w < nw; ++w) {
    const Work& wk = work[static_cast<size_t>(w)];
    const GradSlot& g = counted[static_cast<size_t>(wk.slot)];
    partial[static_cast<size_t>(w)] = g.dtype == DType::F32
                                          ? zeros_f32(static_cast<const float*>(g.grad) + wk.begin, wk.len)
                                          : zeros_16(static_cast<const uint16_t*>(g.grad) + wk.begin, wk.len);
  }
  int64_t local = 0;
  for (int64_t p : partial) local += p;
  return reduced(reduce, static_cast<double>(local), ReduceOp::Sum);
}

}  // namespace mr::optim::cpu
