// Optimizer kernel benchmarks (docs/optim.md): each figure beside a baseline measured in the same run.
//   cpu.adamw.fp32          AdamW step vs a data-movement-only kernel over the same arrays; ratio = its time / ours
//   cpu.adamw.bf16_states   AdamW with bf16 moments (precision-aware) vs fp32 moments; ratio = fp32 time / ours
//   cpu.adamw.fp8_states    AdamW with fp8 (e4m3) moments and their scales vs fp32 moments; ratio as above
//   cpu.adamw.vs_torch      AdamW step vs torch::optim::AdamW; ratio = speed-up
//   cpu.sgd.fp32            SGD (momentum) step vs a data-movement-only kernel over its arrays; ratio as above
//   cpu.lion.fp32           Lion step (sign update, decoupled weight decay) vs the same; ratio as above
//   cpu.muon.ns5_1024x4096  NS5 (quintic, fp32) vs the same GEMMs through LibTorch/OpenBLAS; ratio = FLOP/s fraction
//   cpu.muon.layer_sharded_tp2  a layer-sharded TP=2 Muon step vs a duplicated one; ratio = duplicated / ours
//   cpu.soap.step_1024x256  a SOAP step (KL-Shampoo, orthogonal iteration) vs the same step in LibTorch ops;
//                           ratio = LibTorch's time / ours
//   gpu.adamw.bf16_master   bf16 params + fp32 master AdamW vs cudaMemcpy D2D; ratio = bandwidth fraction
//   gpu.muon.ns5_bf16       NS5 in bf16 vs cuBLAS GEMMs of the same shapes; ratio = FLOP/s fraction
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "bench.h"
#include "optim/config.h"
#include "optim/gpu.h"
#include "optim/kernels.h"
#include "optim/local_group.h"
#include "optim/muon.h"
#include "optim/optimizer_table.h"
#include "optim/soap.h"

namespace mr::bench {
namespace {

using namespace mr::optim;

// A model-like list of tensor sizes adding up to `total` elements: big matrices, odd-sized vectors.
std::vector<int64_t> tensor_sizes(int64_t total) {
  const int64_t pattern[] = {16 * 1024 * 1024, 4 * 1024 * 1024 + 3, 1024 * 1024 + 1, 65537, 4099, 1};
  std::vector<int64_t> s;
  int64_t left = total;
  for (size_t i = 0; left > 0; i = (i + 1) % std::size(pattern)) {
    int64_t n = std::min(pattern[i], left);
    s.push_back(n);
    left -= n;
  }
  return s;
}

int64_t cpu_params(const Options& o) { return o.quick ? int64_t{32} << 20 : int64_t{256} << 20; }

// fp32 params, grads and the optimizer's state buffers as the optimizer table lays them out.
struct Fp32State {
  std::vector<torch::Tensor> p, g, m, v;
  std::vector<TensorSlot> slots;
  Fp32State(int64_t total, mr::arg::Optimizer opt) {
    const StateLayout& state = optimizer_info(opt).state;
    const bool second_moment = state.exp_avg_sq;
    for (int64_t n : tensor_sizes(total)) {
      p.push_back(torch::randn({n}));
      g.push_back(torch::randn({n}));
      m.push_back(torch::zeros({n}));
      v.push_back(second_moment ? torch::zeros({n}) : torch::Tensor());
      TensorSlot s;
      s.numel = n;
      s.param = p.back().data_ptr<float>();
      s.grad = g.back().data_ptr<float>();
      s.exp_avg = m.back().data_ptr<float>();
      s.exp_avg_sq = second_moment ? v.back().data_ptr<float>() : nullptr;
      slots.push_back(s);
    }
  }
};

// Best (minimum) seconds of `ours` and of `base` over `reps` alternating runs after one warm-up of each:
// alternating keeps a busy machine's slow phases from landing on one side only.
std::pair<double, double> best_alternating(int reps, const std::function<void()>& ours,
                                           const std::function<void()>& base) {
  auto time = [](const std::function<void()>& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  ours();
  base();
  double a = 1e300, b = 1e300;
  for (int i = 0; i < reps; ++i) {
    a = std::min(a, time(ours));
    b = std::min(b, time(base));
  }
  return {a, b};
}

// A rate: `work` (flops, bytes) per second scaled by `scale`, ours against the baseline's; ratio = base / t.
Result throughput(double work, double t, double base, double scale, const char* unit, const char* baseline) {
  Result r;
  r.value = work / t * scale;
  r.unit = unit;
  r.baseline = baseline;
  r.baseline_value = work / base * scale;
  r.ratio = base / t;
  return r;
}

Result versus(double t, double base, const char* baseline, double ratio) {
  Result r;
  r.value = t * 1e3;
  r.unit = "ms";
  r.baseline = baseline;
  r.baseline_value = base * 1e3;
  r.ratio = ratio;
  return r;
}

MR_BENCHMARK("cpu.adamw.fp32", [](const Options& o) {
  Fp32State s(cpu_params(o), mr::arg::Optimizer::adam);
  std::vector<GroupHyper> gh = {{1e-4, 0.1, 1}};
  AdamOptions ao = adam_options(megatron_optimizer_defaults());
  auto [t, base] = best_alternating(
      o.quick ? 5 : 7,
      [&] {
        cpu::adam_step(s.slots, gh, ao);
        ++gh[0].step;
      },
      [&] { cpu::data_movement(s.slots); });
  return with_target(versus(t, base, "data movement (same arrays)", base / t), ratio_at_least(0.9));
});

// The precision-aware optimizer's AdamW: the same step with both moments stored as `d` against fp32 moments over the
// same params and grads; ratio = fp32 moments' time / ours. `storage`: the torch dtype of d's bytes.
Result low_precision_moments(const Options& o, DType d, torch::ScalarType storage) {
  Fp32State f(cpu_params(o), mr::arg::Optimizer::adam);
  std::vector<torch::Tensor> m, v;
  std::vector<float> scales(2 * f.slots.size(), 0.0f);  // fp16 and fp8 states carry one each (state_scale)
  std::vector<TensorSlot> slots = f.slots;
  for (size_t i = 0; i < slots.size(); ++i) {
    TensorSlot& s = slots[i];
    m.push_back(torch::zeros({s.numel}, storage));
    v.push_back(torch::zeros({s.numel}, storage));
    s.exp_avg = m.back().data_ptr(), s.exp_avg_dtype = d;
    s.exp_avg_sq = v.back().data_ptr(), s.exp_avg_sq_dtype = d;
    if (scaled_state(d)) s.exp_avg_scale = &scales[2 * i], s.exp_avg_sq_scale = &scales[2 * i + 1];
  }
  std::vector<GroupHyper> ours = {{1e-4, 0.1, 1}}, base = ours;
  AdamOptions ao = adam_options(megatron_optimizer_defaults());
  auto [t, b] = best_alternating(
      o.quick ? 5 : 7,
      [&] {
        cpu::adam_step(slots, ours, ao);
        ++ours[0].step;
      },
      [&] {
        cpu::adam_step(f.slots, base, ao);
        ++base[0].step;
      });
  return versus(t, b, "AdamW with fp32 moments (same params and grads)", b / t);
}

// bf16 moments: 2 bytes each, rounded after the fp32 update (fewer bytes to move, one pass).
MR_BENCHMARK("cpu.adamw.bf16_states", [](const Options& o) { return low_precision_moments(o, DType::BF16, torch::kBFloat16); });
// fp8 (e4m3) moments with per-parameter scales, as Transformer Engine keeps them: a step reads the new absmax first
// (a read-only pass), then updates.
MR_BENCHMARK("cpu.adamw.fp8_states", [](const Options& o) { return low_precision_moments(o, DType::E4M3, torch::kByte); });

MR_BENCHMARK("cpu.adamw.vs_torch", [](const Options& o) {
  Fp32State s(cpu_params(o), mr::arg::Optimizer::adam);
  std::vector<torch::Tensor> tp;
  for (size_t i = 0; i < s.p.size(); ++i) {
    tp.push_back(s.p[i].clone().requires_grad_(true));
    tp.back().mutable_grad() = s.g[i].clone();
  }
  // LibTorch's elementwise ops get the same thread count as our kernels (it lowers its own default to its count
  // of physical cores, 1 on some virtual machines).
  const int torch_threads = torch::get_num_threads();
  torch::set_num_threads(cpu::threads());
  torch::optim::AdamW opt(tp, torch::optim::AdamWOptions(1e-4).weight_decay(0.1));
  std::vector<GroupHyper> gh = {{1e-4, 0.1, 1}};
  AdamOptions ao = adam_options(megatron_optimizer_defaults());
  auto [t, base] = best_alternating(
      o.quick ? 2 : 3,
      [&] {
        cpu::adam_step(s.slots, gh, ao);
        ++gh[0].step;
      },
      [&] { opt.step(); });
  torch::set_num_threads(torch_threads);
  return with_target(versus(t, base, "torch::optim::AdamW, same threads", base / t), ratio_at_least(5));
});

MR_BENCHMARK("cpu.sgd.fp32", [](const Options& o) {
  Fp32State s(cpu_params(o), mr::arg::Optimizer::sgd);
  // Baseline: the same chunked, threaded pass over SGD's arrays (param, grad, momentum in; param, momentum out).
  std::vector<GroupHyper> gh = {{1e-2, 1e-4, 2}};
  SgdOptions so = sgd_options(megatron_optimizer_defaults());
  auto [t, base] = best_alternating(
      o.quick ? 5 : 7, [&] { cpu::sgd_step(s.slots, gh, so); }, [&] { cpu::data_movement(s.slots); });
  return versus(t, base, "data movement (same arrays)", base / t);
});

MR_BENCHMARK("cpu.lion.fp32", [](const Options& o) {
  Fp32State s(cpu_params(o), mr::arg::Optimizer::lion);
  // Baseline: the same chunked, threaded pass over Lion's arrays (param, grad, momentum in; param, momentum out).
  std::vector<GroupHyper> gh = {{1e-4, 0.1, 2}};
  LionOptions lo = lion_options(megatron_optimizer_defaults());
  auto [t, base] = best_alternating(
      o.quick ? 5 : 7, [&] { cpu::lion_step(s.slots, gh, lo); }, [&] { cpu::data_movement(s.slots); });
  return versus(t, base, "data movement (same arrays)", base / t);
});

MR_BENCHMARK("cpu.muon.ns5_1024x4096", [](const Options& o) {
  const int64_t m = 1024, n = 4096;
  torch::manual_seed(0);
  auto x = torch::randn({m, n}), out = torch::empty_like(x);
  NsOptions ns;
  ns.coefficients = NsCoefficients::Quintic;
  ns.steps = 5;
  ns.precision = MatmulPrecision::High;  // fp32 GEMMs on the CPU
  // Baseline: the GEMMs of five NS steps, as plain LibTorch calls: A = X X^T, B = A A, Y = B X.
  auto a = torch::empty({m, m}), b = torch::empty({m, m}), y = torch::empty({m, n});
  auto xt = x.t();
  auto [t, base] = best_alternating(
      o.quick ? 2 : 4, [&] { cpu::newton_schulz(x.data_ptr<float>(), out.data_ptr<float>(), m, n, ns); },
      [&] {
        for (int s = 0; s < 5; ++s) {
          torch::mm_out(a, x, xt);
          torch::mm_out(b, a, a);
          torch::mm_out(y, b, x);
        }
      });
  const double flops = 5.0 * (2.0 * m * m * n + 2.0 * m * m * m + 2.0 * m * m * n);
  return with_target(throughput(flops, t, base, 1e-9, "GFLOP/s", "LibTorch GEMMs, same shapes"), ratio_at_least(0.8));
});

// A SOAP step after the first (KL-Shampoo factors, one round of orthogonal iteration with QR, the inner Adam, the
// projections) on a 1024 x 256 matrix (the default job's MLP weight), against the same step written with LibTorch
// ops on LibTorch's own LAPACK and BLAS, as Emerging-Optimizers writes it (same thread count). Both start from the
// state one eigh step leaves. Ratio = LibTorch's time / ours.
MR_BENCHMARK("cpu.soap.step_1024x256", [](const Options& o) {
  const int64_t m = 1024, n = 256;
  torch::manual_seed(0);
  const SoapOptions so = soap_options(megatron_optimizer_defaults());
  auto p = torch::randn({m, n}), g = torch::randn({m, n});
  auto ea = torch::zeros({m, n}), eas = torch::zeros({m, n});
  auto kron = torch::zeros({kronecker_floats(m, n)});
  SoapParam sp{p.data_ptr<float>(), g.data_ptr<float>(), ea.data_ptr<float>(), eas.data_ptr<float>(),
               kron.data_ptr<float>(), m, n, 0, nullptr};
  std::vector<GroupHyper> gh = {{1e-4, 0.1, 1}};
  cpu::soap_step({&sp, 1}, gh, so);  // step 1: eigh
  gh[0].step = 2;
  // LibTorch's copy of the state after step 1.
  float* k = kron.data_ptr<float>();
  auto view = [&](int64_t off, std::vector<int64_t> shape) { return torch::from_blob(k + off, shape).clone(); };
  auto L = view(0, {m, m}), R = view(m * m, {n, n}), QL = view(m * m + n * n, {m, m}),
       QR = view(2 * m * m + n * n, {n, n}), eL = view(2 * (m * m + n * n), {m}), eR = view(2 * (m * m + n * n) + m, {n});
  auto tp = p.clone(), tea = ea.clone(), teas = eas.clone();
  const double eps = so.eps, lr = 1e-4, wd = 0.1;
  auto ortho = [](const torch::Tensor& f, torch::Tensor& q, torch::Tensor& e) {
    q = std::get<0>(torch::linalg_qr(torch::mm(f, q)));
    auto d = (torch::mm(q.t(), f) * q.t()).sum(-1);
    auto idx = torch::argsort(d, -1, true);
    e = d.index_select(0, idx);
    q = q.index_select(1, idx);
  };
  const int torch_threads = torch::get_num_threads();
  torch::set_num_threads(cpu::threads());
  auto [t, base] = best_alternating(
      o.quick ? 2 : 4, [&] { cpu::soap_step({&sp, 1}, gh, so); },
      [&] {
        const double b = so.shampoo_beta, w = (1 - b) / (1 - b * b);  // step 2's corrected weight
        auto corr_l = torch::mm(QL * (1.0 / double(m) * eL.clamp_min(eps).pow(-1.0)).unsqueeze(0), QL.t());
        auto corr_r = torch::mm(QR * (1.0 / double(n) * eR.clamp_min(eps).pow(-1.0)).unsqueeze(0), QR.t());
        R.lerp_(torch::mm(torch::mm(g.t(), corr_l), g), w);
        L.lerp_(torch::mm(torch::mm(g, corr_r), g.t()), w);
        auto out = torch::mm(torch::mm(QL, tea), QR.t());
        ortho(L, QL, eL);
        ortho(R, QR, eR);
        tea = torch::mm(torch::mm(QL.t(), out), QR);
        tp.add_(tp, -wd * lr);
        auto gp = torch::mm(torch::mm(QL.t(), g), QR);
        tea.lerp_(gp, 1 - so.beta1);
        teas.lerp_(gp.square(), 1 - so.beta2);
        auto u = (tea / (1 - so.beta1 * so.beta1)) / ((teas / (1 - so.beta2 * so.beta2)).sqrt() + eps);
        tp.add_(torch::mm(torch::mm(QL, u), QR.t()), -lr);
      });
  torch::set_num_threads(torch_threads);
  return with_target(versus(t, base, "the step in LibTorch ops, same threads", base / t), ratio_at_least(1));
});

// Layer-sharded Muon against duplicated over a TP group of 2 (threads, each with half the OpenMP threads): 8
// column-split 512 x 1024 matrices, one step. Duplicated runs every matrix's NS on both ranks; layer-sharded once,
// on its home (the shards gathered there, the result's scattered back). Ratio = duplicated time / layer-sharded time.
MR_BENCHMARK("cpu.muon.layer_sharded_tp2", [](const Options& o) {
  constexpr int kWorld = 2, kMats = 8;
  const int64_t rows = 512, cols = 1024 / kWorld;
  torch::manual_seed(0);
  std::vector<std::vector<torch::Tensor>> p(kWorld), g(kWorld), m(kWorld);
  for (int r = 0; r < kWorld; ++r)
    for (int i = 0; i < kMats; ++i) {
      p[size_t(r)].push_back(torch::randn({rows, cols}) * 0.02);
      g[size_t(r)].push_back(torch::randn({rows, cols}));
      m[size_t(r)].push_back(torch::zeros({rows, cols}));
    }
  const int threads = cpu::threads();
  auto step = [&](MuonTpMode mode) {
    MuonOptions mo = muon_options(megatron_optimizer_defaults());
    mo.tp_mode = mode;
    mo.split_qkv = false;
    const std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
    LocalTpHub hub(kWorld);
    cpu::set_threads(std::max(1, threads / kWorld));  // the ranks share this machine's cores
    std::vector<std::thread> ts;
    for (int r = 0; r < kWorld; ++r)
      ts.emplace_back([&, r] {
        auto tp = hub.group(r);
        std::vector<MuonParam> mp(kMats);
        for (int i = 0; i < kMats; ++i) {
          MuonParam& q = mp[size_t(i)];
          q.param = p[size_t(r)][size_t(i)].data_ptr<float>();
          q.grad = g[size_t(r)][size_t(i)].data_ptr<float>();
          q.momentum_buffer = m[size_t(r)][size_t(i)].data_ptr<float>();
          q.rows = rows, q.cols = cols, q.partition_dim = 1;
        }
        cpu::muon_step(mp, gh, mo, tp.get());
      });
    for (auto& t : ts) t.join();
    cpu::set_threads(threads);
  };
  auto [t, base] = best_alternating(o.quick ? 2 : 4, [&] { step(MuonTpMode::LayerSharded); },
                                    [&] { step(MuonTpMode::Duplicated); });
  return with_target(versus(t, base, "duplicated mode, same matrices and TP group", base / t), ratio_above(1));
});

void require_gpu() {
  if (gpu::device_count() == 0) throw Skipped(gpu::describe());  // "no GPU (why)"
}

MR_BENCHMARK("gpu.adamw.bf16_master", [](const Options& o) {
  require_gpu();
  const int64_t total = o.quick ? int64_t{64} << 20 : int64_t{512} << 20;
  // bf16 params, fp32 master, fp32 main grads, fp32 moments: 30 bytes moved per element.
  std::vector<gpu::DeviceBuffer> bufs;
  std::vector<TensorSlot> slots;
  for (int64_t n : tensor_sizes(total)) {
    TensorSlot s;
    s.numel = n;
    bufs.emplace_back(size_t(n) * 2), s.param = bufs.back().get(), s.param_dtype = DType::BF16;
    bufs.emplace_back(size_t(n) * 4), s.grad = bufs.back().get();
    bufs.emplace_back(size_t(n) * 4), s.master = bufs.back().get();
    bufs.emplace_back(size_t(n) * 4), s.exp_avg = bufs.back().get();
    bufs.emplace_back(size_t(n) * 4), s.exp_avg_sq = bufs.back().get();
    for (size_t k = bufs.size() - 5; k < bufs.size(); ++k) bufs[k].fill_zero();
    slots.push_back(s);
  }
  std::vector<GroupHyper> gh = {{1e-4, 0.1, 1}};
  AdamOptions ao = adam_options(megatron_optimizer_defaults());
  const double bytes = 30.0 * double(total);
  // Steps back to back, as in training: a step's host part (its work list, the metadata upload, which is
  // asynchronous) overlaps the previous step's kernel, so the time per step is the device's.
  constexpr int kSteps = 5;
  double t = gpu::time_best(10, [&] {
               for (int i = 0; i < kSteps; ++i) gpu::adam_step(slots, gh, ao);
             }) / kSteps;
  gpu::DeviceBuffer src(size_t(bytes / 2)), dst(size_t(bytes / 2));
  double base = gpu::time_best(10, [&] {
                  for (int i = 0; i < kSteps; ++i) gpu::memcpy_d2d(dst.get(), src.get(), src.bytes());  // reads + writes bytes/2
                }) / kSteps;
  return with_target(throughput(bytes, t, base, 1e-9, "GB/s", "cudaMemcpy D2D"), ratio_at_least(0.9));
});

MR_BENCHMARK("gpu.muon.ns5_bf16", [](const Options& o) {
  require_gpu();
  const int64_t m = o.quick ? 2048 : 4096, n = o.quick ? 8192 : 16384;
  gpu::DeviceBuffer x(size_t(m * n) * 4), out(size_t(m * n) * 4);
  {
    torch::manual_seed(0);
    auto h = torch::randn({m, n});
    x.upload(h.data_ptr<float>(), x.bytes());
  }
  NsOptions ns;
  ns.precision = MatmulPrecision::Medium;
  double t = gpu::time_best(5, [&] { gpu::newton_schulz(x.as<float>(), out.as<float>(), m, n, ns); });
  gpu::DeviceBuffer a(size_t(m * m) * 2), b(size_t(m * m) * 2), y(size_t(m * n) * 2), xb(size_t(m * n) * 2);
  a.fill_zero(), b.fill_zero(), y.fill_zero(), xb.fill_zero();
  // Baseline: the same GEMMs (A = X X^T as X (m x n) times an n x m operand, B = A A, Y = B X) in bf16.
  double base = gpu::time_best(5, [&] {
    for (int s = 0; s < 5; ++s) {
      gpu::gemm(m, m, n, xb.get(), y.get(), a.get(), MatmulPrecision::Medium);
      gpu::gemm(m, m, m, a.get(), a.get(), b.get(), MatmulPrecision::Medium);
      gpu::gemm(m, n, m, b.get(), xb.get(), y.get(), MatmulPrecision::Medium);
    }
  });
  const double flops = 5.0 * (2.0 * m * m * n + 2.0 * m * m * m + 2.0 * m * m * n);
  return with_target(throughput(flops, t, base, 1e-12, "TFLOP/s", "cuBLAS bf16 GEMMs, same shapes"), ratio_at_least(0.75));
});

}  // namespace
}  // namespace mr::bench
