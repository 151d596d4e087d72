// Checked 64-bit integer arithmetic. Python's ints never overflow; ours do, so every product or sum of sizes a
// user gives (parallel sizes, batch sizes, model dimensions, counts) goes through these and a result beyond 64
// bits is reported (naming the flags involved) instead of wrapping.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace mr {

// a * b, or nullopt when it does not fit in 64 bits.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// a + b, or nullopt when it does not fit in 64 bits.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// a - b, or nullopt when it does not fit in 64 bits.
inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// The product of `factors`, or nullopt when it (or a partial product) does not fit in 64 bits.
inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) return std::nullopt;
  return p;
}

}  // namespace mr
