// Helpers shared by the optimizer tests.
#pragma once

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "optim/gpu.h"
#include "optim/local_group.h"
#include "optim/muon.h"

// LibTorch brings glog, whose CHECK (abort on failure) replaces Catch's; restore Catch's.
#undef CHECK
#define CHECK(...) INTERNAL_CATCH_TEST("CHECK", Catch::ResultDisposition::ContinueOnFailure, __VA_ARGS__)

namespace mr::optim::test {

// Agreement of two fp32 tensors: how many elements are bit-equal, and the largest relative difference
// |a - b| / max(|a|, |b|, floor).
struct Agreement {
  int64_t n = 0, bit_equal = 0;
  double max_rel = 0.0;
};
inline Agreement agreement(const torch::Tensor& a_, const torch::Tensor& b_, double floor = 1e-3) {
  auto a = a_.to(torch::kFloat).contiguous(), b = b_.to(torch::kFloat).contiguous();
  Agreement r;
  r.n = a.numel();
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  for (int64_t i = 0; i < r.n; ++i) {
    if (std::memcmp(pa + i, pb + i, 4) == 0 || (std::isnan(pa[i]) && std::isnan(pb[i]))) {
      ++r.bit_equal;
      continue;
    }
    double d = std::fabs(double(pa[i]) - double(pb[i]));
    double s = std::max({std::fabs(double(pa[i])), std::fabs(double(pb[i])), floor});
    r.max_rel = std::max(r.max_rel, std::isnan(d) ? INFINITY : d / s);
  }
  return r;
}
// Bit for bit, except that two NaNs are equal whatever their bits: a NaN's payload is not portable (x86 keeps an
// operand's, a GPU's arithmetic returns the canonical 0x7fffffff), so a GPU result compared with a CPU one may
// differ there and nowhere else.
inline bool bit_equal(const torch::Tensor& a_, const torch::Tensor& b_) {
  if (a_.numel() != b_.numel() || a_.element_size() != b_.element_size()) return false;
  torch::Tensor a = a_.contiguous(), b = b_.contiguous();
  const size_t bytes = size_t(a.numel()) * a.element_size();
  if (std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0) return true;
  if (!a.is_floating_point() || !b.is_floating_point() || a.scalar_type() != b.scalar_type()) return false;
  const torch::Tensor both = a.isnan() & b.isnan();
  if (!both.any().item<bool>()) return false;
  a = a.masked_fill(both, 0).contiguous(), b = b.masked_fill(both, 0).contiguous();
  return std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0;
}

// GPU tests run only where a CUDA device is present; elsewhere they say so and pass.
inline bool gpu_available() { return gpu::device_count() > 0; }

// Whether this LibTorch's vectorized fp32 sqrt is correctly rounded. Debian's LibTorch 1.13 (CI) is; PyTorch
// 2.15's on an AVX-512 CPU is not (about one element in 500 comes out one ulp low), and our kernels, which use
// IEEE sqrt, then cannot be bit-equal to it: comparisons with LibTorch's optimizers and with the LibTorch
// transcription of Newton-Schulz (whose normalisation takes a square root that the iteration amplifies) widen
// their bounds, saying so.
inline bool torch_sqrt_exact() {
  static const bool exact = [] {
    torch::manual_seed(99);
    auto x = torch::rand({1 << 16}) * 100.0f;
    auto s = x.sqrt();
    const float* a = x.data_ptr<float>();
    const float* r = s.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (r[i] != std::sqrt(a[i])) return false;
    return true;
  }();
  return exact;
}
#define MR_REQUIRE_GPU_OR_SKIP()                                                              \
  do {                                                                                        \
    if (!::mr::optim::test::gpu_available()) {                                                \
      WARN("skipping GPU test: " << ::mr::optim::gpu::describe());                            \
      return;                                                                                 \
    }                                                                                         \
  } while (0)

// A host tensor's bytes on the device, and back.
inline gpu::DeviceBuffer to_device(const torch::Tensor& t) {
  auto c = t.contiguous();
  gpu::DeviceBuffer b(size_t(c.numel()) * c.element_size());
  b.upload(c.data_ptr(), b.bytes());
  return b;
}
inline torch::Tensor from_device(const gpu::DeviceBuffer& b, const torch::Tensor& like) {
  auto t = torch::empty_like(like).contiguous();
  b.download(t.data_ptr(), size_t(t.numel()) * t.element_size());
  return t;
}

// Tensor parallelism with ranks as threads (LocalTpHub, optim/local_group.h).
// Runs f(rank, group) on `world` threads.
inline void on_ranks(int world, const std::function<void(int, TpGroup&)>& f) {
  LocalTpHub hub(world);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto g = hub.group(r);
        f(r, *g);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// A named set of Muon options for a table of step cases (QKV: the parameter is a fused QKV weight).
struct MuonCase {
  const char* name;
  MuonOptions o;
  bool qkv = false;
};

}  // namespace mr::optim::test
