// Adaptive Muon (--optimizer adaptive_muon): the step against a LibTorch-ops transcription of Megatron's
// TensorParallelAdaptiveMuon (AdaptiveMuon.step over TensorParallelMuon.orthogonalize, moment2_method "adamuon"),
// the second scale by the shard's shape under tensor parallelism, the options from OptimizerConfig, and the CUDA
// step against the CPU.
#include <catch2/catch.hpp>
#include <thread>

#include "config/optimizer_config.h"
#include "optim/config.h"
#include "optim/local_group.h"
#include "optim/muon.h"
#include "optim/optimizer_table.h"
#include "optim/torch_adapter.h"
#include "optim_test_util.h"

using namespace mr::optim;
using mr::optim::test::bit_equal;
using mr::optim::test::on_ranks;

namespace {

// Our orthogonalisation of u (NS, QKV split, scaled by the whole matrix's shape): the transcription takes it as
// given, so what is compared below is everything else, bit for bit (NS itself: muon_test.cpp).
torch::Tensor orthogonalized(const torch::Tensor& u, const MuonOptions& o, bool is_qkv, TpGroup* tp = nullptr,
                             int partition_dim = -1) {
  MuonParam shape;
  shape.rows = u.size(0), shape.cols = u.size(1), shape.is_qkv = is_qkv, shape.partition_dim = partition_dim;
  auto x = u.contiguous(), out = torch::empty_like(x);
  cpu::muon_orthogonalize(shape, x.data_ptr<float>(), out.data_ptr<float>(), o, tp);
  return out;
}

// AdaptiveMuon.step for one parameter, in torch ops: weight decay, momentum (Nesterov), orthogonalise, the second
// moment, AdaptiveMuon's Muon scale by the tensor's own (local) shape, the step.
void ref_adaptive_step(torch::Tensor& p, const torch::Tensor& g_in, torch::Tensor& buf, torch::Tensor& moment2,
                       double lr, double wd, const MuonOptions& o, bool is_qkv) {
  auto grad = g_in.clone();
  if (wd != 0.0) {
    if (o.decoupled_weight_decay) p.add_(p, -wd * lr);
    else grad.add_(p, wd);
  }
  buf.lerp_(grad, 1 - o.momentum);
  auto u = o.nesterov ? grad.lerp(buf, o.momentum) : buf;
  auto orth = orthogonalized(u, o, is_qkv);
  moment2.lerp_(orth.square(), 1 - o.adaptive.beta2);
  auto update = orth / (moment2.sqrt() + o.adaptive.eps);
  update = update * muon_scale_factor(update.size(0), update.size(1), o.scale_mode) * o.extra_scale_factor;
  p.add_(update, -lr);
}

MuonOptions adaptive(MuonOptions o = {}) {
  o.adaptive.method = Moment2Method::AdaMuon;
  o.qkv_split_shapes = {16, 8, 8};
  return o;
}

using Case = mr::optim::test::MuonCase;

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"defaults (spectral, quintic, bf16 matmuls)", adaptive()});
  Case c{"nesterov, unit_rms_norm, extra scale 0.2, beta2 0.9, eps 1e-3", adaptive()};
  c.o.nesterov = true, c.o.scale_mode = MuonScaleMode::UnitRmsNorm, c.o.extra_scale_factor = 0.2;
  c.o.adaptive.beta2 = 0.9, c.o.adaptive.eps = 1e-3;
  v.push_back(c);
  c = {"shape_scaling, l2 weight decay, fp32 matmuls", adaptive()};
  c.o.scale_mode = MuonScaleMode::ShapeScaling, c.o.decoupled_weight_decay = false;
  c.o.ns.precision = MatmulPrecision::Highest;
  v.push_back(c);
  v.push_back({"split QKV", adaptive(), true});
  return v;
}

}  // namespace

TEST_CASE("Adaptive Muon steps match the transcription of TensorParallelAdaptiveMuon bit for bit",
          "[muon][adaptive]") {
  for (const Case& tc : cases()) {
    DYNAMIC_SECTION(tc.name) {
      torch::manual_seed(17);
      // 4 query groups of Q16/K8/V8 rows: 128 x 48.
      auto p0 = torch::randn({128, 48}) * 0.02;
      auto p = p0.clone(), buf = torch::zeros_like(p0), v = torch::zeros_like(p0);
      auto rp = p0.clone(), rbuf = torch::zeros_like(p0), rv = torch::zeros_like(p0);
      MuonParam mp = make_muon_param(p, torch::zeros_like(p), buf);
      mp.moment2_buffer = v.data_ptr<float>();
      mp.is_qkv = tc.qkv;
      const double lr = 0.02, wd = 0.1;
      std::vector<GroupHyper> gh = {{lr, wd, 1}};
      for (int s = 1; s <= 4; ++s) {
        auto g = torch::randn({128, 48});
        mp.grad = g.data_ptr<float>();
        cpu::muon_step(std::span(&mp, 1), gh, tc.o);
        ref_adaptive_step(rp, g, rbuf, rv, lr, wd, tc.o, tc.qkv);
        INFO("step " << s);
        REQUIRE(bit_equal(buf, rbuf));
        REQUIRE(bit_equal(v, rv));
        REQUIRE(bit_equal(p, rp));
      }
      // The second moment normalises: after a step every update element is about lr * s(shape) / sqrt(1 - beta2)
      // in size, where plain Muon's are spread out.
      CHECK(v.abs().max().item<double>() > 0);
    }
  }
}

TEST_CASE("Adaptive Muon differs from Muon and leaves Muon unchanged", "[muon][adaptive]") {
  torch::manual_seed(19);
  auto p0 = torch::randn({64, 96}) * 0.02, g = torch::randn({64, 96});
  std::vector<GroupHyper> gh = {{0.02, 0.0, 1}};
  MuonOptions plain;
  auto p1 = p0.clone(), m1 = torch::zeros_like(p0);
  MuonParam a = make_muon_param(p1, g, m1);
  cpu::muon_step(std::span(&a, 1), gh, plain);
  // A moment2 buffer given to plain Muon is not touched.
  auto p2 = p0.clone(), m2 = torch::zeros_like(p0), v2 = torch::zeros_like(p0);
  MuonParam b = make_muon_param(p2, g, m2);
  b.moment2_buffer = v2.data_ptr<float>();
  cpu::muon_step(std::span(&b, 1), gh, plain);
  REQUIRE(bit_equal(p1, p2));
  CHECK(v2.abs().max().item<double>() == 0);
  // Adaptive: the first step divides by sqrt((1 - beta2) orth^2), so each element moves by about
  // lr * s / sqrt(1 - beta2), s = sqrt(max(64, 96)) (spectral): the update's magnitudes are nearly equal.
  auto p3 = p0.clone(), m3 = torch::zeros_like(p0), v3 = torch::zeros_like(p0);
  MuonParam c = make_muon_param(p3, g, m3);
  c.moment2_buffer = v3.data_ptr<float>();
  cpu::muon_step(std::span(&c, 1), gh, adaptive());
  auto step = (p0 - p3).abs();
  const double expect = 0.02 * std::sqrt(96.0) / std::sqrt(0.05);
  CHECK(step.max().item<double>() == Approx(expect).epsilon(1e-3));
  CHECK(step.median().item<double>() == Approx(expect).epsilon(1e-3));
  // Without a moment2 buffer the adaptive step is refused, naming the parameter.
  MuonParam d = make_muon_param(p3, g, m3);
  CHECK_THROWS_WITH(cpu::muon_step(std::span(&d, 1), gh, adaptive()),
                    Catch::Contains("param 0: adaptive muon needs a moment2 buffer"));
}

TEST_CASE("Adaptive Muon under TP: whole-matrix orthogonalisation, the second scale by the shard's shape",
          "[muon][adaptive][tp]") {
  // Megatron: TensorParallelMuon.orthogonalize scales by the whole matrix's shape, then AdaptiveMuon.step scales
  // the normalised update again by update.size(-2), update.size(-1): the TP shard's. So a TP=2 run differs from
  // the TP=1 run by s(shard) / s(whole) on every element.
  torch::manual_seed(29);
  const int world = 2;
  for (int pdim : {0, 1}) {
    DYNAMIC_SECTION("partition_dim " << pdim) {
      const MuonOptions o = adaptive();
      auto p0 = torch::randn({64, 80}) * 0.02, g = torch::randn({64, 80});
      std::vector<GroupHyper> gh = {{0.02, 0.0, 1}};
      // Expected: the whole matrix's orthogonal update, split into shards, each normalised and scaled as a shard.
      auto orth = orthogonalized(g * (1 - o.momentum), o, false);  // first step: m = (1 - momentum) g
      std::vector<torch::Tensor> expect;
      for (int r = 0; r < world; ++r) {
        auto os = orth.chunk(world, pdim)[size_t(r)].contiguous();
        auto v = torch::zeros_like(os).lerp_(os.square(), 1 - o.adaptive.beta2);
        auto u = os / (v.sqrt() + o.adaptive.eps);
        u = u * muon_scale_factor(os.size(0), os.size(1), o.scale_mode) * o.extra_scale_factor;
        expect.push_back(p0.chunk(world, pdim)[size_t(r)].contiguous().add_(u, -0.02));
      }
      std::vector<torch::Tensor> got(world);
      on_ranks(world, [&](int r, TpGroup& tp) {
        auto pl = p0.chunk(world, pdim)[size_t(r)].contiguous(), ml = torch::zeros_like(pl), vl = torch::zeros_like(pl);
        auto gl = g.chunk(world, pdim)[size_t(r)].contiguous();
        MuonParam mp = make_muon_param(pl, gl, ml);
        mp.moment2_buffer = vl.data_ptr<float>();
        mp.partition_dim = pdim;
        cpu::muon_step(std::span(&mp, 1), gh, o, &tp);
        got[size_t(r)] = pl;
      });
      for (int r = 0; r < world; ++r) REQUIRE(bit_equal(got[size_t(r)], expect[size_t(r)]));
    }
  }
}

TEST_CASE("Adaptive Muon's options come from OptimizerConfig; the other moment2 methods are named, not run",
          "[muon][adaptive]") {
  mr::OptimizerConfig cfg;
  cfg.optimizer = "muon";
  CHECK(muon_options(cfg).adaptive.method == Moment2Method::None);
  cfg.optimizer = "adaptive_muon";
  cfg.adaptive_muon_beta2 = 0.9;
  cfg.adaptive_muon_eps = 1e-6;
  const MuonOptions o = muon_options(cfg);
  CHECK(o.adaptive.method == Moment2Method::AdaMuon);
  CHECK(o.adaptive.beta2 == 0.9);
  CHECK(o.adaptive.eps == 1e-6);
  const AdaMuonConsts c = adamuon_consts(o.adaptive);
  CHECK(c.one_minus_beta2 == static_cast<float>(1.0 - 0.9));
  CHECK(c.eps == 1e-6f);
  cfg.adaptive_muon_moment2_method = "normuon";
  CHECK_THROWS_WITH(muon_options(cfg), Catch::Contains("'normuon' is not implemented (adamuon is)"));
  CHECK_THROWS_WITH(moment2_method_from_string("adam"), Catch::Contains("choose from adamuon, normuon, namo"));
  // The optimizer table: Muon's kernel, momentum and moment2 per matrix, Adam's state for the scalar parameters.
  const OptimizerInfo& info = optimizer_info(mr::arg::Optimizer::adaptive_muon);
  CHECK(info.kernel == Kernel::Muon);
  CHECK(info.state.fp32_bytes_per_param() == 8);
  CHECK_FALSE(info.state.precision_aware);
  CHECK(info.scalar_rule == ScalarRule::MuonScalarOptimizer);
}

TEST_CASE("CUDA Adaptive Muon step agrees with the CPU", "[muon][adaptive][gpu]") {
  MR_REQUIRE_GPU_OR_SKIP();
  torch::manual_seed(43);
  for (bool qkv : {false, true}) {
    MuonOptions o = adaptive();
    o.ns.precision = MatmulPrecision::Highest;
    auto p0 = torch::randn({128, 48}) * 0.02;
    auto p = p0.clone(), m = torch::zeros_like(p0), v = torch::zeros_like(p0);
    auto dp = test::to_device(p0), dm = test::to_device(m), dv = test::to_device(v);
    std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
    for (int s = 0; s < 3; ++s) {
      auto g = torch::randn({128, 48});
      auto dg = test::to_device(g);
      MuonParam mp = make_muon_param(p, g, m);
      mp.moment2_buffer = v.data_ptr<float>(), mp.is_qkv = qkv;
      cpu::muon_step(std::span(&mp, 1), gh, o);
      MuonParam dmp = mp;
      dmp.param = dp.as<float>(), dmp.grad = dg.as<float>(), dmp.momentum_buffer = dm.as<float>();
      dmp.moment2_buffer = dv.as<float>();
      gpu::muon_step(std::span(&dmp, 1), gh, o);
    }
    INFO((qkv ? "split QKV" : "plain"));
    CHECK(bit_equal(test::from_device(dm, m), m));  // the momentum is elementwise (decoupled weight decay)
    // cuBLAS and OpenBLAS sum the NS products in different orders: the moment2 and the parameters agree to a
    // bound. The normalised update is about +-s/sqrt(1-beta2) per element, so an element whose orthogonal update
    // is ~0 could take the other sign: allow a few such elements, no more.
    const auto va = test::agreement(test::from_device(dv, v), v, 1e-6);
    CHECK(va.max_rel < 1e-3);
    auto dpar = test::from_device(dp, p) - p0, cpar = p - p0;
    const double far = ((dpar - cpar).abs() > 1e-4 * cpar.abs().max()).sum().item<double>();
    CHECK(far <= 0.001 * double(cpar.numel()));
  }
}
