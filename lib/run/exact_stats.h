// Sums of squares that do not depend on the layout (run/exact_stats.h): the synthetic loss and the gradient
// norm come out bit-identical whether the model is on 1 rank or split over TP x PP x DP x EP. Internal to
// lib/run.
//
// A floating-point sum depends on its order; an integer sum does not. So every square x^2 (exact in double:
// x is fp32) is turned into a fixed-point integer, trunc(x^2 * 2^E), and added in 128 bits. E comes from the
// global max |x| (an all-reduce Max, exact in any order): with max |x| < 2^e, E = 62 - 2e, so each term is
// below 2^62 and 2^65 terms fit. Terms below 2^-E (squares smaller than 2^-62 of the largest) are dropped,
// the same ones under every layout. Across ranks, the 128-bit sum travels as four 32-bit limbs in doubles
// (exact up to 2^21 ranks).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "distributed/runtime.h"
#include "run/fixed_point.h"

namespace mr::run {

// E for values with max |x| = max_abs (finite). 0 when max_abs is 0.
int fixed_exponent(double max_abs);

// trunc(x^2 * 2^E) for finite x; `scale` = 2^E as a double.
// (run/fixed_point.h: the element function the CUDA reductions share.)
inline Fixed fixed_square(float x, double scale) { return static_cast<Fixed>(fixed_square_bits(x, scale)); }

// Sum of fixed_square(value(i)) over i in [0, n), in OpenMP teams of `threads`; integers, so the result does
// not depend on the thread count.
template <class Value>
Fixed sum_fixed_squares(int64_t n, int exponent, int threads, Value value) {
  const double scale = std::ldexp(1.0, exponent);
  std::vector<Fixed> part(static_cast<size_t>(threads), 0);
#pragma omp parallel num_threads(threads)
  {
    Fixed acc = 0;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) acc += fixed_square(value(i), scale);
    part[static_cast<size_t>(omp_get_thread_num())] = acc;
  }
  Fixed total = 0;
  for (Fixed p : part) total += p;
  return total;
}
// The same over x[0, n).
Fixed sum_squares(const float* x, int64_t n, int exponent);
// Max |x| over x[0, n) (NaN when any is NaN, inf when any is inf).
double max_abs(const float* x, int64_t n);

// All-reduce over `g`: sums of fixed-point values (each rank's part >= 0), and the max.
Fixed all_reduce_sum(distributed::Group& g, Fixed mine);
// The same for many sums at once, in place (one collective).
void all_reduce_sums(distributed::Group& g, std::vector<Fixed>& mine);
double all_reduce_max(distributed::Group& g, double mine);

// sum * 2^-E as a double (one rounding).
double to_double(Fixed sum, int exponent);

}  // namespace mr::run
