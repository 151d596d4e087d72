// Fixed-point sums of squares (run/exact_stats.h): the same result in any order and at any thread count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "optim/kernels.h"
#include "run/exact_stats.h"

using namespace mr::run;

TEST_CASE("fixed-point sums of squares do not depend on order, split or threads", "[run][exact]") {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<float> mag(0.0f, 3.0f);
  std::vector<float> x(100003);
  for (float& v : x) v = (rng() & 1 ? -1.0f : 1.0f) * mag(rng);
  const double m = max_abs(x.data(), static_cast<int64_t>(x.size()));
  float expected = 0.0f;
  for (float v : x) expected = std::max(expected, std::fabs(v));
  CHECK(m == static_cast<double>(expected));
  const int e = fixed_exponent(m);
  const Fixed whole = sum_squares(x.data(), static_cast<int64_t>(x.size()), e);
  // Within 2^-50 of the double sum, relative to the largest term.
  double ref = 0;
  for (float v : x) ref += static_cast<double>(v) * v;
  CHECK(std::fabs(to_double(whole, e) - ref) <= ref * 1e-12 + m * m * 1e-9);
  // Shuffled and split into uneven pieces: the same integer.
  std::vector<float> y = x;
  std::shuffle(y.begin(), y.end(), rng);
  Fixed parts = 0;
  for (size_t b = 0; b < y.size();) {
    const size_t n = std::min<size_t>(y.size() - b, 1 + rng() % 5000);
    parts += sum_squares(y.data() + b, static_cast<int64_t>(n), e);
    b += n;
  }
  CHECK(parts == whole);
  for (int threads : {1, 2, 3}) {
    mr::optim::cpu::set_threads(threads);
    CHECK(sum_squares(x.data(), static_cast<int64_t>(x.size()), e) == whole);
  }
  mr::optim::cpu::set_threads(0);
}

TEST_CASE("the fixed-point exponent keeps every term below 2^62", "[run][exact]") {
  for (double m : {1e-30, 0.5, 1.0, 3.0, 65504.0, 1e30}) {
    const int e = fixed_exponent(m);
    const double scale = std::ldexp(1.0, e);
    CHECK(m * m * scale < std::ldexp(1.0, 62));
    CHECK(m * m * scale >= std::ldexp(1.0, 58));  // and uses most of them
    CHECK(fixed_square(static_cast<float>(m), scale) > 0);
  }
  CHECK(fixed_exponent(0.0) == 0);
  CHECK(sum_squares(nullptr, 0, 3) == 0);
}

TEST_CASE("max |x| is NaN when any element is NaN and inf when any is inf, in any order", "[run][exact]") {
  std::vector<float> x(50001, -2.0f);
  x[7] = -INFINITY;
  CHECK(max_abs(x.data(), static_cast<int64_t>(x.size())) == INFINITY);
  for (size_t at : {size_t{0}, size_t{25000}, x.size() - 1}) {
    std::vector<float> y = x;
    y[at] = NAN;
    for (int threads : {1, 2, 3}) {
      mr::optim::cpu::set_threads(threads);
      CHECK(std::isnan(max_abs(y.data(), static_cast<int64_t>(y.size()))));
    }
  }
  mr::optim::cpu::set_threads(0);
  CHECK(max_abs(x.data(), 0) == 0.0);
}
