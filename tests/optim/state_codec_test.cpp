// Low-precision optimizer states to and from fp32 (lib/optim/state_codec.h): what the run's checkpoints write and
// what a loaded state is stored as. An encoded state equals what a step leaves (the reference step stores through
// encode_state; the fast and CUDA kernels are bit-equal to it, kernels_test.cpp), and fp32 survives unchanged.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "optim/kernels.h"
#include "optim/state_codec.h"

using mr::optim::decode_state;
using mr::optim::DType;
using mr::optim::encode_state;

namespace {
std::vector<float> values(int n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::ldexp(std::sin(0.37 * i + 0.1), -(i % 23)) * (i % 2 ? -1 : 1);
  return x;
}

// What a reference Adam step stores as exp_avg (dtype d, elements of type T) and its scale when the new first moment
// is x: with lr 0 and beta1 0 the step sets exp_avg to the gradient and leaves the rest.
template <class T>
std::pair<std::vector<T>, float> step_leaves(const std::vector<float>& x, DType d) {
  std::vector<float> p(x.size(), 1.0f), v(x.size(), 0.0f);
  std::vector<T> m(x.size(), 0);
  float mscale = 0;
  mr::optim::TensorSlot s;
  s.numel = static_cast<int64_t>(x.size());
  s.param = p.data();
  s.grad = x.data();
  s.exp_avg = m.data();
  s.exp_avg_dtype = d;
  s.exp_avg_scale = &mscale;
  s.exp_avg_sq = v.data();
  const mr::optim::GroupHyper g{0.0, 0.0, 1};
  mr::optim::AdamOptions o;
  o.beta1 = 0.0;
  mr::optim::ref::adam_step({&s, 1}, {&g, 1}, o);
  return {m, mscale};
}

// State number t of 2000 (300 values at a magnitude over fp32's normal range) as dtype d (elements of type T):
// encoded, decoded (what a checkpoint holds) and encoded again.
template <class T>
struct RoundTrip {
  float magnitude = 0, scale = 0, scale_again = 0;
  std::vector<T> first, again;
};
template <class T>
RoundTrip<T> round_trip(DType d, int t) {
  RoundTrip<T> r;
  std::vector<float> x = values(300), y(300);
  r.magnitude = std::ldexp(1.0f + static_cast<float>(t) / 2000.0f, t % 120 - 100);
  for (float& v : x) v *= r.magnitude;
  r.first.resize(300), r.again.resize(300);
  encode_state(x.data(), 300, d, r.first.data(), &r.scale);
  decode_state(r.first.data(), 300, d, &r.scale, y.data());
  encode_state(y.data(), 300, d, r.again.data(), &r.scale_again);
  return r;
}
}  // namespace

TEST_CASE("state codec: fp32 is copied, bf16 rounds to nearest even, and decoding gives the stored values",
          "[optim][state_codec]") {
  const std::vector<float> x = values(257);
  std::vector<float> f(x.size()), back(x.size());
  encode_state(x.data(), 257, DType::F32, f.data(), nullptr);
  CHECK(std::memcmp(f.data(), x.data(), x.size() * 4) == 0);
  decode_state(f.data(), 257, DType::F32, nullptr, back.data());
  CHECK(std::memcmp(back.data(), x.data(), x.size() * 4) == 0);

  std::vector<uint16_t> h(x.size());
  encode_state(x.data(), 257, DType::BF16, h.data(), nullptr);
  decode_state(h.data(), 257, DType::BF16, nullptr, back.data());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(i);
    CHECK(h[i] == mr::optim::f32_to_bf16(x[i]));
    CHECK(back[i] == mr::optim::bf16_to_f32(h[i]));
    CHECK(std::fabs(back[i] - x[i]) <= std::ldexp(std::fabs(x[i]), -8));  // half an ulp of 8 bits
  }
  // Stored again, a decoded state gives the same bits (a checkpoint round trip changes nothing).
  std::vector<uint16_t> h2(x.size());
  encode_state(back.data(), 257, DType::BF16, h2.data(), nullptr);
  CHECK(h2 == h);
}

TEST_CASE("state codec: fp16 takes the scale absmax / (65504 / 2), as the step leaves it", "[optim][state_codec]") {
  const std::vector<float> x = values(1000);
  float absmax = 0;
  for (float v : x) absmax = std::max(absmax, std::fabs(v));
  std::vector<uint16_t> h(x.size());
  float scale = -1;
  encode_state(x.data(), 1000, DType::F16, h.data(), &scale);
  CHECK(scale == absmax / 32752.0f);
  std::vector<float> back(x.size());
  decode_state(h.data(), 1000, DType::F16, &scale, back.data());
  float largest = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(i);
    CHECK(h[i] == mr::optim::f32_to_f16(x[i] * (1.0f / scale)));
    // 11 significant bits down to fp16's subnormals, which the scale keeps far below these values' range.
    CHECK(std::fabs(back[i] - x[i]) <= std::ldexp(std::fabs(x[i]), -10) + 1e-7f * absmax);
    largest = std::max(largest, std::fabs(back[i]));
  }
  CHECK(largest == Approx(absmax).epsilon(1e-3));  // the largest magnitude sits at half of fp16's range
  CHECK(mr::optim::f16_to_f32(h[0]) <= 32768.0f);

  // The same encoding as a step's: a reference Adam step that leaves these values behind stores the same bits and
  // the same scale.
  const auto [m, mscale] = step_leaves<uint16_t>(x, DType::F16);
  CHECK(mscale == scale);
  CHECK(m == h);
}

TEST_CASE("state codec: an all-zero fp16 or fp8 state has scale 0, zero bits and decodes to zeros (fp8: not TE's NaN)",
          "[optim][state_codec]") {
  auto check = [](DType d, auto fill) {
    const std::vector<float> zero(64, 0.0f);
    std::vector<decltype(fill)> h(64, fill);
    float scale = 5;
    encode_state(zero.data(), 64, d, h.data(), &scale);
    CHECK(scale == 0.0f);
    for (auto b : h) CHECK(b == 0);
    std::vector<float> back(64, 1.0f);
    decode_state(h.data(), 64, d, &scale, back.data());
    for (float b : back) CHECK(b == 0.0f);
  };
  check(DType::F16, uint16_t{0xffff});
  check(DType::E4M3, uint8_t{0x55});
}

TEST_CASE("state codec: a decoded fp16 state encodes back to the same bits and scale (a checkpoint round trip)",
          "[optim][state_codec]") {
  // States of 300 values at 2000 magnitudes over fp32's normal range: encode, decode (what a checkpoint holds),
  // encode again. The scale s = absmax / 32752 comes back: fp32's (s * 32752) / 32752 is s for such a quotient.
  for (int t = 0; t < 2000; ++t) {
    const RoundTrip<uint16_t> r = round_trip<uint16_t>(DType::F16, t);
    INFO("magnitude " << r.magnitude);
    REQUIRE(r.again == r.first);
    REQUIRE(r.scale_again == r.scale);
  }
}

TEST_CASE("state codec: fp8 stores e4m3 bytes at 448 / absmax, its scale TE's 1 / (1 / s), as the step leaves it",
          "[optim][state_codec]") {
  const std::vector<float> x = values(1000);
  float absmax = 0;
  for (float v : x) absmax = std::max(absmax, std::fabs(v));
  std::vector<uint8_t> q(x.size());
  float scale = -1;
  encode_state(x.data(), 1000, DType::E4M3, q.data(), &scale);
  const float enc = 1.0f / (absmax / 448.0f);
  CHECK(scale == 1.0f / enc);
  std::vector<float> back(x.size());
  decode_state(q.data(), 1000, DType::E4M3, &scale, back.data());
  int top = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(i);
    CHECK(q[i] == mr::optim::f32_to_e4m3(x[i] * enc));
    CHECK(back[i] == mr::optim::e4m3_to_f32(q[i]) * scale);
    // 4 significant bits down to e4m3's subnormals (2^-9 of 448 / absmax), which flush the smallest values.
    CHECK(std::fabs(back[i] - x[i]) <= std::ldexp(std::fabs(x[i]), -4) + std::ldexp(scale, -10) * 1.001f);
    top += (q[i] & 0x7f) == 0x7e;
  }
  CHECK(top >= 1);  // the absmax lands on 448

  // A reference Adam step that leaves these values as exp_avg stores the same bytes and scale.
  const auto [m, mscale] = step_leaves<uint8_t>(x, DType::E4M3);
  CHECK(mscale == scale);
  CHECK(m == q);
}

TEST_CASE("state codec: a decoded fp8 state keeps its bytes; its scale comes back within 2 ulps, as in TE",
          "[optim][state_codec]") {
  // Transformer Engine's checkpoints hold the fp32 values (get_unscaled_state) and set_scaled_state quantizes them
  // again: the bytes survive, and the scale 1 / (1 / s) is recomputed from the new absmax, 448 * scale rounded.
  int moved = 0;
  for (int t = 0; t < 2000; ++t) {
    const RoundTrip<uint8_t> r = round_trip<uint8_t>(DType::E4M3, t);
    INFO("magnitude " << r.magnitude);
    REQUIRE(r.again == r.first);
    REQUIRE(std::fabs(r.scale_again - r.scale) <= std::ldexp(r.scale, -22));  // at most two ulps
    moved += r.scale_again != r.scale;
  }
  CHECK(moved < 100);  // about one state in ninety (measured over fp32's range: 0.82% by 1 ulp, 0.30% by 2)
}
