// Storage dtypes of the optimizer kernels and exact fp32 <-> bf16 / fp16 / fp8 (e4m3) conversions (round to nearest
// even), usable on the host and in CUDA device code. Bit-compatible with c10::BFloat16 / c10::Half (NaN included) and
// with CUDA's __nv_fp8_e4m3 (saturating).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MR_HD __host__ __device__ __forceinline__
#else
#define MR_HD inline __attribute__((always_inline))
#endif

namespace mr::optim {

// How a buffer's elements are stored. F16 and E4M3 optimizer states (moments; F16 master params) carry a per-tensor
// fp32 scale beside them, as Transformer Engine's FusedAdam does (value = stored * scale: state_scale below). E4M3
// (OCP fp8 "e4m3fn", one byte) is an optimizer state's dtype only: no parameter, gradient or collective takes it.
enum class DType : uint8_t { F32, BF16, F16, E4M3 };

inline constexpr int dtype_size(DType d) { return d == DType::F32 ? 4 : d == DType::E4M3 ? 1 : 2; }
inline constexpr const char* dtype_name(DType d) {
  return d == DType::F32 ? "fp32" : d == DType::BF16 ? "bf16" : d == DType::F16 ? "fp16" : "fp8";
}

MR_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
MR_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// c ? a : b as a bit mask. With conditionals the compiler moves a floating-point operation whose result may go unused
// under a branch, and then (as the operation might trap) does not vectorise the loop; masks keep it unconditional.
MR_HD uint32_t pick(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

// bf16 is the high half of an fp32. Round to nearest, ties to even; every NaN becomes 0x7FC0 (as c10 does).
MR_HD uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : r);  // a select: loops vectorise
}
MR_HD float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

// IEEE binary16, round to nearest even; overflow to infinity; NaN keeps its sign and becomes quiet (0x7E00).
// Without branches, so that a loop over it vectorises.
MR_HD uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
  // From 2^-14: 10 mantissa bits, to nearest even on the bit pattern (a carry moves into the exponent), rebiased.
  const uint32_t normal = ((a + 0xfffu + ((a >> 13) & 1u)) - 0x38000000u) >> 13;
  // Below: multiples of 2^-24, rounded to nearest even by the addition (2^-24 is 0.5's ulp); the count is the
  // subnormal's bits, and 1024 of them (a round-up to 2^-14) the smallest normal's.
  const uint32_t tiny = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
  uint32_t r = pick(a < 0x38800000u, tiny, normal);
  r = pick(a >= 0x477ff000u, 0x7c00u, r);  // from 65520 up (and infinity): infinity
  r = pick(a > 0x7f800000u, 0x7e00u, r);   // NaN
  return static_cast<uint16_t>(sign | r);
}
// Exact; without branches, so that a loop over it vectorises.
MR_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, em = h & 0x7fffu;  // em: exponent and mantissa
  const uint32_t normal = (em << 13) + 0x38000000u;                                 // exponent + 127 - 15
  const uint32_t tiny = f32_bits(bits_f32(0x38800000u | (em << 13)) - 0x1p-14f);  // subnormal: (2^-14 + m 2^-24) - 2^-14
  uint32_t r = pick(em < 0x400u, tiny, normal);
  r = pick(em >= 0x7c00u, (em << 13) | 0x7f800000u, r);  // inf, NaN (its payload kept)
  return bits_f32(r | sign);
}

// x rounded to the nearest fp16 value, kept as an fp32 (NaN becomes the quiet NaN of its sign); vectorises.
MR_HD float round_to_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// OCP fp8 E4M3 ("e4m3fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN; the
// largest finite value 0x7E is 448 = 1.75 * 2^8, the smallest normal 2^-6, subnormals m * 2^-9. From fp32 as CUDA's
// __nv_fp8_e4m3(float) converts (__NV_SATFINITE): round to nearest even, finite values beyond 448 and infinities to
// +-448, every NaN to 0x7F. Without branches, so that a loop over it vectorises.
MR_HD uint8_t f32_to_e4m3(float f) {
  const uint32_t u = f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  // From 2^-6: 3 mantissa bits, to nearest even on the bit pattern (a carry moves into the exponent), rebiased
  // (127 - 7 = 120 in the exponent field: 0x3c000000).
  const uint32_t normal = ((a + 0x7ffffu + ((a >> 20) & 1u)) - 0x3c000000u) >> 20;
  // Below: multiples of 2^-9, rounded to nearest even by the addition (2^-9 is 16384's ulp); the count is the
  // subnormal's bits, and 8 of them (a round-up to 2^-6) the smallest normal's.
  const uint32_t tiny = f32_bits(bits_f32(a) + 16384.0f) - 0x46800000u;
  uint32_t r = pick(a < 0x3c800000u, tiny, normal);
  r = pick(r > 0x7eu, 0x7eu, r);  // past 448 (464 is a tie, to 448's even mantissa), infinity: saturate
  return static_cast<uint8_t>(pick(a > 0x7f800000u, 0x7fu, sign | r));  // NaN: 0x7F, as CUDA's conversion gives
}
// Exact; without branches.
MR_HD float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24, em = b & 0x7fu;      // em: exponent and mantissa
  const uint32_t normal = (em << 20) + 0x3c000000u;                                  // exponent + 127 - 7
  const uint32_t tiny = f32_bits(bits_f32(0x46800000u + em) - 16384.0f);            // subnormal: (2^14 + m 2^-9) - 2^14
  uint32_t r = pick(em < 8u, tiny, normal);
  r = pick(em == 0x7fu, 0x7fc00000u, r);  // NaN
  return bits_f32(r | sign);
}

// Element i of a buffer stored as `d`, as fp32 (exact), and `x` stored as element i (rounded as above). One
// element at a time: the reference steps, the synthetic model and the checkpoint loader's dtype conversion use them;
// the fast loops call the converters above directly.
MR_HD float load_element(const void* buf, DType d, int64_t i) {
  switch (d) {
    case DType::F32: return static_cast<const float*>(buf)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(buf)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(buf)[i]);
    case DType::E4M3: return e4m3_to_f32(static_cast<const uint8_t*>(buf)[i]);
  }
  return 0.0f;
}
MR_HD void store_element(void* buf, DType d, int64_t i, float x) {
  switch (d) {
    case DType::F32: static_cast<float*>(buf)[i] = x; break;
    case DType::BF16: static_cast<uint16_t*>(buf)[i] = f32_to_bf16(x); break;
    case DType::F16: static_cast<uint16_t*>(buf)[i] = f32_to_f16(x); break;
    case DType::E4M3: static_cast<uint8_t*>(buf)[i] = f32_to_e4m3(x); break;
  }
}

// A per-tensor scaled optimizer state (Transformer Engine's FusedAdam._apply_scale): after each update the state's
// largest magnitude `absmax` maps onto the dtype's range R (fp16: 65504 / 2; fp8 e4m3: 448), s = absmax / R.
//   enc: what a value is multiplied by before it is rounded to the dtype. fp16: TE's rscale, 1 / s (0 when s is 0);
//        fp8: the Float8Quantizer's scale 1 / s.
//   dec: what a stored value is multiplied by when it is read. fp16: s; fp8: the Float8Tensor's scale_inv, which
//        TE's cast computes as 1 / scale, so 1 / (1 / s) (not always s).
// TE's fp8 path divides by zero for an all-zero state (scale inf, then 0 * inf: every element NaN); here an all-zero
// fp8 state stays zero with enc = dec = 0, as TE's fp16 path keeps it (docs/optim.md).
struct StateScale {
  float enc, dec;
};
MR_HD bool scaled_state(DType d) { return d == DType::F16 || d == DType::E4M3; }
MR_HD StateScale state_scale(DType d, float absmax) {
  const bool fp8 = d == DType::E4M3;
  const float s = absmax / (fp8 ? 448.0f : 32752.0f);   // TE: torch.div(absmax, max_range)
  const float enc = s > 0.0f ? 1.0f / s : 0.0f;         // 1 / s, IEEE division (in CUDA too: nvcc -prec-div=true)
  const float dec = fp8 ? (s > 0.0f ? 1.0f / enc : 0.0f) : s;  // (s inf: enc 0, dec inf; s tiny: enc inf, dec 0)
  return {enc, dec};
}

// store_param_remainders (Transformer Engine's scheme): an fp32 master value is kept as a bf16 parameter plus
// the 16 low bits of the fp32 word. The parameter is the high half rounded to nearest on the bit pattern (up
// when the low half is >= 0x8000), so the pair reconstructs the exact fp32 bits.
MR_HD void split_remainder(float master, uint16_t& param, uint16_t& rem) {
  uint32_t u = f32_bits(master);
  uint16_t hi = static_cast<uint16_t>(u >> 16), lo = static_cast<uint16_t>(u & 0xffffu);
  if (lo & 0x8000u) ++hi;
  param = hi;
  rem = lo;
}
MR_HD float join_remainder(uint16_t param, uint16_t rem) {
  uint16_t hi = param;
  if (rem & 0x8000u) --hi;
  return bits_f32((static_cast<uint32_t>(hi) << 16) | rem);
}

}  // namespace mr::optim
