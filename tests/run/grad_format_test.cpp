// Megatron's gradient buffer dtype and the run's rounding to it (run/grad_format.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "config/args.h"
#include "config/namespace.h"
#include "optim/gpu.h"
#include "run/cuda_ops.h"
#include "run/grad_format.h"

#include "../config/validated_fills.h"

using namespace mr;
using mr::optim::DType;
using run::GradFormat;
using run::grad_element;

namespace {
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
Args args_with(std::vector<std::pair<std::string, Value>> set) {
  Namespace ns;
  for (auto& [k, v] : set) ns.set(k, v, {Provenance::Kind::Cli, "argv"});
  mrtest::fill_as_validated(ns);
  return Args::from(ns);
}
const float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("grad_element: fp32 is the scale's one rounding; bf16 and fp16 round to nearest even", "[run][grad-format]") {
  const GradFormat fp32{}, bf16{DType::BF16, false}, fp16{DType::F16, true};
  CHECK_FALSE(fp32.rounds());
  CHECK(bf16.rounds());
  const float x = 0.1f, f = 3.0f;
  CHECK(bits(grad_element(x, f, fp32)) == bits(x * f));
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7, to the even 1; 1 + 3 * 2^-8 to
  // 1 + 2^-6 (even); 1 + 2^-8 + 2^-20 above the tie, up.
  CHECK(grad_element(1.0f + 0x1p-8f, 1.0f, bf16) == 1.0f);
  CHECK(grad_element(1.0f + 3 * 0x1p-8f, 1.0f, bf16) == 1.0f + 0x1p-6f);
  CHECK(grad_element(1.0f + 0x1p-8f + 0x1p-20f, 1.0f, bf16) == 1.0f + 0x1p-7f);
  const float big = grad_element(3e38f, 1.0f, bf16);  // bf16 has fp32's range: no overflow
  CHECK(std::isfinite(big));
  CHECK(std::fabs(big - 3e38f) <= 3e38f * 0x1p-9f);
  CHECK((bits(big) & 0xffffu) == 0);
  // fp16 keeps 11 significant bits and overflows from 65520 on (65504 is the largest finite value).
  CHECK(grad_element(1.0f + 0x1p-11f, 1.0f, fp16) == 1.0f);
  CHECK(grad_element(1.0f + 0x1p-11f + 0x1p-20f, 1.0f, fp16) == 1.0f + 0x1p-10f);
  CHECK(grad_element(65519.0f, 1.0f, fp16) == 65504.0f);
  CHECK(grad_element(65520.0f, 1.0f, fp16) == kInf);
  CHECK(grad_element(-40000.0f, 2.0f, fp16) == -kInf);  // the product overflows
  CHECK(grad_element(0x1p-25f, 1.0f, fp16) == 0.0f);  // half of fp16's smallest subnormal: a tie, to even (zero)
  CHECK(grad_element(0x1.000002p-25f, 1.0f, fp16) == 0x1p-24f);  // just above the tie
  CHECK(grad_element(0x1p-24f, 1.0f, fp16) == 0x1p-24f);
  CHECK(std::isnan(grad_element(std::nanf(""), 1.0f, fp16)));
  CHECK(std::isnan(grad_element(std::nanf(""), 1.0f, bf16)));
}

TEST_CASE("grad_element: fp16's range alone (an fp32 buffer in fp16 training) keeps the fp32 bits of what fits",
          "[run][grad-format]") {
  const GradFormat range{DType::F32, true};
  CHECK(range.rounds());
  for (float x : {0.1f, -1.0f + 0x1p-20f, 65519.99f, 1e-30f, 0.0f, -0.0f})
    CHECK(bits(grad_element(x, 1.0f, range)) == bits(x));
  CHECK(grad_element(65520.0f, 1.0f, range) == kInf);
  CHECK(grad_element(-1e30f, 1.0f, range) == -kInf);
  CHECK(grad_element(kInf, 1.0f, range) == kInf);
  CHECK(std::isnan(grad_element(std::nanf(""), 1.0f, range)));
}

TEST_CASE("grad_format: fp32 training, --bf16 (fp32 unless bf16 reduction), --fp16 (fp16 unless fp32 accumulation)",
          "[run][grad-format]") {
  const Value on(true);
  auto fmt = [&](std::vector<std::pair<std::string, Value>> set) { return run::grad_format(args_with(std::move(set))); };
  auto is = [](GradFormat g, DType d, bool range) { return g.buffer == d && g.f16_range == range; };
  CHECK(is(fmt({}), DType::F32, false));
  CHECK(is(fmt({{"accumulate_allreduce_grads_in_fp32", on}}), DType::F32, false));
  // After validation --bf16 sets accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16 or bf16 main grads.
  CHECK(is(fmt({{"bf16", on}, {"accumulate_allreduce_grads_in_fp32", on}}), DType::F32, false));
  CHECK(is(fmt({{"bf16", on}}), DType::BF16, false));
  CHECK(is(fmt({{"fp16", on}}), DType::F16, true));
  CHECK(is(fmt({{"fp16", on}, {"accumulate_allreduce_grads_in_fp32", on}}), DType::F32, true));
}

TEST_CASE("the CUDA gradient rounding (cuda::finish_grads) equals grad_element bit for bit", "[run][gpu][grad-format]") {
  if (mr::optim::gpu::device_count() == 0) {
    WARN("skipping GPU test: " << mr::optim::gpu::describe());
    return;
  }
  // The edges (fp16's largest finite value and overflow, its subnormals and their ties, specials), a sweep of
  // magnitudes, an odd count (65537: a grid-stride tail).
  std::vector<float> x = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, -1e30f, kInf, -kInf, std::nanf(""),
                          0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 3 * 0x1p-25f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f};
  for (int i = 0; x.size() < 65537; ++i) x.push_back(std::ldexp(static_cast<float>(i % 2001) - 1000.0f, i % 60 - 40));
  const float factor = 0.375f;
  for (GradFormat f : {GradFormat{}, GradFormat{DType::BF16, false}, GradFormat{DType::F16, true},
                       GradFormat{DType::F32, true}}) {
    INFO("buffer " << mr::optim::dtype_name(f.buffer) << (f.f16_range ? ", fp16 range" : ""));
    mr::optim::gpu::DeviceBuffer d(x.size() * 4);
    d.upload(x.data(), x.size() * 4);
    mr::run::cuda::finish_grads(d.as<float>(), static_cast<int64_t>(x.size()), factor, f);
    std::vector<float> got(x.size());
    d.download(got.data(), got.size() * 4);
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = grad_element(x[i], factor, f);
      // A NaN's bits are not portable: x86 keeps the operand's payload (0x7fc00000 here), a GPU's arithmetic
      // returns its canonical NaN (0x7fffffff). A NaN must stay a NaN; every other value must match bit for bit.
      if (std::isnan(want)) {
        if (!std::isnan(got[i])) {
          INFO("x = " << x[i] << ", got " << got[i]);
          REQUIRE(std::isnan(got[i]));
        }
      } else if (bits(got[i]) != bits(want)) {
        INFO("x = " << x[i]);
        REQUIRE(bits(got[i]) == bits(want));
      }
    }
  }
}
