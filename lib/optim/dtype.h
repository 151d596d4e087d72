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
