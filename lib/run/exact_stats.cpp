// Layout-invariant sums of squares (run/exact_stats.h).
#include "run/host_collectives.h"
#include "run/exact_stats.h"

#include <omp.h>

#include <limits>
#include <stdexcept>
#include <vector>

#include "optim/kernels.h"
#include "run/abs_max.h"

namespace mr::run {

int fixed_exponent(double max_abs) {
  if (!(max_abs > 0) || !std::isfinite(max_abs)) return 0;
  const int e = std::ilogb(max_abs) + 1;  // max_abs < 2^e
  return 62 - 2 * e;
}

Fixed sum_squares(const float* x, int64_t n, int exponent) {
  return sum_fixed_squares(n, exponent, optim::cpu::threads(), [x](int64_t i) { return x[i]; });
}

double max_abs(const float* x, int64_t n) {
  uint32_t m = 0;  // as bits: a NaN is the max (run/abs_max.h)
#pragma omp parallel for simd schedule(static) num_threads(optim::cpu::threads()) reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = max_bits(m, abs_bits(x[i]));
  return static_cast<double>(abs_of_bits(m));
}

Fixed all_reduce_sum(distributed::Group& g, Fixed mine) {
  std::vector<Fixed> v{mine};
  all_reduce_sums(g, v);
  return v[0];
}

void all_reduce_sums(distributed::Group& g, std::vector<Fixed>& mine) {
  std::vector<double> limb(4 * mine.size());
  for (size_t k = 0; k < mine.size(); ++k) {
    if (mine[k] < 0) throw std::logic_error("exact_stats: a negative fixed-point part");
    for (size_t i = 0; i < 4; ++i)
      limb[4 * k + i] = static_cast<double>(static_cast<uint64_t>(mine[k] >> (32 * i)) & 0xffffffffull);
  }
  host_all_reduce(g, distributed::Buffer::cpu(limb.data(), limb.size()), distributed::ReduceOp::Sum);  // each < 2^53: exact
  for (size_t k = 0; k < mine.size(); ++k) {
    Fixed total = 0;
    for (int i = 3; i >= 0; --i) total = (total << 32) + static_cast<Fixed>(static_cast<int64_t>(limb[4 * k + static_cast<size_t>(i)]));
    mine[k] = total;
  }
}

double all_reduce_max(distributed::Group& g, double mine) {
  // NaN does not survive a max; carry it as a second flag.
  double v[2] = {std::isnan(mine) ? 0.0 : mine, std::isnan(mine) ? 1.0 : 0.0};
  host_all_reduce(g, distributed::Buffer::cpu(v, 2), distributed::ReduceOp::Max);
  return v[1] > 0 ? std::numeric_limits<double>::quiet_NaN() : v[0];
}

double to_double(Fixed sum, int exponent) { return std::ldexp(static_cast<double>(sum), -exponent); }

}  // namespace mr::run
