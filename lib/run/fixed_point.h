// The per-element part of the exact sums of squares (run/exact_stats.h), shared by the CPU loops and the CUDA
// reductions (run/cuda_ops.cu): one square as a fixed-point integer, and a 128-bit unsigned accumulator made of
// two 64-bit words (device code adds with an explicit carry; no 128-bit atomics needed). Integers: the sum is
// the same in any order, on any device. No CUDA header needed. Internal to lib/run.
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::run {

using Fixed = __int128;

// trunc(x^2 * scale) for finite x, scale = 2^E (run/exact_stats.h): below 2^62 for |x| below the global max.
MR_HD int64_t fixed_square_bits(float x, double scale) {
  const double d = static_cast<double>(x);                // exact
  return static_cast<int64_t>(d * d * scale);             // d*d exact (48 bits); * 2^E exact; truncated toward 0
}

// An unsigned 128-bit sum as two words.
struct U128 {
  uint64_t lo = 0, hi = 0;
  MR_HD void add(uint64_t x) {
    lo += x;                                               // wraps mod 2^64
    hi += lo < x ? 1u : 0u;                                // the carry
  }
  MR_HD void add(const U128& o) {
    add(o.lo);
    hi += o.hi;
  }
};

// A non-negative sum of fixed-point terms (each < 2^62, fewer than 2^65 of them) as Fixed.
inline Fixed to_fixed(const U128& u) { return static_cast<Fixed>((static_cast<unsigned __int128>(u.hi) << 64) | u.lo); }

}  // namespace mr::run
