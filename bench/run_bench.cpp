// Training-run benchmarks (docs/run.md): each figure beside a baseline measured in the same run.
//   run.synthetic_grad   making one rank's synthetic gradient (run/synthetic_grad.h) vs the AdamW step over the
//                        same number of parameters; ratio = gradient time / step time (goal <= 1)
//   run.grad_round_fp16  the reduced gradient's average and rounding to an fp16 buffer (run/grad_format.h) vs the
//                        fp32 buffer's plain scale over the same elements; ratio = fp16 time / fp32 time
#include <algorithm>
#include <chrono>
#include <vector>

#include "bench.h"
#include "optim/config.h"
#include "optim/kernels.h"
#include "run/buffers.h"
#include "run/grad_round_cpu.h"
#include "run/synthetic_grad.h"

namespace mr::bench {
namespace {

MR_BENCHMARK("run.synthetic_grad", [](const Options& o) {
  // One TP-split weight matrix (the index arithmetic of a real shard), fp32.
  const int64_t cols = 4096, rows = (o.quick ? int64_t{32} << 20 : int64_t{128} << 20) / cols, n = rows * cols;
  run::ParamSpec p;
  p.name = p.key = "decoder.layers.0.mlp.linear_fc1.weight";
  p.shape = {rows, cols};
  p.full_shape = {rows * 2, cols};
  p.split_dim = 0;
  std::vector<float> model(static_cast<size_t>(n)), target(static_cast<size_t>(n)), grad(static_cast<size_t>(n)),
      m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    model[static_cast<size_t>(i)] = 0.02f * run::uniform(static_cast<uint64_t>(i));
    target[static_cast<size_t>(i)] = 0.02f * run::uniform(static_cast<uint64_t>(i) ^ 0x55ull);
  }
  const run::SampleTable samples(run::dense_samples(1234, 1, 0, 1024, 4, 8, 3));
  const int bits = run::quantize_bits(1024);
  optim::TensorSlot s;
  s.numel = n;
  s.param = model.data();
  s.grad = grad.data();
  s.exp_avg = m.data();
  s.exp_avg_sq = v.data();
  std::vector<optim::TensorSlot> slots = {s};
  std::vector<optim::GroupHyper> gh = {{1e-4, 0.1, 1}};
  optim::AdamOptions ao = optim::adam_options(bench::megatron_optimizer_defaults());
  auto time = [](auto&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto make = [&] {
    run::synthetic_grads(p, 1, 0x1234, samples, bits, false,
                         {model.data(), optim::DType::F32, target.data(), grad.data(), n});
  };
  auto step = [&] {
    optim::cpu::adam_step(slots, gh, ao);
    ++gh[0].step;
  };
  make();
  step();
  double a = 1e300, b = 1e300;
  for (int i = 0; i < (o.quick ? 4 : 7); ++i) {  // alternating: a busy machine's slow phases hit both sides
    a = std::min(a, time(make));
    b = std::min(b, time(step));
  }
  Result r;
  r.value = a * 1e3;
  r.unit = "ms";
  r.baseline = "AdamW step over the same parameters";
  r.baseline_value = b * 1e3;
  r.ratio = a / b;
  r.higher_is_better = false;  // the gradient's share of the step's time
  r.target = ratio_at_most(1);
  return r;
});

MR_BENCHMARK("run.grad_round_fp16", [](const Options& o) {
  const int64_t n = o.quick ? int64_t{16} << 20 : int64_t{64} << 20;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 0.02f * run::uniform(static_cast<uint64_t>(i));
  auto time = [&](run::GradFormat f, float factor) {
    auto t0 = std::chrono::steady_clock::now();
    run::finish_grads_cpu(x.data(), n, factor, f);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double a = 1e300, b = 1e300;
  for (int i = 0; i < (o.quick ? 4 : 7); ++i) {  // alternating; factors 2 and 1/2 keep the values in range
    a = std::min(a, time(run::GradFormat{optim::DType::F16, true}, 2.0f));
    b = std::min(b, time(run::GradFormat{}, 0.5f));
  }
  Result r;
  r.value = a * 1e3;
  r.unit = "ms";
  r.baseline = "fp32 buffer: the plain scale, same elements";
  r.baseline_value = b * 1e3;
  r.ratio = a / b;
  r.higher_is_better = false;  // reported, no target
  return r;
});

}  // namespace
}  // namespace mr::bench
