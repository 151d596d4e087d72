// Adam/AdamW, SGD and Lion kernels: against LibTorch's optimizers, the fast CPU kernels and the CUDA kernels
// against the reference (bit for bit), every precision mode, the fused gradient handling.
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "optim/kernels.h"
#include "optim/torch_adapter.h"
#include "optim_test_util.h"

using namespace mr::optim;
using mr::optim::test::agreement;
using mr::optim::test::bit_equal;

namespace {

const std::vector<int64_t> kSizes = {1, 3, 1000, 65537, 131075};

// ---- dtype conversions -------------------------------------------------------------------------------------------

TEST_CASE("bf16 and fp16 conversions match c10", "[optim][dtype]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    c10::BFloat16 b;
    b.x = uint16_t(h);
    c10::Half f;
    f.x = uint16_t(h);
    float fb = float(b), ff = float(f), ours_b = bf16_to_f32(uint16_t(h));
    REQUIRE(std::memcmp(&fb, &ours_b, 4) == 0);
    float ours = f16_to_f32(uint16_t(h));
    if (std::isnan(ff)) REQUIRE(std::isnan(ours));
    else REQUIRE(std::memcmp(&ff, &ours, 4) == 0);
  }
  // fp32 -> 16 bit: special values, every rounding boundary near the subnormal/normal/overflow edges, random bits.
  std::vector<uint32_t> bits = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffc00001u,
                                0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u, 0x387fffffu,
                                0x38800000u, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x00000001u, 0x007fffffu};
  for (uint32_t e = 0x30000000u; e < 0x48000000u; e += 0x00100000u)
    for (uint32_t d : {0u, 0xfffu, 0x1000u, 0x1001u, 0x2fffu, 0x3000u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u})
      bits.push_back(e + d);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 2000000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    bits.push_back(uint32_t(x));
  }
  for (uint32_t u : bits) {
    float f;
    std::memcpy(&f, &u, 4);
    c10::BFloat16 b(f);
    c10::Half h(f);
    INFO("bits 0x" << std::hex << u);
    REQUIRE(f32_to_bf16(f) == b.x);
    if (std::isnan(f)) REQUIRE((f32_to_f16(f) & 0x7c00u) == 0x7c00u);
    else REQUIRE(f32_to_f16(f) == h.x);
  }
}

// fp8 e4m3 by its definition: the value of each of the 256 codes, and the nearest finite one for fp32 inputs.
float e4m3_value(int code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return code & 0x80 ? -mag : mag;
}

TEST_CASE("fp8 e4m3 conversions: every code, and round to nearest even with saturation", "[optim][dtype]") {
  for (int c = 0; c < 256; ++c) {
    const float ours = e4m3_to_f32(uint8_t(c));
    INFO("code 0x" << std::hex << c);
    if ((c & 0x7f) == 0x7f) {
      REQUIRE(std::isnan(ours));
      continue;
    }
    const float want = e4m3_value(c);
    REQUIRE(std::memcmp(&ours, &want, 4) == 0);  // -0 for 0x80 included
    REQUIRE(f32_to_e4m3(ours) == c);             // every finite code round-trips
  }
  REQUIRE(e4m3_to_f32(0x7e) == 448.0f);
  REQUIRE(e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
  // fp32 -> e4m3 against the nearest of the 253 finite values (ties to the even code), saturating at 448.
  std::vector<float> finite;
  std::vector<int> codes;
  for (int c = 0; c < 0x7f; ++c) finite.push_back(e4m3_value(c)), codes.push_back(c);
  auto nearest = [&](float f) {
    const float a = std::fabs(f);
    int best = 0;
    for (size_t k = 1; k < finite.size(); ++k) {
      const double d = std::fabs(double(finite[k]) - a), db = std::fabs(double(finite[best]) - a);
      if (d < db || (d == db && (codes[k] & 1) == 0)) best = int(k);
    }
    return uint8_t(codes[best] | (std::signbit(f) ? 0x80 : 0));
  };
  std::vector<uint32_t> bits = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x00000001u, 0x007fffffu};
  for (int c = 0; c < 0x7f; ++c)  // every code, the midpoints to its neighbours, and one ulp either side of them
    for (float f : {finite[size_t(c)], c + 1 < 0x7f ? (finite[size_t(c)] + finite[size_t(c) + 1]) / 2 : 464.0f}) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      for (uint32_t v : {u - 1, u, u + 1}) bits.push_back(v), bits.push_back(v | 0x80000000u);
    }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) bits.push_back(uint32_t(u));
  for (uint32_t u : bits) {
    float f;
    std::memcpy(&f, &u, 4);
    INFO("bits 0x" << std::hex << u);
    if (std::isnan(f)) REQUIRE(f32_to_e4m3(f) == 0x7f);
    else REQUIRE(f32_to_e4m3(f) == nearest(f));
  }
  REQUIRE(f32_to_e4m3(464.0f) == 0x7e);  // the tie past 448 goes to 448's even mantissa
  REQUIRE(f32_to_e4m3(1e30f) == 0x7e);
  REQUIRE(f32_to_e4m3(-INFINITY) == 0xfe);
}

TEST_CASE("scaled states: TE's range per dtype, fp8's scale_inv is 1 / (1 / s)", "[optim][dtype]") {
  const StateScale h = state_scale(DType::F16, 3.0f);
  REQUIRE(h.dec == 3.0f / 32752.0f);
  REQUIRE(h.enc == 1.0f / (3.0f / 32752.0f));
  uint64_t x = 99u;
  int differs = 0;
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float a = std::ldexp(float(x % 1000003) / 1000003.0f + 0.5f, int(x >> 40) % 40 - 30);
    const StateScale s = state_scale(DType::E4M3, a);
    const float q = 1.0f / (a / 448.0f);  // the quantizer's scale
    REQUIRE(s.enc == q);
    REQUIRE(s.dec == 1.0f / q);  // TE's cast writes scale_inv = 1 / scale
    differs += s.dec != a / 448.0f;
    REQUIRE(f32_to_e4m3(a * s.enc) == 0x7e);  // the largest magnitude lands on 448
  }
  CHECK(differs > 0);  // 1 / (1 / s) is not always s
  // All zero: nothing to scale; stays zero (TE's fp8 cast would make it NaN: docs/optim.md).
  for (DType d : {DType::F16, DType::E4M3}) {
    REQUIRE(state_scale(d, 0.0f).enc == 0.0f);
    REQUIRE(state_scale(d, 0.0f).dec == 0.0f);
    // TE's edges otherwise: an infinite absmax reads back as NaN (0 * inf), a tiny one overflows 1 / s.
    REQUIRE(state_scale(d, INFINITY).enc == 0.0f);
    REQUIRE(std::isinf(state_scale(d, INFINITY).dec));
    REQUIRE(std::isinf(state_scale(d, 1e-40f).enc));
  }
  REQUIRE(state_scale(DType::E4M3, 1e-40f).dec == 0.0f);  // scale_inv = 1 / inf
}

TEST_CASE("round_to_f16 is the fp16 round trip, bit for bit, in a vectorised loop too", "[optim][dtype]") {
  // Every rounding boundary of every exponent from the fp16 subnormals to beyond its range, signs, specials, and
  // a stride through all 2^32 patterns.
  std::vector<uint32_t> bits = {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffc00001u,
                                0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u, 0x387fffffu,
                                0x38800000u, 0x387ff000u, 0x387fefffu, 0x00000001u, 0x007fffffu};
  for (uint32_t e = 0x30000000u; e < 0x48800000u; e += 0x00100000u)
    for (uint32_t d : {0u, 0xfffu, 0x1000u, 0x1001u, 0x2fffu, 0x3000u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u})
      bits.push_back(e + d), bits.push_back((e + d) | 0x80000000u);
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 977) bits.push_back(uint32_t(u));
  std::vector<float> in(bits.size()), out(bits.size());
  std::memcpy(in.data(), bits.data(), bits.size() * 4);
#pragma omp simd
  for (size_t i = 0; i < in.size(); ++i) out[i] = round_to_f16(in[i]);
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = f16_to_f32(f32_to_f16(in[i]));
    if (std::memcmp(&want, &out[i], 4) != 0) {
      INFO("bits 0x" << std::hex << bits[i]);
      REQUIRE(std::memcmp(&want, &out[i], 4) == 0);
    }
  }
}

TEST_CASE("param remainders reconstruct the exact fp32 bits", "[optim][dtype]") {
  uint64_t x = 1234567ull;
  for (int i = 0; i < 1000000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t u = uint32_t(x);
    float f;
    std::memcpy(&f, &u, 4);
    uint16_t p, r;
    split_remainder(f, p, r);
    float back = join_remainder(p, r);
    REQUIRE(std::memcmp(&back, &f, 4) == 0);
    // The parameter is the fp32 value rounded to nearest (ties up in magnitude), i.e. within half a bf16 ulp.
    if (std::isfinite(f) && std::isfinite(bf16_to_f32(p)) && std::fabs(f) > 1e-30f)
      REQUIRE(std::fabs(bf16_to_f32(p) - f) <= std::fabs(f) * (1.0f / 256.0f));
  }
}

TEST_CASE("load_element and store_element are the converters, one element of a buffer at a time", "[optim][dtype]") {
  const float xs[] = {0.0f, -0.0f, 1.0f, 1.00390625f, 3.14159265f, -65519.0f, 65520.0f, 1e-6f, 5e-8f, 448.0f, 500.0f,
                      -1e-3f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  const int n = static_cast<int>(sizeof(xs) / sizeof(xs[0]));
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::E4M3}) {
    std::vector<unsigned char> buf(static_cast<size_t>(n) * static_cast<size_t>(dtype_size(d)), 0xAB);
    for (int i = 0; i < n; ++i) store_element(buf.data(), d, i, xs[i]);
    for (int i = 0; i < n; ++i) {
      INFO(dtype_name(d) << " element " << i);
      const float want = d == DType::F32    ? xs[i]
                         : d == DType::BF16 ? bf16_to_f32(f32_to_bf16(xs[i]))
                         : d == DType::F16  ? f16_to_f32(f32_to_f16(xs[i]))
                                            : e4m3_to_f32(f32_to_e4m3(xs[i]));
      const float got = load_element(buf.data(), d, i);
      CHECK(std::memcmp(&got, &want, 4) == 0);  // bit for bit, NaN's payload and -0 included
    }
  }
}

// ---- against LibTorch ------------------------------------------------------------------------------------------

// Params of the sizes above in two groups (even index: group 0).
struct TorchCase {
  std::vector<torch::Tensor> init;
  std::vector<int32_t> group;
  explicit TorchCase(uint64_t seed) {
    torch::manual_seed(seed);
    for (size_t i = 0; i < kSizes.size(); ++i) {
      init.push_back(torch::randn({kSizes[i]}));
      group.push_back(int32_t(i % 2));
    }
  }
};

struct Fp32Run {
  std::vector<torch::Tensor> p, m, v;
  explicit Fp32Run(const TorchCase& c) {
    for (const auto& t : c.init) {
      p.push_back(t.clone());
      m.push_back(torch::zeros_like(t));
      v.push_back(torch::zeros_like(t));
    }
  }
  std::vector<TensorSlot> slots(const std::vector<torch::Tensor>& g, const TorchCase& c, bool with_v = true) {
    std::vector<TensorSlot> s;
    for (size_t i = 0; i < p.size(); ++i) {
      TensorState ts;
      ts.param = p[i];
      ts.grad = g[i];
      ts.exp_avg = m[i];
      if (with_v) ts.exp_avg_sq = v[i];
      ts.group = c.group[i];
      s.push_back(make_slot(ts));
    }
    return s;
  }
};

void require_close_to_torch(const std::vector<torch::Tensor>& ours, const std::vector<torch::Tensor>& theirs,
                            const char* what) {
  int64_t n = 0, eq = 0;
  double worst = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) {
    auto a = agreement(ours[i], theirs[i].detach());
    n += a.n, eq += a.bit_equal, worst = std::max(worst, a.max_rel);
  }
  INFO(what << ": " << eq << " of " << n << " elements bit-equal to LibTorch, max relative difference " << worst);
  if (test::torch_sqrt_exact()) {
    CHECK(worst <= 1e-6);
  } else {
    WARN("LibTorch " << TORCH_VERSION << "'s vectorized sqrt is not correctly rounded on this CPU: comparing within 2e-5");
    CHECK(worst <= 2e-5);
  }
  if (eq != n) WARN(what << ": " << (n - eq) << " elements differ from LibTorch in the last bits (max rel " << worst << ")");
}

TEST_CASE("AdamW and Adam match torch::optim over 200 steps", "[optim][adam][torch]") {
  for (bool decoupled : {true, false}) {
    DYNAMIC_SECTION((decoupled ? "AdamW" : "Adam (L2)")) {
      TorchCase c(decoupled ? 11 : 12);
      const double lr[2] = {1e-3, 3e-3}, wd[2] = {0.1, 0.01};
      std::vector<torch::Tensor> tp[2];
      for (size_t i = 0; i < c.init.size(); ++i) tp[c.group[i]].push_back(c.init[i].clone().requires_grad_(true));
      std::vector<torch::optim::OptimizerParamGroup> groups;
      for (int g = 0; g < 2; ++g) {
        if (decoupled)
          groups.emplace_back(tp[g], std::make_unique<torch::optim::AdamWOptions>(
                                         torch::optim::AdamWOptions(lr[g]).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd[g])));
        else
          groups.emplace_back(tp[g], std::make_unique<torch::optim::AdamOptions>(
                                         torch::optim::AdamOptions(lr[g]).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd[g])));
      }
      std::unique_ptr<torch::optim::Optimizer> opt;
      if (decoupled) opt = std::make_unique<torch::optim::AdamW>(std::move(groups));
      else opt = std::make_unique<torch::optim::Adam>(std::move(groups));
      Fp32Run fast(c), ref(c);
      AdamOptions o;
      o.beta1 = 0.9, o.beta2 = 0.95, o.eps = 1e-8, o.decoupled_weight_decay = decoupled;
      for (int step = 1; step <= 200; ++step) {
        std::vector<torch::Tensor> g;
        size_t k[2] = {0, 0};
        for (size_t i = 0; i < c.init.size(); ++i) {
          g.push_back(torch::randn({kSizes[i]}));
          tp[c.group[i]][k[c.group[i]]++].mutable_grad() = g.back().clone();
        }
        opt->step();
        std::vector<GroupHyper> gh = {{lr[0], wd[0], step}, {lr[1], wd[1], step}};
        cpu::adam_step(fast.slots(g, c), gh, o);
        ref::adam_step(ref.slots(g, c), gh, o);
      }
      std::vector<torch::Tensor> theirs;
      size_t k[2] = {0, 0};
      for (size_t i = 0; i < c.init.size(); ++i) theirs.push_back(tp[c.group[i]][k[c.group[i]]++]);
      for (size_t i = 0; i < c.init.size(); ++i) {
        REQUIRE(bit_equal(fast.p[i], ref.p[i]));
        REQUIRE(bit_equal(fast.m[i], ref.m[i]));
        REQUIRE(bit_equal(fast.v[i], ref.v[i]));
      }
      require_close_to_torch(fast.p, theirs, decoupled ? "AdamW" : "Adam");
    }
  }
}

TEST_CASE("SGD matches torch::optim::SGD over 200 steps", "[optim][sgd][torch]") {
  struct Variant {
    const char* name;
    double momentum;
    bool nesterov;
  };
  for (Variant var : {Variant{"momentum 0.9", 0.9, false}, Variant{"nesterov", 0.9, true}, Variant{"plain", 0.0, false}}) {
    DYNAMIC_SECTION(var.name) {
      TorchCase c(21);
      const double lr[2] = {1e-2, 3e-3}, wd[2] = {1e-4, 0.0};
      std::vector<torch::Tensor> tp[2];
      for (size_t i = 0; i < c.init.size(); ++i) tp[c.group[i]].push_back(c.init[i].clone().requires_grad_(true));
      std::vector<torch::optim::OptimizerParamGroup> groups;
      for (int g = 0; g < 2; ++g)
        groups.emplace_back(tp[g], std::make_unique<torch::optim::SGDOptions>(
                                       torch::optim::SGDOptions(lr[g]).momentum(var.momentum).nesterov(var.nesterov).weight_decay(wd[g])));
      torch::optim::SGD opt(std::move(groups), torch::optim::SGDOptions(lr[0]));
      Fp32Run fast(c), ref(c);
      SgdOptions o;
      o.momentum = var.momentum, o.nesterov = var.nesterov;
      for (int step = 1; step <= 200; ++step) {
        std::vector<torch::Tensor> g;
        size_t k[2] = {0, 0};
        for (size_t i = 0; i < c.init.size(); ++i) {
          g.push_back(torch::randn({kSizes[i]}));
          tp[c.group[i]][k[c.group[i]]++].mutable_grad() = g.back().clone();
        }
        opt.step();
        std::vector<GroupHyper> gh = {{lr[0], wd[0], step}, {lr[1], wd[1], step}};
        cpu::sgd_step(fast.slots(g, c, false), gh, o);
        ref::sgd_step(ref.slots(g, c, false), gh, o);
      }
      std::vector<torch::Tensor> theirs;
      size_t k[2] = {0, 0};
      for (size_t i = 0; i < c.init.size(); ++i) theirs.push_back(tp[c.group[i]][k[c.group[i]]++]);
      for (size_t i = 0; i < c.init.size(); ++i) REQUIRE(bit_equal(fast.p[i], ref.p[i]));
      require_close_to_torch(fast.p, theirs, var.name);
    }
  }
}

TEST_CASE("Lion matches a LibTorch-ops transcription of Emerging-Optimizers' Lion", "[optim][lion][torch]") {
  for (bool decoupled : {true, false}) {
    DYNAMIC_SECTION((decoupled ? "decoupled weight decay" : "l2 weight decay")) {
      TorchCase c(31);
      const double lr[2] = {1e-4, 3e-4}, wd[2] = {0.1, 0.0}, b1 = 0.95, b2 = 0.98;
      std::vector<torch::Tensor> tp, tm;
      for (const auto& t : c.init) tp.push_back(t.clone()), tm.push_back(torch::zeros_like(t));
      Fp32Run fast(c), ref(c);
      LionOptions o;
      o.beta1 = b1, o.beta2 = b2, o.decoupled_weight_decay = decoupled;
      for (int step = 1; step <= 200; ++step) {
        std::vector<torch::Tensor> g;
        for (size_t i = 0; i < c.init.size(); ++i) {
          g.push_back(torch::randn({kSizes[i]}));
          // WeightDecayMixin._apply_weight_decay_inplace, calculate_lion_update, p.add_(update, alpha=-lr)
          double l = lr[c.group[i]], w = wd[c.group[i]];
          auto grad = g.back().clone();
          if (w != 0.0) {
            if (decoupled) tp[i].add_(tp[i], -w * l);
            else grad.add_(tp[i], w);
          }
          auto update = tm[i].lerp(grad, 1 - b1);
          tm[i].lerp_(grad, 1 - b2);
          tp[i].add_(torch::sign(update), -l);
        }
        std::vector<GroupHyper> gh = {{lr[0], wd[0], step}, {lr[1], wd[1], step}};
        cpu::lion_step(fast.slots(g, c, false), gh, o);
        ref::lion_step(ref.slots(g, c, false), gh, o);
      }
      for (size_t i = 0; i < c.init.size(); ++i) REQUIRE(bit_equal(fast.p[i], ref.p[i]));
      require_close_to_torch(fast.p, tp, "Lion");
    }
  }
}

// ---- precision modes: fast == reference, semantics -----------------------------------------------------------------

struct Mode {
  std::string name;
  torch::ScalarType param = torch::kFloat, grad = torch::kFloat;
  bool master = false;
  torch::ScalarType master_dt = torch::kFloat;
  bool remainder = false;
  torch::ScalarType m = torch::kFloat, v = torch::kFloat;
};

const std::vector<Mode>& modes() {
  static const std::vector<Mode> m = {
      {"fp32"},
      {"fp32 params, bf16 grads", torch::kFloat, torch::kBFloat16},
      {"bf16 params + fp32 master", torch::kBFloat16, torch::kFloat, true},
      {"fp16 params + fp32 master, fp16 grads", torch::kHalf, torch::kHalf, true},
      {"bf16 params, no master", torch::kBFloat16, torch::kBFloat16},
      {"bf16 params + remainders", torch::kBFloat16, torch::kFloat, false, torch::kFloat, true},
      {"bf16 params + fp32 master, bf16 moments", torch::kBFloat16, torch::kFloat, true, torch::kFloat, false,
       torch::kBFloat16, torch::kBFloat16},
      {"remainders + bf16 moments", torch::kBFloat16, torch::kBFloat16, false, torch::kFloat, true, torch::kBFloat16,
       torch::kBFloat16},
      {"bf16 params + fp32 master, fp16 scaled moments", torch::kBFloat16, torch::kFloat, true, torch::kFloat, false,
       torch::kHalf, torch::kHalf},
      {"fp16 params + fp16 scaled master, bf16/fp16 moments", torch::kHalf, torch::kFloat, true, torch::kHalf, false,
       torch::kBFloat16, torch::kHalf},
      // kByte: fp8 e4m3 states (Transformer Engine's torch.uint8), scaled.
      {"bf16 params + fp32 master, fp8 scaled moments", torch::kBFloat16, torch::kFloat, true, torch::kFloat, false,
       torch::kByte, torch::kByte},
      {"remainders + fp8/fp16 moments", torch::kBFloat16, torch::kBFloat16, false, torch::kFloat, true, torch::kByte,
       torch::kHalf},
  };
  return m;
}

torch::Tensor scale_of(const torch::Tensor& x) {
  return torch::full({1}, state_scale(DType::F16, x.abs().max().item<float>()).dec, torch::kFloat);
}
bool scaled_dt(torch::ScalarType t) { return t == torch::kHalf || t == torch::kByte; }

// One optimizer state for a list of tensors in one precision mode.
struct ModeRun {
  Mode mode;
  std::vector<TensorState> ts;
  std::vector<torch::Tensor> grads;

  ModeRun(const Mode& md, const std::vector<torch::Tensor>& init) : mode(md) {
    for (size_t i = 0; i < init.size(); ++i) {
      TensorState t;
      const auto& p0 = init[i];
      if (md.remainder) {
        t.param = torch::empty_like(p0, torch::kBFloat16);
        t.remainder = torch::empty_like(p0, torch::kShort);
        for (int64_t k = 0; k < p0.numel(); ++k)
          split_remainder(p0.data_ptr<float>()[k], reinterpret_cast<uint16_t*>(t.param.data_ptr())[k],
                          reinterpret_cast<uint16_t*>(t.remainder.data_ptr())[k]);
      } else {
        t.param = p0.to(md.param).clone();  // .to() of the same dtype would alias
      }
      if (md.master) {
        if (md.master_dt == torch::kHalf) {
          t.master_scale = scale_of(p0);
          t.master = (p0 * state_scale(DType::F16, p0.abs().max().item<float>()).enc).to(torch::kHalf);
        } else {
          t.master = p0.clone();
        }
      }
      t.exp_avg = torch::zeros_like(p0, md.m);
      t.exp_avg_sq = torch::zeros_like(p0, md.v);
      if (scaled_dt(md.m)) t.exp_avg_scale = torch::ones({1});
      if (scaled_dt(md.v)) t.exp_avg_sq_scale = torch::ones({1});
      t.group = int32_t(i % 2);
      ts.push_back(t);
    }
  }
  // Slots for this step's grads (given in fp32, stored in the mode's grad dtype); `states`: which moments exist.
  std::vector<TensorSlot> slots(const std::vector<torch::Tensor>& g32, int states) {
    grads.clear();
    std::vector<TensorSlot> s;
    for (size_t i = 0; i < ts.size(); ++i) {
      grads.push_back(g32[i].to(mode.grad));
      TensorState t = ts[i];
      t.grad = grads.back();
      if (states < 1) t.exp_avg = torch::Tensor(), t.exp_avg_scale = torch::Tensor();
      if (states < 2) t.exp_avg_sq = torch::Tensor(), t.exp_avg_sq_scale = torch::Tensor();
      s.push_back(make_slot(t));
    }
    return s;
  }
  // The fp32 master values of tensor i.
  torch::Tensor master(size_t i) const {
    const auto& t = ts[i];
    if (t.remainder.defined()) {
      auto out = torch::empty(t.param.sizes(), torch::kFloat);
      for (int64_t k = 0; k < out.numel(); ++k)
        out.data_ptr<float>()[k] = join_remainder(reinterpret_cast<const uint16_t*>(t.param.data_ptr())[k],
                                                  reinterpret_cast<const uint16_t*>(t.remainder.data_ptr())[k]);
      return out;
    }
    if (t.master.defined())
      return t.master_scale.defined() ? t.master.to(torch::kFloat) * t.master_scale.item<float>() : t.master.clone();
    return t.param.to(torch::kFloat);
  }
  std::vector<torch::Tensor> buffers() const {
    std::vector<torch::Tensor> b;
    for (const auto& t : ts)
      for (const auto& x : {t.param, t.master, t.master_scale, t.remainder, t.exp_avg, t.exp_avg_scale, t.exp_avg_sq,
                            t.exp_avg_sq_scale})
        if (x.defined()) b.push_back(x);
    return b;
  }
};

std::vector<torch::Tensor> random_grads(double scale = 1.0) {
  std::vector<torch::Tensor> g;
  for (int64_t n : kSizes) g.push_back(torch::randn({n}) * scale);
  return g;
}

// Each elementwise kernel (optim/elementwise_kernels.def) under the options that change its arithmetic; kOpts is
// the list both bit-for-bit cases loop over ([optim][modes] on the CPU, [optim][gpu] on CUDA).
enum class Opt { AdamW, Adam, Sgd, SgdNesterov, Lion };
constexpr Opt kOpts[] = {Opt::AdamW, Opt::Adam, Opt::Sgd, Opt::SgdNesterov, Opt::Lion};
const char* opt_name(Opt o) {
  switch (o) {
    case Opt::AdamW: return "AdamW";
    case Opt::Adam: return "Adam";
    case Opt::Sgd: return "SGD";
    case Opt::SgdNesterov: return "SGD nesterov";
    case Opt::Lion: return "Lion";
  }
  return "?";
}
int opt_states(Opt o) { return o == Opt::AdamW || o == Opt::Adam ? 2 : 1; }

enum class Impl { Ref, Cpu, Gpu };

void step(Impl impl, Opt opt, std::span<const TensorSlot> s, int step, const StepControl& ctl = {}) {
  std::vector<GroupHyper> gh = {{1e-3, 0.1, step}, {2e-3, 0.0, step}};
  AdamOptions ao;
  ao.decoupled_weight_decay = opt == Opt::AdamW;
  SgdOptions so;
  so.nesterov = opt == Opt::SgdNesterov;
  LionOptions lo;
  switch (opt) {
    case Opt::AdamW:
    case Opt::Adam:
      impl == Impl::Ref ? ref::adam_step(s, gh, ao, ctl) : impl == Impl::Cpu ? cpu::adam_step(s, gh, ao, ctl) : gpu::adam_step(s, gh, ao, ctl);
      break;
    case Opt::Sgd:
    case Opt::SgdNesterov:
      impl == Impl::Ref ? ref::sgd_step(s, gh, so, ctl) : impl == Impl::Cpu ? cpu::sgd_step(s, gh, so, ctl) : gpu::sgd_step(s, gh, so, ctl);
      break;
    case Opt::Lion:
      impl == Impl::Ref ? ref::lion_step(s, gh, lo, ctl) : impl == Impl::Cpu ? cpu::lion_step(s, gh, lo, ctl) : gpu::lion_step(s, gh, lo, ctl);
      break;
  }
}

TEST_CASE("fast CPU kernels equal the reference bit for bit in every precision mode", "[optim][modes]") {
  for (Opt opt : kOpts) {
    for (const Mode& md : modes()) {
      DYNAMIC_SECTION(opt_name(opt) << ", " << md.name) {
        torch::manual_seed(41);
        std::vector<torch::Tensor> init;
        for (int64_t n : kSizes) init.push_back(torch::randn({n}));
        ModeRun r(md, init), f1(md, init), f2(md, init);
        for (int s = 1; s <= 12; ++s) {
          auto g = random_grads(s % 3 == 0 ? 100.0 : 1.0);
          step(Impl::Ref, opt, r.slots(g, opt_states(opt)), s);
          cpu::set_threads(1);
          step(Impl::Cpu, opt, f1.slots(g, opt_states(opt)), s);
          cpu::set_threads(3);  // an odd team: chunks split unevenly
          step(Impl::Cpu, opt, f2.slots(g, opt_states(opt)), s);
        }
        cpu::set_threads(0);
        auto br = r.buffers(), b1 = f1.buffers(), b2 = f2.buffers();
        REQUIRE(br.size() == b1.size());
        for (size_t i = 0; i < br.size(); ++i) {
          REQUIRE(bit_equal(br[i], b1[i]));
          REQUIRE(bit_equal(br[i], b2[i]));
        }
      }
    }
  }
}

TEST_CASE("16-bit params with an fp32 master follow the fp32 run exactly", "[optim][modes]") {
  // bf16/fp16 params + fp32 master, and bf16 params + remainders: the master is the fp32 run's param, bit for
  // bit; the model param is its rounding (nearest even; TE's nearest-up-on-ties for remainders).
  torch::manual_seed(51);
  std::vector<torch::Tensor> init;
  for (int64_t n : kSizes) init.push_back(torch::randn({n}));
  ModeRun f32(modes()[0], init), bf(modes()[2], init), rem(modes()[5], init);
  Mode fp16m = modes()[3];
  fp16m.grad = torch::kFloat;
  ModeRun hf(fp16m, init);
  for (int s = 1; s <= 20; ++s) {
    auto g = random_grads();
    step(Impl::Cpu, Opt::AdamW, f32.slots(g, 2), s);
    step(Impl::Cpu, Opt::AdamW, bf.slots(g, 2), s);
    step(Impl::Cpu, Opt::AdamW, rem.slots(g, 2), s);
    step(Impl::Cpu, Opt::AdamW, hf.slots(g, 2), s);
    for (size_t i = 0; i < init.size(); ++i) {
      REQUIRE(bit_equal(f32.ts[i].param, bf.ts[i].master));
      REQUIRE(bit_equal(f32.ts[i].param, hf.ts[i].master));
      REQUIRE(bit_equal(f32.ts[i].param, rem.master(i)));  // remainders: the exact fp32 bits
      REQUIRE(bit_equal(bf.ts[i].param, f32.ts[i].param.to(torch::kBFloat16)));
      REQUIRE(bit_equal(hf.ts[i].param, f32.ts[i].param.to(torch::kHalf)));
      auto p = f32.ts[i].param.data_ptr<float>();
      auto rp = reinterpret_cast<const uint16_t*>(rem.ts[i].param.data_ptr());
      for (int64_t k = 0; k < init[i].numel(); ++k) {
        uint16_t hi, lo;
        split_remainder(p[k], hi, lo);
        REQUIRE(rp[k] == hi);
      }
    }
  }
}

TEST_CASE("precision-aware states: bf16 rounding and TE's fp16 per-tensor scaling", "[optim][modes]") {
  torch::manual_seed(61);
  const int64_t n = 5003;
  auto p0 = torch::randn({n});
  // One AdamW step from known states, spelled out with LibTorch ops.
  auto m0 = torch::randn({n}) * 0.01, v0 = torch::rand({n}) * 1e-4, g = torch::randn({n});
  AdamOptions o;
  GroupHyper gh{1e-3, 0.1, 7};
  AdamConsts c = adam_consts(o, gh);
  auto expect = [&](const torch::Tensor& m_in, const torch::Tensor& v_in, torch::Tensor& p_out, torch::Tensor& m_out,
                    torch::Tensor& v_out) {
    p_out = p0.clone(), m_out = m_in.clone(), v_out = v_in.clone();
    for (int64_t i = 0; i < n; ++i)
      adam_element(p_out.data_ptr<float>()[i], g.data_ptr<float>()[i], m_out.data_ptr<float>()[i],
                   v_out.data_ptr<float>()[i], c);
  };
  SECTION("bf16 moments are rounded to nearest even after the fp32 update") {
    auto mb = m0.to(torch::kBFloat16), vb = v0.to(torch::kBFloat16), p = p0.clone();
    TensorState t;
    t.param = p, t.grad = g, t.exp_avg = mb, t.exp_avg_sq = vb;
    std::vector<TensorSlot> s = {make_slot(t)};
    cpu::adam_step(s, std::span(&gh, 1), o);
    torch::Tensor pe, me, ve;
    expect(m0.to(torch::kBFloat16).to(torch::kFloat), v0.to(torch::kBFloat16).to(torch::kFloat), pe, me, ve);
    REQUIRE(bit_equal(p, pe));
    REQUIRE(bit_equal(mb, me.to(torch::kBFloat16)));
    REQUIRE(bit_equal(vb, ve.to(torch::kBFloat16)));
  }
  SECTION("fp16 moments carry a per-tensor scale: absmax / (65504 / 2)") {
    auto ms = scale_of(m0), vs = scale_of(v0);
    auto mh = (m0 * state_scale(DType::F16, m0.abs().max().item<float>()).enc).to(torch::kHalf);
    auto vh = (v0 * state_scale(DType::F16, v0.abs().max().item<float>()).enc).to(torch::kHalf);
    auto m_in = mh.to(torch::kFloat) * ms.item<float>(), v_in = vh.to(torch::kFloat) * vs.item<float>();
    auto p = p0.clone();
    TensorState t;
    t.param = p, t.grad = g, t.exp_avg = mh, t.exp_avg_sq = vh, t.exp_avg_scale = ms, t.exp_avg_sq_scale = vs;
    std::vector<TensorSlot> s = {make_slot(t)};
    cpu::adam_step(s, std::span(&gh, 1), o);
    torch::Tensor pe, me, ve;
    expect(m_in, v_in, pe, me, ve);
    REQUIRE(bit_equal(p, pe));
    const float mse = me.abs().max().item<float>() / 32752.0f, vse = ve.abs().max().item<float>() / 32752.0f;
    REQUIRE(ms.item<float>() == mse);
    REQUIRE(vs.item<float>() == vse);
    REQUIRE(bit_equal(mh, (me * (1.0f / mse)).to(torch::kHalf)));
    REQUIRE(bit_equal(vh, (ve * (1.0f / vse)).to(torch::kHalf)));
  }
  SECTION("fp8 moments: e4m3 bytes, TE's quantizer scale 448 / absmax and scale_inv its reciprocal") {
    // TE: Float8Quantizer(scale = 1 / (absmax / 448)) casts x * scale to e4m3 (saturating, nearest even) and
    // stores scale_inv = 1 / scale; the state reads back as e4m3 * scale_inv.
    auto quantize = [](const torch::Tensor& x, torch::Tensor& bytes, torch::Tensor& scale_inv) {
      const float q = 1.0f / (x.abs().max().item<float>() / 448.0f);
      bytes = torch::empty({x.numel()}, torch::kByte);
      for (int64_t i = 0; i < x.numel(); ++i) bytes.data_ptr<uint8_t>()[i] = f32_to_e4m3(x.data_ptr<float>()[i] * q);
      scale_inv = torch::full({1}, 1.0f / q, torch::kFloat);
    };
    auto dequantize = [](const torch::Tensor& bytes, const torch::Tensor& scale_inv) {
      auto out = torch::empty({bytes.numel()}, torch::kFloat);
      for (int64_t i = 0; i < bytes.numel(); ++i)
        out.data_ptr<float>()[i] = e4m3_to_f32(bytes.data_ptr<uint8_t>()[i]) * scale_inv.item<float>();
      return out;
    };
    torch::Tensor mq, ms, vq, vs;
    quantize(m0, mq, ms);
    quantize(v0, vq, vs);
    auto m_in = dequantize(mq, ms), v_in = dequantize(vq, vs);
    auto p = p0.clone();
    TensorState t;
    t.param = p, t.grad = g, t.exp_avg = mq, t.exp_avg_sq = vq, t.exp_avg_scale = ms, t.exp_avg_sq_scale = vs;
    std::vector<TensorSlot> s = {make_slot(t)};
    REQUIRE(s[0].exp_avg_dtype == DType::E4M3);
    cpu::adam_step(s, std::span(&gh, 1), o);
    torch::Tensor pe, me, ve, mqe, mse, vqe, vse;
    expect(m_in, v_in, pe, me, ve);
    quantize(me, mqe, mse);
    quantize(ve, vqe, vse);
    REQUIRE(bit_equal(p, pe));
    REQUIRE(bit_equal(mq, mqe));
    REQUIRE(bit_equal(vq, vqe));
    REQUIRE(bit_equal(ms, mse));
    REQUIRE(bit_equal(vs, vse));
    // 3 mantissa bits: within half the top binade's ulp (16 of 448) of the absmax.
    CHECK((dequantize(mq, ms) - me).abs().max().item<float>() <= me.abs().max().item<float>() / 28.0f);
  }
}

// ---- fused gradient handling -----------------------------------------------------------------------------------------

TEST_CASE("unscale_and_check: one pass detects non-finite grads and sums the unscaled squares", "[optim][unscale]") {
  torch::manual_seed(71);
  std::vector<torch::Tensor> g32, gbf;
  for (int64_t n : kSizes) g32.push_back(torch::randn({n}) * 1024.0), gbf.push_back(g32.back().to(torch::kBFloat16));
  const float inv = 1.0f / 1024.0f;
  double expect = 0.0;
  for (const auto& g : g32) expect += (g * inv).to(torch::kDouble).pow(2).sum().item<double>();
  auto slots = [](std::vector<torch::Tensor>& v) {
    std::vector<GradSlot> s;
    for (auto& t : v) s.push_back(make_grad_slot(t));
    return s;
  };
  for (Impl impl : {Impl::Ref, Impl::Cpu}) {
    auto c32 = g32;
    for (auto& t : c32) t = t.clone();
    auto s = slots(c32);
    UnscaleResult r = impl == Impl::Ref ? ref::unscale_and_check(s, inv, false) : cpu::unscale_and_check(s, inv, false);
    REQUIRE_FALSE(r.found_inf);
    REQUIRE(r.sum_sq == Approx(expect).epsilon(1e-12));
    for (size_t i = 0; i < g32.size(); ++i) REQUIRE(bit_equal(c32[i], g32[i]));  // read-only
    r = impl == Impl::Ref ? ref::unscale_and_check(s, inv, true) : cpu::unscale_and_check(s, inv, true);
    for (size_t i = 0; i < g32.size(); ++i) REQUIRE(bit_equal(c32[i], g32[i] * inv));
    auto cbf = gbf;
    for (auto& t : cbf) t = t.clone();
    auto sb = slots(cbf);
    r = impl == Impl::Ref ? ref::unscale_and_check(sb, inv, true) : cpu::unscale_and_check(sb, inv, true);
    for (size_t i = 0; i < g32.size(); ++i) REQUIRE(bit_equal(cbf[i], (gbf[i].to(torch::kFloat) * inv).to(torch::kBFloat16)));
    for (float bad : {INFINITY, -INFINITY, NAN}) {
      auto c = g32;
      for (auto& t : c) t = t.clone();
      c[3].data_ptr<float>()[65000] = bad;
      auto sc = slots(c);
      r = impl == Impl::Ref ? ref::unscale_and_check(sc, inv, false) : cpu::unscale_and_check(sc, inv, false);
      REQUIRE(r.found_inf);
    }
  }
}

TEST_CASE("the step's grad_scale, found_inf and noop_flag", "[optim][unscale]") {
  torch::manual_seed(81);
  std::vector<torch::Tensor> init;
  for (int64_t n : kSizes) init.push_back(torch::randn({n}));
  for (const Mode& md : {modes()[0], modes()[2]}) {
    DYNAMIC_SECTION(md.name) {
      ModeRun fused(md, init), unscaled(md, init);
      const float loss_scale = 65536.0f;
      for (int s = 1; s <= 5; ++s) {
        auto g = random_grads();
        std::vector<torch::Tensor> scaled;
        for (auto& t : g) scaled.push_back(t * loss_scale);
        int32_t found = 0;
        StepControl ctl;
        ctl.grad_scale = 1.0f / loss_scale;
        ctl.found_inf = &found;
        step(Impl::Cpu, Opt::AdamW, fused.slots(scaled, 2), s, ctl);  // unscale fused into the load
        REQUIRE(found == 0);
        std::vector<torch::Tensor> pre;
        for (auto& t : scaled) pre.push_back(t * (1.0f / loss_scale));
        step(Impl::Cpu, Opt::AdamW, unscaled.slots(pre, 2), s);
        auto a = fused.buffers(), b = unscaled.buffers();
        for (size_t i = 0; i < a.size(); ++i) REQUIRE(bit_equal(a[i], b[i]));
      }
      // A skipped step changes nothing; an inf is reported.
      auto before = fused.buffers();
      std::vector<torch::Tensor> saved;
      for (auto& t : before) saved.push_back(t.clone());
      auto g = random_grads();
      g[2].data_ptr<float>()[10] = INFINITY;
      int32_t noop = 1, found = 0;
      StepControl ctl;
      ctl.noop_flag = &noop;
      ctl.found_inf = &found;
      step(Impl::Cpu, Opt::AdamW, fused.slots(g, 2), 6, ctl);
      auto after = fused.buffers();
      for (size_t i = 0; i < saved.size(); ++i) REQUIRE(bit_equal(saved[i], after[i]));
      noop = 0;
      step(Impl::Cpu, Opt::AdamW, fused.slots(g, 2), 6, ctl);
      REQUIRE(found == 1);
    }
  }
}

TEST_CASE("bad slots are refused", "[optim][slots]") {
  float p[4] = {}, g[4] = {};
  TensorSlot s;
  s.numel = 4, s.param = p, s.grad = g;
  std::vector<GroupHyper> gh(1);
  REQUIRE_THROWS_WITH(cpu::adam_step(std::span(&s, 1), gh, {}), Catch::Contains("exp_avg buffer is required"));
  s.group = 3;
  REQUIRE_THROWS_WITH(cpu::sgd_step(std::span(&s, 1), gh, {0.0}), Catch::Contains("group 3 out of range"));
  s.group = 0;
  uint16_t r[4];
  s.remainder = r;
  REQUIRE_THROWS_WITH(cpu::sgd_step(std::span(&s, 1), gh, {0.0}), Catch::Contains("no master copy or remainder"));
  s.remainder = nullptr;
  s.param_dtype = DType::E4M3;
  REQUIRE_THROWS_WITH(cpu::sgd_step(std::span(&s, 1), gh, {0.0}), Catch::Contains("fp8 is an optimizer state's dtype"));
  s.param_dtype = DType::F32;
  uint8_t m[4] = {};
  s.exp_avg = m, s.exp_avg_dtype = DType::E4M3;
  REQUIRE_THROWS_WITH(cpu::sgd_step(std::span(&s, 1), gh, {0.9}), Catch::Contains("fp8 exp_avg needs a scale"));
}

// ---- GPU -----------------------------------------------------------------------------------------------------------

// A ModeRun mirrored on the device.
struct DeviceRun {
  ModeRun host;
  std::vector<std::vector<gpu::DeviceBuffer>> bufs;  // per tensor: the buffers of TensorState, in order
  std::vector<gpu::DeviceBuffer> grads;
  DeviceRun(const Mode& md, const std::vector<torch::Tensor>& init) : host(md, init) {
    for (const auto& t : host.ts) {
      std::vector<gpu::DeviceBuffer> b;
      for (const auto& x : {t.param, t.master, t.master_scale, t.remainder, t.exp_avg, t.exp_avg_scale, t.exp_avg_sq,
                            t.exp_avg_sq_scale})
        b.push_back(x.defined() ? test::to_device(x) : gpu::DeviceBuffer());
      bufs.push_back(std::move(b));
    }
  }
  std::vector<TensorSlot> slots(const std::vector<torch::Tensor>& g32, int states) {
    auto hs = host.slots(g32, states);
    grads.clear();
    for (size_t i = 0; i < hs.size(); ++i) {
      grads.push_back(test::to_device(host.grads[i]));
      auto& b = bufs[i];
      TensorSlot s = hs[i];
      s.param = b[0].get();
      s.grad = grads.back().get();
      s.master = s.master ? b[1].get() : nullptr;
      s.master_scale = s.master_scale ? b[2].as<float>() : nullptr;
      s.remainder = s.remainder ? b[3].as<uint16_t>() : nullptr;
      s.exp_avg = s.exp_avg ? b[4].get() : nullptr;
      s.exp_avg_scale = s.exp_avg_scale ? b[5].as<float>() : nullptr;
      s.exp_avg_sq = s.exp_avg_sq ? b[6].get() : nullptr;
      s.exp_avg_sq_scale = s.exp_avg_sq_scale ? b[7].as<float>() : nullptr;
      hs[i] = s;
    }
    return hs;
  }
  std::vector<torch::Tensor> buffers() const {
    std::vector<torch::Tensor> out;
    for (size_t i = 0; i < host.ts.size(); ++i) {
      const auto& t = host.ts[i];
      const torch::Tensor xs[] = {t.param, t.master, t.master_scale, t.remainder, t.exp_avg, t.exp_avg_scale,
                                  t.exp_avg_sq, t.exp_avg_sq_scale};
      for (size_t k = 0; k < 8; ++k)
        if (xs[k].defined()) out.push_back(test::from_device(bufs[i][k], xs[k]));
    }
    return out;
  }
};

TEST_CASE("CUDA kernels equal the reference bit for bit in every precision mode", "[optim][gpu]") {
  MR_REQUIRE_GPU_OR_SKIP();
  for (Opt opt : kOpts) {
    for (const Mode& md : modes()) {
      DYNAMIC_SECTION(opt_name(opt) << ", " << md.name) {
        torch::manual_seed(91);
        std::vector<torch::Tensor> init;
        for (int64_t n : kSizes) init.push_back(torch::randn({n}));
        ModeRun r(md, init);
        DeviceRun d(md, init);
        for (int s = 1; s <= 8; ++s) {
          auto g = random_grads(s % 3 == 0 ? 100.0 : 1.0);
          step(Impl::Ref, opt, r.slots(g, opt_states(opt)), s);
          step(Impl::Gpu, opt, d.slots(g, opt_states(opt)), s);
        }
        gpu::synchronize();
        auto br = r.buffers(), bd = d.buffers();
        REQUIRE(br.size() == bd.size());
        for (size_t i = 0; i < br.size(); ++i) REQUIRE(bit_equal(br[i], bd[i]));
      }
    }
  }
}

TEST_CASE("CUDA unscale_and_check, found_inf and noop_flag", "[optim][gpu]") {
  MR_REQUIRE_GPU_OR_SKIP();
  torch::manual_seed(101);
  std::vector<torch::Tensor> g;
  for (int64_t n : kSizes) g.push_back(torch::randn({n}) * 512.0);
  std::vector<gpu::DeviceBuffer> dg;
  std::vector<GradSlot> s;
  for (auto& t : g) {
    dg.push_back(test::to_device(t));
    s.push_back(GradSlot{t.numel(), dg.back().get(), DType::F32});
  }
  auto host = g;
  for (auto& t : host) t = t.clone();
  std::vector<GradSlot> hs;
  for (auto& t : host) hs.push_back(make_grad_slot(t));
  UnscaleResult rr = ref::unscale_and_check(hs, 1.0f / 512.0f, true);
  UnscaleResult rg = gpu::unscale_and_check(s, 1.0f / 512.0f, true);
  REQUIRE_FALSE(rg.found_inf);
  REQUIRE(rg.sum_sq == Approx(rr.sum_sq).epsilon(1e-12));
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(bit_equal(test::from_device(dg[i], g[i]), host[i]));
  float inf = INFINITY;
  dg[3].upload(&inf, 4, 4 * 100);
  REQUIRE(gpu::unscale_and_check(s, 1.0f, false).found_inf);
  // Device-side flags on a step; a skipped step leaves fp16 states' scales alone too (the last mode).
  for (const size_t mode : {size_t{2}, modes().size() - 1}) {
    CAPTURE(modes()[mode].name);
    std::vector<torch::Tensor> init;
    for (int64_t n : kSizes) init.push_back(torch::randn({n}));
    DeviceRun d(modes()[mode], init);
    auto before = d.buffers();
    gpu::DeviceBuffer flags(8);
    int32_t host_flags[2] = {1, 0};  // noop, found_inf
    flags.upload(host_flags, 8);
    auto grads = random_grads();
    grads[1].data_ptr<float>()[1] = NAN;
    StepControl ctl;
    ctl.noop_flag = flags.as<int32_t>();
    ctl.found_inf = flags.as<int32_t>() + 1;
    step(Impl::Gpu, Opt::AdamW, d.slots(grads, 2), 1, ctl);
    auto after = d.buffers();
    for (size_t i = 0; i < before.size(); ++i) REQUIRE(bit_equal(before[i], after[i]));
    host_flags[0] = 0;
    flags.upload(host_flags, 8);
    step(Impl::Gpu, Opt::AdamW, d.slots(grads, 2), 1, ctl);
    flags.download(host_flags, 8);
    REQUIRE(host_flags[1] == 1);
  }
}

}  // namespace

TEST_CASE("the CPU kernels' thread count", "[optim][threads]") {
  // OMP_NUM_THREADS's first entry when it is a positive integer, else every processor.
  CHECK(cpu::threads_from(nullptr, 6) == 6);
  CHECK(cpu::threads_from("4", 6) == 4);
  CHECK(cpu::threads_from("4,2", 6) == 4);
  CHECK(cpu::threads_from("12", 6) == 12);  // oversubscription is the user's call
  for (const char* bad : {"", "0", "-2", "four", "4x", " "}) CHECK(cpu::threads_from(bad, 6) == 6);
  CHECK(cpu::threads_from(nullptr, 0) == 1);
  CHECK(cpu::default_threads() == cpu::threads_from(std::getenv("OMP_NUM_THREADS"), omp_get_num_procs()));

  // LibTorch lowers OpenMP's ambient default when it initialises (to 1 on some virtual machines); the kernels'
  // count does not follow it.
  (void)torch::randn({4}).sum().item<float>();
  const int ambient = omp_get_max_threads();
  omp_set_num_threads(1);
  CHECK(cpu::threads() == cpu::default_threads());
  cpu::set_threads(3);
  CHECK(cpu::threads() == 3);
  cpu::set_threads(-1);
  CHECK(cpu::threads() == cpu::default_threads());
  omp_set_num_threads(ambient);
}
