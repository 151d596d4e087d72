// The synthetic gradient's exactness (run/synthetic_grad.h): the sum over a global batch is the same bits
// however the batch is split and in whatever order the parts are added.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "optim/kernels.h"
#include "run/buffers.h"
#include "run/synthetic_grad.h"

using namespace mr::run;

namespace {
// One element's sum over the samples of `stats` (times 8), for every part, added in the given order in fp32.
float sum_parts(float q, uint32_t key, const std::vector<SampleStats>& parts, const std::vector<size_t>& order) {
  float acc = 0.0f;
  for (size_t i : order) acc += local_grad_sum(q, key, SampleTable(parts[i]));
  return acc;
}
}  // namespace

TEST_CASE("quantize keeps the requested significant bits", "[run][synthetic]") {
  CHECK(quantize(1.0f, 3) == 1.0f);
  CHECK(quantize(1.2f, 3) == 1.25f);    // 1.01 in binary: 3 bits
  CHECK(quantize(-1.2f, 3) == -1.25f);
  CHECK(quantize(1.1f, 3) == 1.0f);
  CHECK(quantize(1.9f, 2) == 2.0f);     // the carry moves into the exponent
  CHECK(quantize(1e-31f, 10) == 0.0f);  // below 2^-100: zero
  CHECK(quantize(1e-45f, 10) == 0.0f);  // subnormal: zero
  CHECK(std::isinf(quantize(INFINITY, 5)));
  CHECK(std::isnan(quantize(NAN, 5)));
  CHECK(quantize(0.3f, 24) == 0.3f);
  CHECK(quantize_bits(1) == 20);
  CHECK(quantize_bits(8) == 17);
  CHECK(quantize_bits(1000) == 10);
  CHECK(quantize_bits(int64_t{1} << 30) == 1);
}

TEST_CASE("the samples of a global batch are dealt once, whatever the data-parallel split", "[run][synthetic]") {
  const int64_t batch = 48;
  SampleStats whole = expert_samples(7, 3, 96, batch, 1, 0);
  CHECK(whole.n == batch);
  for (int64_t dp : {1, 2, 3, 4, 6}) {
    for (int64_t mbs : {1, 2, 4}) {
      SampleStats sum;
      for (int64_t r = 0; r < dp; ++r) {
        SampleStats s = dense_samples(7, 3, 96, batch, mbs, dp, r);
        sum.n += s.n;
        for (int j = 0; j < 4; ++j) sum.beta_sum[j] += s.beta_sum[j];
      }
      INFO("dp " << dp << " mbs " << mbs);
      CHECK(sum.n == whole.n);
      for (int j = 0; j < 4; ++j) CHECK(sum.beta_sum[j] == whole.beta_sum[j]);
    }
  }
  // A different iteration or seed deals different noise.
  SampleStats other = expert_samples(7, 4, 96, batch, 1, 0), seeded = expert_samples(8, 3, 96, batch, 1, 0);
  CHECK(!std::equal(other.beta_sum, other.beta_sum + 4, whole.beta_sum));
  CHECK(!std::equal(seeded.beta_sum, seeded.beta_sum + 4, whole.beta_sum));
}

TEST_CASE("the gradient of a global batch is the same bits under any split and any order of the sums",
          "[run][synthetic]") {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (int64_t batch : {1, 8, 96, 1024, 4096}) {
    const int bits = quantize_bits(batch);
    for (int trial = 0; trial < 200; ++trial) {
      const float q = quantize(normal(rng) * (trial % 7 == 0 ? 1e4f : 1.0f), bits);
      const uint32_t key = element_bits(static_cast<uint32_t>(rng()), rng());
      const SampleStats one = expert_samples(1, trial, 0, batch, 1, 0);
      const float reference = local_grad_sum(q, key, SampleTable(one));
      for (int64_t dp : {2, 4, 8}) {
        std::vector<SampleStats> parts;
        for (int64_t r = 0; r < dp; ++r) parts.push_back(dense_samples(1, trial, 0, batch, 2, dp, r));
        std::vector<size_t> order(parts.size());
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        INFO("batch " << batch << " dp " << dp << " q " << q);
        CHECK(sum_parts(q, key, parts, order) == reference);
      }
    }
  }
}

TEST_CASE("alpha takes 0, +1 and -1 and the element bits spread over all 256 values", "[run][synthetic]") {
  int seen[3] = {0, 0, 0};
  for (uint32_t k = 0; k < 256; ++k)
    for (int j = 0; j < 4; ++j) ++seen[alpha(k, j) + 1];
  CHECK(seen[0] == 256);  // -1: a quarter of the 1024
  CHECK(seen[1] == 512);  //  0: half
  CHECK(seen[2] == 256);  // +1
  int hist[256] = {};
  for (uint64_t gi = 0; gi < 256 * 64; ++gi) ++hist[element_bits(0xabcdu, gi)];
  for (int h : hist) CHECK(h > 20);
  CHECK(element_bits(1, uint64_t{1} << 32) != element_bits(1, 0));  // the high half counts
}

TEST_CASE("the per-sample coefficient stays in [0, 16]: the noise is at most the gradient itself", "[run][synthetic]") {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    SampleStats s;
    s.add(rng());
    const SampleTable t(s);
    const uint32_t bits8 = static_cast<uint32_t>(rng() & 0xff);
    const int32_t c = t.sum(bits8);
    int64_t by_alpha = 8;
    for (int j = 0; j < 4; ++j) by_alpha += alpha(bits8, j) * s.beta_sum[j];
    CHECK(c == by_alpha);
    CHECK(c >= 0);
    CHECK(c <= 16);
  }
}

TEST_CASE("synthetic_grads computes the element formula for every element, dtype and index (across 2^32)",
          "[run][synthetic]") {
  // A 1-D shard whose indices in the whole tensor cross 2^32, and a 2-D shard split by columns.
  ParamSpec vec;
  vec.name = vec.key = "v";
  vec.shape = {10000};
  vec.full_shape = {int64_t{10000} * 429497};
  vec.split_dim = 0;
  ParamSpec mat;
  mat.name = mat.key = "m";
  mat.shape = {7, 33};
  mat.full_shape = {7, 99};
  mat.split_dim = 1;
  const SampleTable table(dense_samples(5, 2, 16, 64, 2, 4, 1));
  const int bits = quantize_bits(64);
  for (const ParamSpec* p : {&vec, &mat}) {
    const int64_t tp_rank = p == &vec ? 429496 : 2, n = p->numel();
    for (mr::optim::DType dt : {mr::optim::DType::F32, mr::optim::DType::BF16, mr::optim::DType::F16}) {
      std::vector<uint8_t> model(static_cast<size_t>(n) * 4);
      std::vector<float> target(static_cast<size_t>(n)), grad(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        mr::optim::store_element(model.data(), dt, i, 0.1f * uniform(static_cast<uint64_t>(i)));
        target[static_cast<size_t>(i)] = 0.1f * uniform(static_cast<uint64_t>(i) + 99);
      }
      const float m = synthetic_grads(*p, tp_rank, 0xfeedu, table, bits, false,
                                      {model.data(), dt, target.data(), grad.data(), n});
      float expect_max = 0;
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float d = mr::optim::load_element(model.data(), dt, i) - target[static_cast<size_t>(i)];
        const uint64_t gi = static_cast<uint64_t>(global_index(*p, tp_rank, i));
        const float g = local_grad_sum(quantize(d, bits), element_bits(0xfeedu, gi), table);
        if (g != grad[static_cast<size_t>(i)]) ++wrong;
        expect_max = std::max(expect_max, std::fabs(d));
      }
      INFO(p->name << " dtype " << static_cast<int>(dt));
      CHECK(wrong == 0);
      CHECK(m == expect_max);
    }
  }
  CHECK(static_cast<uint64_t>(global_index(vec, 429496, 9999)) > (uint64_t{1} << 32));
  CHECK(static_cast<uint64_t>(global_index(vec, 429496, 0)) < (uint64_t{1} << 32));
}

TEST_CASE("synthetic_grads' max |p - target| is NaN when one element is NaN, inf when one is inf, at any thread count",
          "[run][synthetic]") {
  ParamSpec p;
  p.name = p.key = "v";
  p.shape = p.full_shape = {20000};
  const SampleTable table(dense_samples(5, 2, 16, 64, 2, 4, 1));
  const int64_t n = p.numel();
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    for (int64_t at : {int64_t{0}, int64_t{4097}, n - 1}) {
      std::vector<float> model(static_cast<size_t>(n), 0.25f), target(static_cast<size_t>(n), 0.0f),
          grad(static_cast<size_t>(n));
      model[static_cast<size_t>(at)] = bad;
      model[static_cast<size_t>(n / 2)] = INFINITY;  // an inf elsewhere: NaN still wins
      for (int threads : {1, 2, 3}) {
        mr::optim::cpu::set_threads(threads);
        const float m = synthetic_grads(p, 0, 0xfeedu, table, quantize_bits(64), false,
                                        {model.data(), mr::optim::DType::F32, target.data(), grad.data(), n});
        INFO("bad " << bad << " at " << at << " threads " << threads);
        if (std::isnan(bad)) CHECK(std::isnan(m));
        else CHECK(m == INFINITY);
      }
    }
  }
  mr::optim::cpu::set_threads(0);
}
