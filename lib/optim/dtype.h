// Storage dtypes of the optimizer kernels and exact fp32 <-> bf16 / fp16 conversions (round to nearest even),
// usable on the host and in CUDA device code. Bit-compatible with c10::BFloat16 / c10::Half (NaN included).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MR_HD __host__ __device__ __forceinline__
#else
#define MR_HD inline __attribute__((always_inline))
#endif

namespace mr::optim {

// How a buffer's elements are stored. F16 optimizer states (moments, master params) carry a per-tensor fp32
// scale beside them, as Transformer Engine's FusedAdam does (value = fp16 * scale).
enum class DType : uint8_t { F32, BF16, F16 };

inline constexpr int dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }
inline constexpr const char* dtype_name(DType d) {
  return d == DType::F32 ? "fp32" : d == DType::BF16 ? "bf16" : "fp16";
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

// bf16 is the high half of an fp32. Round to nearest, ties to even; every NaN becomes 0x7FC0 (as c10 does).
MR_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
MR_HD float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

// IEEE binary16, round to nearest even; overflow to infinity; NaN keeps its sign and becomes quiet (0x7E00).
MR_HD uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {                                               // below 2^-14: subnormal or zero
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);            // below 2^-25: rounds to zero
    uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (x - 0x38000000u) >> 13, rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}
MR_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return bits_f32(sign);
    float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
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
