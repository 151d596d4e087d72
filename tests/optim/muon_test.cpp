// Muon: coefficient schedules, Newton-Schulz against a LibTorch-ops transcription of Emerging-Optimizers'
// newton_schulz, singular-value bands, the optimizer step against a transcription of Megatron's
// TensorParallelMuon, QKV split, scale modes, batched NS and the TP modes (ranks as threads).
#include <catch2/catch.hpp>
#include <map>
#include <numeric>
#include <thread>

#include "optim/local_group.h"
#include "optim/muon.h"
#include "optim/torch_adapter.h"
#include "optim_test_util.h"

using namespace mr::optim;
using mr::optim::test::bit_equal;
using mr::optim::test::MuonCase;
using mr::optim::test::on_ranks;

namespace {

// ---- the readable reference, LibTorch ops --------------------------------------------------------------------------

// emerging_optimizers.orthogonalized_optimizers.muon_utils.newton_schulz, transcribed. Medium precision converts X
// to bf16 and every addmm result is rounded to bf16 (fp32 accumulation).
torch::Tensor ref_newton_schulz(torch::Tensor x, const NsOptions& o) {
  const bool transpose = x.size(0) > x.size(1);
  if (transpose) x = x.t();
  auto X = x / x.norm().clamp_min(o.eps);  // F.normalize(x, p=2, dim=(-2, -1), eps)
  const bool bf16 = o.precision == MatmulPrecision::Medium;
  auto r = [&](const torch::Tensor& t) { return bf16 ? t.to(torch::kBFloat16).to(torch::kFloat) : t; };
  X = r(X);
  for (const NsCoeff& k : ns_schedule(o.coefficients, o.steps)) {
    auto A = r(torch::mm(X, X.t()));
    if (k.c != 0.0) {
      auto B = r(torch::addmm(A, A, A, /*beta=*/k.b, /*alpha=*/k.c));
      X = r(torch::addmm(X, B, X, /*beta=*/k.a, /*alpha=*/1.0));
    } else {
      X = r(torch::addmm(X, A, X, /*beta=*/k.a, /*alpha=*/k.b));
    }
  }
  if (transpose) X = X.t();
  return X.contiguous();
}

torch::Tensor ref_scaled_orthogonalize(const torch::Tensor& g, const MuonOptions& o) {
  return ref_newton_schulz(g, o.ns) * muon_scale_factor(g.size(0), g.size(1), o.scale_mode) * o.extra_scale_factor;
}

// OrthogonalizedOptimizer.step + TensorParallelMuon.orthogonalize (no TP), one parameter.
void ref_muon_step(torch::Tensor& p, const torch::Tensor& g_in, torch::Tensor& buf, double lr, double wd,
                   const MuonOptions& o, bool is_qkv) {
  auto grad = g_in.clone();
  if (wd != 0.0) {
    if (o.decoupled_weight_decay) p.add_(p, -wd * lr);
    else grad.add_(p, wd);
  }
  buf.lerp_(grad, 1 - o.momentum);
  auto u = o.nesterov ? grad.lerp(buf, o.momentum) : buf;
  torch::Tensor orth;
  if (o.split_qkv && is_qkv) {
    int64_t total = 0;
    for (int64_t s : o.qkv_split_shapes) total += s;
    const int64_t ng = u.size(0) / total;
    auto parts = u.view({ng, total, -1}).split_with_sizes(o.qkv_split_shapes, 1);
    std::vector<torch::Tensor> outs;
    for (auto& part : parts)
      outs.push_back(ref_scaled_orthogonalize(part.reshape({-1, u.size(1)}), o).view({ng, -1, u.size(1)}));
    orth = torch::cat(outs, 1).view(u.sizes());
  } else {
    orth = ref_scaled_orthogonalize(u, o);
  }
  p.add_(orth, -lr);
}

// max |a - b| / max |b|
double rel_max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

torch::Tensor ns_cpu(const torch::Tensor& x, const NsOptions& o) {
  auto out = torch::empty_like(x);
  cpu::newton_schulz(x.contiguous().data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), o);
  return out;
}

// ---- coefficients, scales, parsing ---------------------------------------------------------------------------------

TEST_CASE("Newton-Schulz coefficient schedules", "[muon][coefficients]") {
  REQUIRE(ns_coefficients_from_string("quintic") == NsCoefficients::Quintic);
  REQUIRE(to_string(NsCoefficients::PolarExpress) == "polar_express");
  REQUIRE_THROWS_WITH(ns_coefficients_from_string("cubic"),
                      Catch::Contains("choices: simple, quintic, polar_express, cans, aol, deepseekv4, cubic5"));
  auto q = ns_schedule(NsCoefficients::Quintic, 7);  // cycles
  REQUIRE(q[0].a == 4.0848);
  REQUIRE(q[4].c == 1.2012);
  REQUIRE(q[5].a == 4.0848);
  auto pe = ns_schedule(NsCoefficients::PolarExpress, 10);  // repeats the last set
  REQUIRE(pe[0].a == 8.2051);
  REQUIRE(pe[7].a == 1.8750);
  REQUIRE(pe[9].b == -1.25);
  auto s = ns_schedule(NsCoefficients::Simple, 3);
  REQUIRE((s[2].a == 3.4445 && s[2].b == -4.7750 && s[2].c == 2.0315));
  REQUIRE(ns_schedule(NsCoefficients::Aol, 4)[3].c == 1.3169);
  REQUIRE(ns_schedule(NsCoefficients::DeepseekV4, 10)[9].a == 2.0);
  REQUIRE_THROWS_WITH(ns_schedule(NsCoefficients::Cubic5, 6), Catch::Contains("fixed 5-step"));
  REQUIRE_THROWS(ns_schedule(NsCoefficients::Quintic, 0));
  // torch ignores "low" and keeps its ambient precision, "highest" (full fp32) by default.
  REQUIRE(matmul_precision_from_string("low") == MatmulPrecision::Highest);
  REQUIRE(muon_tp_mode_from_string("blockwise") == MuonTpMode::Blockwise);
  REQUIRE(muon_tp_mode_from_string("layer_sharded") == MuonTpMode::LayerSharded);
  REQUIRE(muon_tp_mode_from_string("auto") == MuonTpMode::Auto);
  REQUIRE_THROWS_WITH(muon_tp_mode_from_string("sharded"), Catch::Contains("unsupported muon tp mode"));
}

TEST_CASE("Muon scale factors (get_muon_scale_factor)", "[muon][scale]") {
  REQUIRE(muon_scale_factor(1024, 4096, MuonScaleMode::Spectral) == 64.0);
  REQUIRE(muon_scale_factor(4096, 1024, MuonScaleMode::ShapeScaling) == 2.0);
  REQUIRE(muon_scale_factor(1024, 4096, MuonScaleMode::ShapeScaling) == 1.0);
  REQUIRE(muon_scale_factor(1024, 4096, MuonScaleMode::UnitRmsNorm) == 0.5);
  REQUIRE(muon_scale_mode_from_string("unit_rms_norm") == MuonScaleMode::UnitRmsNorm);
  REQUIRE(qkv_split_shapes(32, 8, 128) == std::vector<int64_t>{512, 128, 128});
  REQUIRE(qkv_split_shapes(32, 8, 128, true) == std::vector<int64_t>{512, 512, 128, 128});
  REQUIRE(muon_excluded(1, false));
  REQUIRE(muon_excluded(2, true));
  REQUIRE(muon_excluded(2, false, false));
  REQUIRE_FALSE(muon_excluded(2, false));
}

// ---- Newton-Schulz ---------------------------------------------------------------------------------------------------

TEST_CASE("Newton-Schulz matches the LibTorch transcription", "[muon][ns]") {
  torch::manual_seed(3);
  for (auto shape : {std::pair<int64_t, int64_t>{48, 160}, {160, 48}, {64, 64}, {1, 37}, {37, 1}}) {
    auto x = torch::randn({shape.first, shape.second});
    for (auto prec : {MatmulPrecision::Highest, MatmulPrecision::Medium}) {
      for (auto coeff : {NsCoefficients::Simple, NsCoefficients::Quintic, NsCoefficients::PolarExpress,
                         NsCoefficients::Cans, NsCoefficients::Aol, NsCoefficients::Cubic5}) {
        for (bool syrk : {false, true}) {
          NsOptions o;
          o.precision = prec, o.coefficients = coeff, o.use_syrk = syrk;
          INFO(shape.first << "x" << shape.second << " " << to_string(coeff) << (prec == MatmulPrecision::Medium ? " bf16" : " fp32")
                           << (syrk ? " syrk" : ""));
          auto ours = ns_cpu(x, o), theirs = ref_newton_schulz(x, o);
          // fp32: GEMM summation order only. bf16: a different sum can round to the neighbouring bf16 value.
          // A LibTorch whose sqrt is inexact normalises by a slightly different value, which the iteration
          // amplifies (most with the large cans / polar_express coefficients): wider bounds, said once.
          const bool exact = test::torch_sqrt_exact();
          if (!exact && coeff == NsCoefficients::Simple && prec == MatmulPrecision::Highest && !syrk && shape.first == 48)
            WARN("LibTorch " << TORCH_VERSION << "'s vectorized sqrt is not correctly rounded on this CPU: wider bounds");
          const double fp32_bound = exact ? 2e-5 : 2e-3, bf16_bound = exact ? 3e-2 : 1e-1, bf16_mean = exact ? 2e-3 : 3e-2;
          if (prec == MatmulPrecision::Medium) {
            CHECK(rel_max_diff(ours, theirs) < bf16_bound);
          } else {
            // fp32: both sides are judged against the transcription run in double. Where the iteration is
            // ill-conditioned, they differ by more than summation order alone: a rank-1 input (1x37, 37x1) has
            // its one singular value at exactly 1 after normalisation, where CANS' five steps multiply an input
            // error by ~4.9e4 (the product of p_i'(sigma_i); 1 ulp of ||W||^2 becomes ~6e-3), so SSYRK's and
            // LibTorch's different sums of the same 37 squares end ~1e-4..1e-3 apart, deterministically, on
            // every BLAS. Ours must then be no further from the double result than LibTorch's fp32 is (x4).
            auto exact = ref_newton_schulz(x.to(torch::kDouble), o).to(torch::kFloat);
            const double ours_err = rel_max_diff(ours, exact), theirs_err = rel_max_diff(theirs, exact);
            INFO("vs double: ours " << ours_err << ", LibTorch fp32 " << theirs_err);
            CHECK(ours_err < std::max(fp32_bound, 4 * theirs_err));
          }
          if (prec == MatmulPrecision::Medium) {
            // The mean difference, against how far LibTorch's own bf16 result is from the fp32 iteration: with
            // the large cans / polar_express coefficients one bf16 rounding flipped by a different sum order
            // (SSYRK vs GEMM, or OpenBLAS's AVX-512 kernels vs Haswell's) grows through the five steps, so the
            // fixed bound alone depends on the BLAS build (it failed on AMD EPYC with AVX-512 BF16).
            NsOptions f = o;
            f.precision = MatmulPrecision::Highest;
            auto fp32 = ref_newton_schulz(x, f);
            const double mean_diff = (ours - theirs).abs().mean().item<double>();
            const double theirs_vs_fp32 = (theirs - fp32).abs().mean().item<double>();
            INFO("mean |ours - LibTorch| " << mean_diff << ", mean |LibTorch bf16 - fp32| " << theirs_vs_fp32);
            CHECK(mean_diff < std::max(bf16_mean * theirs.abs().mean().item<double>(), 0.05 * theirs_vs_fp32) + 1e-7);
          }
        }
      }
    }
  }
}

TEST_CASE("Newton-Schulz singular values lie in each coefficient type's band", "[muon][ns]") {
  // Bands: the image of [0.01, 0.5] (where a Frobenius-normalised Gaussian matrix's singular values lie) under the
  // composed scalar polynomial (docs/optim.md). And each singular value must be the polynomial of its input.
  struct Band {
    NsCoefficients c;
    int steps;
    double lo, hi;
  };
  const Band bands[] = {{NsCoefficients::Simple, 5, 0.6818, 1.1344},     {NsCoefficients::Quintic, 5, 0.9778, 1.0318},
                        {NsCoefficients::PolarExpress, 5, 0.8704, 1.1236}, {NsCoefficients::PolarExpress, 8, 1.0, 1.0},
                        {NsCoefficients::Cans, 5, 0.8844, 1.1198},        {NsCoefficients::Aol, 4, 0.8659, 1.0844},
                        {NsCoefficients::DeepseekV4, 10, 1.0, 1.0005},    {NsCoefficients::Cubic5, 5, 0.7741, 1.3000}};
  torch::manual_seed(5);
  auto x = torch::randn({48, 160}).to(torch::kDouble);
  auto sigma_in = at::linalg_svdvals(x / x.norm());
  REQUIRE(sigma_in.min().item<double>() > 0.01);
  REQUIRE(sigma_in.max().item<double>() < 0.5);
  for (const Band& b : bands) {
    for (auto prec : {MatmulPrecision::Highest, MatmulPrecision::Medium}) {
      NsOptions o;
      o.coefficients = b.c, o.steps = b.steps, o.precision = prec;
      const bool bf16 = prec == MatmulPrecision::Medium;
      // CANS' first step (b = -25.1, c = 18.6) amplifies bf16 rounding past any band (singular values up to
      // ~2.1 here, in the LibTorch transcription as well): its band holds in fp32 only (docs/optim.md).
      if (bf16 && b.c == NsCoefficients::Cans) continue;
      INFO(to_string(b.c) << " " << b.steps << " steps" << (bf16 ? " bf16" : " fp32"));
      auto sigma = at::linalg_svdvals(ns_cpu(x.to(torch::kFloat), o).to(torch::kDouble));
      const double tol = bf16 ? 0.03 : 2e-3;
      CHECK(sigma.min().item<double>() >= b.lo - tol);
      CHECK(sigma.max().item<double>() <= b.hi + tol);
      // sigma_i -> |p(sigma_i)|, the polynomial composition in double.
      auto expect = sigma_in.clone();
      auto* e = expect.data_ptr<double>();
      for (int64_t i = 0; i < expect.numel(); ++i)
        for (const NsCoeff& k : ns_schedule(b.c, b.steps)) e[i] = k.a * e[i] + k.b * std::pow(e[i], 3) + k.c * std::pow(e[i], 5);
      expect = std::get<0>(expect.abs().sort(0, /*descending=*/true));
      CHECK((sigma - expect).abs().max().item<double>() < (bf16 ? 0.05 : 2e-3));
    }
  }
}

TEST_CASE("Newton-Schulz's normalisation: X / clamp_min(||X||_F, eps), the CPU's and the GPU's element functions",
          "[muon][ns]") {
  const float eps = 1e-7f;
  // One matrix: the root of the double sum of squares, rounded once to fp32.
  const double sumsq = 2.0 + 0x1p-40;
  CHECK(ns_denom(sumsq, eps) == static_cast<float>(std::sqrt(sumsq)));
  CHECK(ns_denom(4.0, eps) == 2.0f);
  CHECK(ns_denom(0.0, eps) == eps);  // the zero matrix stays zero (0 / eps)
  CHECK(ns_denom(1e-20, eps) == eps);
  CHECK(std::isinf(ns_denom(INFINITY, eps)));
  CHECK(std::isnan(ns_denom(NAN, eps)));  // clamp_min keeps a NaN norm NaN (fmaxf would give eps)
  // A TP-sharded matrix: the all-reduced fp32 sum, an fp32 root.
  CHECK(ns_denom_f32(2.0f, eps) == std::sqrt(2.0f));
  CHECK(ns_denom_f32(0.0f, eps) == eps);
  CHECK(std::isnan(ns_denom_f32(NAN, eps)));
  CHECK(ns_normalize_element(3.0f, ns_denom(4.0, eps)) == 1.5f);
}

TEST_CASE("batched Newton-Schulz equals one call per matrix", "[muon][ns]") {
  torch::manual_seed(7);
  auto x = torch::randn({5, 40, 24});
  NsOptions o;
  auto out = torch::empty_like(x);
  cpu::newton_schulz_batched(x.data_ptr<float>(), out.data_ptr<float>(), 5, 40, 24, o);
  for (int64_t b = 0; b < 5; ++b) REQUIRE(bit_equal(out[b], ns_cpu(x[b], o)));
}

// ---- the Muon step -----------------------------------------------------------------------------------------------------

std::vector<MuonCase> muon_cases() {
  std::vector<MuonCase> v;
  auto base = [] {
    MuonOptions o;
    o.ns.precision = MatmulPrecision::Highest;
    o.qkv_split_shapes = {16, 8, 8};
    return o;
  };
  MuonCase c{"defaults (spectral, quintic, decoupled wd)", base()};
  v.push_back(c);
  c = {"nesterov, unit_rms_norm, extra scale 0.2", base()};
  c.o.nesterov = true, c.o.scale_mode = MuonScaleMode::UnitRmsNorm, c.o.extra_scale_factor = 0.2;
  v.push_back(c);
  c = {"shape_scaling, l2 weight decay, polar_express", base()};
  c.o.scale_mode = MuonScaleMode::ShapeScaling, c.o.decoupled_weight_decay = false;
  c.o.ns.coefficients = NsCoefficients::PolarExpress;
  v.push_back(c);
  c = {"split QKV", base(), true};
  v.push_back(c);
  c = {"split QKV, nesterov, shape_scaling", base(), true};
  c.o.nesterov = true, c.o.scale_mode = MuonScaleMode::ShapeScaling;
  v.push_back(c);
  c = {"QKV param with split_qkv off", base(), true};
  c.o.split_qkv = false;
  v.push_back(c);
  c = {"bf16 matmuls (medium)", base()};
  c.o.ns.precision = MatmulPrecision::Medium;
  v.push_back(c);
  return v;
}

TEST_CASE("Muon steps match the LibTorch transcription of TensorParallelMuon", "[muon][step]") {
  for (const MuonCase& mc : muon_cases()) {
    DYNAMIC_SECTION(mc.name) {
      torch::manual_seed(11);
      // 4 query groups of Q16/K8/V8 rows: 128 x 48 (more rows than columns: NS runs on the transpose).
      auto p0 = torch::randn({128, 48}) * 0.02;
      auto p = p0.clone(), buf = torch::zeros_like(p0), rp = p0.clone(), rbuf = torch::zeros_like(p0);
      MuonParam mp = make_muon_param(p, torch::zeros_like(p), buf);
      mp.is_qkv = mc.qkv;
      const double lr = 0.02, wd = 0.1;
      std::vector<GroupHyper> gh = {{lr, wd, 1}};
      const bool bf16 = mc.o.ns.precision == MatmulPrecision::Medium;
      for (int s = 1; s <= 5; ++s) {
        auto g = torch::randn({128, 48});
        mp.grad = g.data_ptr<float>();
        cpu::muon_step(std::span(&mp, 1), gh, mc.o);
        ref_muon_step(rp, g, rbuf, lr, wd, mc.o, mc.qkv);
        // The momentum is elementwise, exact unless L2 weight decay feeds the (NS-rounded) param into it.
        if (mc.o.decoupled_weight_decay) REQUIRE(bit_equal(buf, rbuf));
        else CHECK(rel_max_diff(buf, rbuf) < 1e-5);
        // The parameter moves by lr * O(scale) per step; compare the accumulated updates.
        double d = rel_max_diff(p - p0, rp - p0);
        INFO("step " << s << ": max update difference / max update = " << d);
        CHECK(d < (bf16 ? 3e-2 : 1e-4));
      }
    }
  }
}

TEST_CASE("Muon QKV split orthogonalises Q, K and V separately", "[muon][step]") {
  torch::manual_seed(13);
  MuonOptions o;
  o.ns.precision = MatmulPrecision::Highest;
  o.qkv_split_shapes = {16, 8, 8};
  auto x = torch::randn({128, 48});
  MuonParam mp;
  mp.rows = 128, mp.cols = 48, mp.is_qkv = true;
  auto out = torch::empty_like(x);
  cpu::muon_orthogonalize(mp, x.data_ptr<float>(), out.data_ptr<float>(), o);
  // The K rows of all 4 groups, stacked, form one orthogonalised block: rows 16..23, 48..55, ...
  auto k_rows = x.view({4, 32, 48}).narrow(1, 16, 8).reshape({32, 48});
  auto k_out = out.view({4, 32, 48}).narrow(1, 16, 8).reshape({32, 48});
  auto expect = ns_cpu(k_rows.contiguous(), o.ns) * float(muon_scale_factor(32, 48, o.scale_mode));
  REQUIRE(bit_equal(k_out.contiguous(), expect));
  // A per-param split overrides the options; a wrong split is refused.
  mp.qkv_split_shapes = {8, 8, 16};
  REQUIRE_NOTHROW(cpu::muon_orthogonalize(mp, x.data_ptr<float>(), out.data_ptr<float>(), o));
  mp.qkv_split_shapes = {10, 8, 8};
  REQUIRE_THROWS_WITH(cpu::muon_orthogonalize(mp, x.data_ptr<float>(), out.data_ptr<float>(), o),
                      Catch::Contains("split shape mismatch"));
}

TEST_CASE("muon_ns_batch_size batches same-shape matrices without changing results", "[muon][step]") {
  torch::manual_seed(17);
  std::vector<torch::Tensor> init;
  for (int i = 0; i < 5; ++i) init.push_back(torch::randn({32, 24}) * 0.02);
  init.push_back(torch::randn({24, 32}) * 0.02);
  auto run = [&](int batch) {
    MuonOptions o;
    o.ns_batch_size = batch;
    std::vector<torch::Tensor> p, m, g;
    std::vector<MuonParam> mp;
    torch::manual_seed(19);
    for (auto& t : init) {
      p.push_back(t.clone()), m.push_back(torch::zeros_like(t)), g.push_back(torch::randn(t.sizes()));
      mp.push_back(make_muon_param(p.back(), g.back(), m.back()));
    }
    std::vector<GroupHyper> gh = {{0.01, 0.1, 1}};
    for (int s = 0; s < 3; ++s) cpu::muon_step(mp, gh, o);
    return p;
  };
  auto a = run(1), b = run(3);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(bit_equal(a[i], b[i]));
}

// ---- tensor parallelism, ranks as threads --------------------------------------------------------------------------------

TEST_CASE("Muon TP modes: duplicated and distributed give the whole-matrix result, blockwise the shard's", "[muon][tp]") {
  torch::manual_seed(23);
  const int world = 2;
  auto full = torch::randn({96, 64});
  for (int pdim : {0, 1}) {
    for (bool qkv : {false, true}) {
      if (qkv && pdim == 1) continue;  // fused QKV weights are column-parallel (split along rows)
      MuonOptions o;
      o.ns.precision = MatmulPrecision::Highest;
      o.qkv_split_shapes = {16, 4, 4};  // 4 query groups of 24 rows; 2 per rank
      MuonParam whole;
      whole.rows = 96, whole.cols = 64, whole.is_qkv = qkv;
      auto expect = torch::empty_like(full);
      cpu::muon_orthogonalize(whole, full.data_ptr<float>(), expect.data_ptr<float>(), o);
      auto shards = full.chunk(world, pdim);
      auto expect_shards = expect.chunk(world, pdim);
      for (MuonTpMode mode :
           {MuonTpMode::Duplicated, MuonTpMode::Distributed, MuonTpMode::Blockwise, MuonTpMode::LayerSharded}) {
        if (qkv && mode == MuonTpMode::Distributed) continue;
        o.tp_mode = mode;
        DYNAMIC_SECTION("partition_dim " << pdim << (qkv ? " qkv" : "") << " mode " << int(mode)) {
          std::vector<torch::Tensor> out(world);
          on_ranks(world, [&](int r, TpGroup& tp) {
            auto x = shards[size_t(r)].contiguous();
            MuonParam p;
            p.rows = x.size(0), p.cols = x.size(1), p.partition_dim = pdim, p.is_qkv = qkv;
            out[size_t(r)] = torch::empty_like(x);
            cpu::muon_orthogonalize(p, x.data_ptr<float>(), out[size_t(r)].data_ptr<float>(), o, &tp);
          });
          for (int r = 0; r < world; ++r) {
            auto x = shards[size_t(r)].contiguous();
            if (mode == MuonTpMode::Duplicated || mode == MuonTpMode::LayerSharded) {
              REQUIRE(bit_equal(out[size_t(r)], expect_shards[size_t(r)].contiguous()));
            } else if (mode == MuonTpMode::Distributed) {
              CHECK(rel_max_diff(out[size_t(r)], expect_shards[size_t(r)].contiguous()) < 1e-4);
            } else {
              MuonParam p;
              p.rows = x.size(0), p.cols = x.size(1), p.is_qkv = qkv;
              auto alone = torch::empty_like(x);
              cpu::muon_orthogonalize(p, x.data_ptr<float>(), alone.data_ptr<float>(), o);
              REQUIRE(bit_equal(out[size_t(r)], alone));
              CHECK(rel_max_diff(out[size_t(r)], expect_shards[size_t(r)].contiguous()) > 1e-3);  // depends on TP
            }
          }
        }
      }
    }
  }
}

TEST_CASE("a duplicated-mode TP Muon step equals the single-rank step", "[muon][tp]") {
  torch::manual_seed(29);
  const int world = 2;
  MuonOptions o;
  auto p0 = torch::randn({64, 80}) * 0.02;
  std::vector<torch::Tensor> grads;
  for (int s = 0; s < 3; ++s) grads.push_back(torch::randn({64, 80}));
  std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
  auto p = p0.clone(), m = torch::zeros_like(p0);
  for (auto& g : grads) {
    MuonParam mp = make_muon_param(p, g, m);
    cpu::muon_step(std::span(&mp, 1), gh, o);
  }
  std::vector<torch::Tensor> pr(world);
  on_ranks(world, [&](int r, TpGroup& tp) {
    auto pl = p0.chunk(world, 1)[size_t(r)].contiguous(), ml = torch::zeros_like(pl);
    for (auto& g : grads) {
      auto gl = g.chunk(world, 1)[size_t(r)].contiguous();
      MuonParam mp = make_muon_param(pl, gl, ml);
      mp.partition_dim = 1;
      cpu::muon_step(std::span(&mp, 1), gh, o, &tp);
    }
    pr[size_t(r)] = pl;
  });
  REQUIRE(bit_equal(torch::cat(pr, 1), p));
}

// The planner (muon_plan.h) keeps TP shards out of batches: with muon_ns_batch_size > 1, same-shape shards in
// duplicated mode must still be orthogonalised as whole matrices, next to a batch of plain same-shape matrices.
TEST_CASE("a duplicated- and a layer-sharded-mode TP Muon step with NS batching equal the single-rank step", "[muon][tp]") {
  torch::manual_seed(37);
  const int world = 2;
  MuonOptions o;
  o.ns_batch_size = 4;
  // Two column-sharded 64 x 80 weights and two unsharded 64 x 40 ones (the shape of a shard).
  std::vector<torch::Tensor> p0 = {torch::randn({64, 80}) * 0.02, torch::randn({64, 40}) * 0.02,
                                   torch::randn({64, 80}) * 0.02, torch::randn({64, 40}) * 0.02};
  const std::vector<bool> sharded = {true, false, true, false};
  std::vector<std::vector<torch::Tensor>> grads(p0.size());
  for (size_t i = 0; i < p0.size(); ++i)
    for (int s = 0; s < 2; ++s) grads[i].push_back(torch::randn(p0[i].sizes()));
  std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
  std::vector<torch::Tensor> whole, mw;
  for (auto& t : p0) whole.push_back(t.clone()), mw.push_back(torch::zeros_like(t));
  for (int s = 0; s < 2; ++s) {
    std::vector<MuonParam> mp;
    for (size_t i = 0; i < p0.size(); ++i) mp.push_back(make_muon_param(whole[i], grads[i][size_t(s)], mw[i]));
    cpu::muon_step(mp, gh, o);
  }
  // Duplicated, and layer-sharded (the two sharded weights' homes: ranks 0 and 1): the same bits.
  for (MuonTpMode mode : {MuonTpMode::Duplicated, MuonTpMode::LayerSharded}) {
    INFO("mode " << int(mode));
    o.tp_mode = mode;
    std::vector<std::vector<torch::Tensor>> pr(world);
    std::vector<int64_t> ns_runs(world);
    on_ranks(world, [&](int r, TpGroup& tp) {
      const int64_t ns_before = cpu::newton_schulz_count();
      std::vector<torch::Tensor> pl, ml;
      for (size_t i = 0; i < p0.size(); ++i) {
        pl.push_back(sharded[i] ? p0[i].chunk(world, 1)[size_t(r)].contiguous() : p0[i].clone());
        ml.push_back(torch::zeros_like(pl.back()));
      }
      for (int s = 0; s < 2; ++s) {
        std::vector<torch::Tensor> gl;
        std::vector<MuonParam> mp;
        for (size_t i = 0; i < p0.size(); ++i) {
          gl.push_back(sharded[i] ? grads[i][size_t(s)].chunk(world, 1)[size_t(r)].contiguous() : grads[i][size_t(s)]);
          mp.push_back(make_muon_param(pl[i], gl.back(), ml[i]));
          if (sharded[i]) mp.back().partition_dim = 1;
        }
        cpu::muon_step(mp, gh, o, &tp);
      }
      pr[size_t(r)] = pl;
      ns_runs[size_t(r)] = cpu::newton_schulz_count() - ns_before;
    });
    // Per step, every rank orthogonalises the two unsharded weights; the two sharded ones run on every rank
    // (duplicated) or once each, on its home (layer-sharded: rank 0 the first, rank 1 the second).
    for (int r = 0; r < world; ++r)
      CHECK(ns_runs[size_t(r)] == 2 * (mode == MuonTpMode::Duplicated ? 4 : 3));
    for (size_t i = 0; i < p0.size(); ++i) {
      INFO("param " << i);
      if (sharded[i]) {
        REQUIRE(bit_equal(torch::cat({pr[0][i], pr[1][i]}, 1), whole[i]));
      } else {
        for (int r = 0; r < world; ++r) REQUIRE(bit_equal(pr[size_t(r)][i], whole[i]));
      }
    }
  }
}

// ---- GPU ---------------------------------------------------------------------------------------------------------------

TEST_CASE("CUDA Newton-Schulz and Muon step agree with the CPU", "[muon][gpu]") {
  MR_REQUIRE_GPU_OR_SKIP();
  torch::manual_seed(31);
  for (auto shape : {std::pair<int64_t, int64_t>{48, 160}, {160, 48}, {256, 256}}) {
    auto x = torch::randn({shape.first, shape.second});
    for (auto prec : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium}) {
      NsOptions o;
      o.precision = prec;
      auto dx = test::to_device(x), dout = test::to_device(x);
      gpu::newton_schulz(dx.as<float>(), dout.as<float>(), x.size(0), x.size(1), o);
      auto got = test::from_device(dout, x);
      NsOptions oc = o;
      if (prec == MatmulPrecision::High) oc.precision = MatmulPrecision::Highest;
      INFO(shape.first << "x" << shape.second << " precision " << int(prec));
      CHECK(rel_max_diff(got, ns_cpu(x, oc)) < (prec == MatmulPrecision::Highest ? 1e-4 : 5e-2));
    }
  }
  // Batched.
  auto xb = torch::randn({4, 64, 96});
  auto dxb = test::to_device(xb), dob = test::to_device(xb);
  NsOptions o;
  o.precision = MatmulPrecision::Highest;
  gpu::newton_schulz_batched(dxb.as<float>(), dob.as<float>(), 4, 64, 96, o);
  auto gotb = test::from_device(dob, xb);
  for (int b = 0; b < 4; ++b) CHECK(rel_max_diff(gotb[b], ns_cpu(xb[b], o)) < 1e-4);
  // Empty matrices: nothing to do, no launch error (a zero-sized grid is one).
  CHECK_NOTHROW(gpu::newton_schulz(dxb.as<float>(), dob.as<float>(), 0, 96, o));
  CHECK_NOTHROW(gpu::newton_schulz_batched(dxb.as<float>(), dob.as<float>(), 2, 64, 0, o));
  CHECK(rel_max_diff(test::from_device(dob, xb)[0], gotb[0]) == 0);  // untouched
  // A Muon step with QKV split.
  MuonOptions mo;
  mo.ns.precision = MatmulPrecision::Highest;
  mo.qkv_split_shapes = {16, 8, 8};
  auto p0 = torch::randn({128, 48}) * 0.02, g = torch::randn({128, 48});
  auto p = p0.clone(), m = torch::zeros_like(p0);
  MuonParam mp = make_muon_param(p, g, m);
  mp.is_qkv = true;
  std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
  cpu::muon_step(std::span(&mp, 1), gh, mo);
  auto dp = test::to_device(p0), dg = test::to_device(g), dm = test::to_device(torch::zeros_like(p0));
  MuonParam dmp = mp;
  dmp.param = dp.as<float>(), dmp.grad = dg.as<float>(), dmp.momentum_buffer = dm.as<float>();
  gpu::muon_step(std::span(&dmp, 1), gh, mo);
  CHECK(bit_equal(test::from_device(dm, m), m));
  CHECK(rel_max_diff(test::from_device(dp, p) - p0, p - p0) < 1e-4);
  // ns_batch_size: strided-batched NS over same-shape matrices, against the CPU step.
  mo.ns_batch_size = 3;
  std::vector<torch::Tensor> hp, hm, hg;
  std::vector<gpu::DeviceBuffer> db;
  std::vector<MuonParam> cps, gps;
  for (int i = 0; i < 4; ++i) {
    hp.push_back(torch::randn({32, 40}) * 0.02), hm.push_back(torch::zeros({32, 40})), hg.push_back(torch::randn({32, 40}));
    db.push_back(test::to_device(hp.back())), db.push_back(test::to_device(hg.back())), db.push_back(test::to_device(hm.back()));
    MuonParam q = make_muon_param(hp.back(), hg.back(), hm.back());
    cps.push_back(q);
    q.param = db[db.size() - 3].as<float>(), q.grad = db[db.size() - 2].as<float>(), q.momentum_buffer = db.back().as<float>();
    gps.push_back(q);
  }
  std::vector<torch::Tensor> before;
  for (auto& t : hp) before.push_back(t.clone());
  cpu::muon_step(cps, gh, mo);
  gpu::muon_step(gps, gh, mo);
  for (int i = 0; i < 4; ++i)
    CHECK(rel_max_diff(test::from_device(db[size_t(3 * i)], hp[size_t(i)]) - before[size_t(i)], hp[size_t(i)] - before[size_t(i)]) < 1e-4);
}

// A TP group of threads (LocalTpHub) for device buffers: each collective stages through the host. NCCL cannot put
// two ranks on one GPU; this lets one GPU check the CUDA step's duplicated and distributed modes.
class HostStagedTp final : public TpGroup {
 public:
  explicit HostStagedTp(TpGroup& host) : host_(host) {}
  int size() const override { return host_.size(); }
  int rank() const override { return host_.rank(); }
  void all_gather(const float* send, int64_t count, float* recv) override {
    std::vector<float> in = download(send, count), out(static_cast<size_t>(count * size()));
    host_.all_gather(in.data(), count, out.data());
    upload(recv, out);
  }
  void all_reduce_sum(float* data, int64_t count) override {
    std::vector<float> x = download(data, count);
    host_.all_reduce_sum(x.data(), count);
    upload(data, x);
  }
  void gather(const float* send, int64_t count, float* recv, int root) override {
    std::vector<float> in = download(send, count), out(static_cast<size_t>(count * size()));
    host_.gather(in.data(), count, out.data(), root);
    if (rank() == root) upload(recv, out);
  }
  void scatter(const float* send, int64_t count, float* recv, int root) override {
    std::vector<float> in(static_cast<size_t>(count * size())), out(static_cast<size_t>(count));
    if (rank() == root) in = download(send, count * size());
    host_.scatter(in.data(), count, out.data(), root);
    upload(recv, out);
  }

 private:
  static std::vector<float> download(const float* d, int64_t n) {
    std::vector<float> h(static_cast<size_t>(n));
    gpu::DeviceBuffer tmp(h.size() * 4);
    gpu::memcpy_d2d(tmp.get(), d, h.size() * 4);
    tmp.download(h.data(), h.size() * 4);
    return h;
  }
  static void upload(float* d, const std::vector<float>& h) {
    gpu::DeviceBuffer tmp(h.size() * 4);
    tmp.upload(h.data(), h.size() * 4);
    gpu::memcpy_d2d(d, tmp.get(), h.size() * 4);
  }
  TpGroup& host_;
};

TEST_CASE("CUDA Muon TP modes (two ranks as threads on one GPU) agree with the CPU's", "[muon][gpu][tp]") {
  MR_REQUIRE_GPU_OR_SKIP();
  torch::manual_seed(41);
  const int world = 2;
  for (int pdim : {0, 1}) {
    for (bool qkv : {false, true}) {
      if (qkv && pdim == 1) continue;  // fused QKV weights are column-parallel (split along rows)
      for (MuonTpMode mode : {MuonTpMode::Duplicated, MuonTpMode::Distributed, MuonTpMode::LayerSharded}) {
        for (MatmulPrecision prec : {MatmulPrecision::Highest, MatmulPrecision::Medium}) {
          MuonOptions o;
          o.tp_mode = mode;
          o.ns.precision = prec;
          o.qkv_split_shapes = {16, 4, 4};  // 4 query groups of 24 rows; 2 per rank
          auto p0 = torch::randn({96, 64}) * 0.02;
          std::vector<torch::Tensor> grads = {torch::randn({96, 64}), torch::randn({96, 64})};
          std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
          DYNAMIC_SECTION("partition_dim " << pdim << (qkv ? " qkv" : "") << " mode " << int(mode) << " precision "
                                           << int(prec)) {
            std::vector<torch::Tensor> cpu_p(world), gpu_p(world), cpu_m(world), gpu_m(world);
            on_ranks(world, [&](int r, TpGroup& tp) {
              auto pc = p0.chunk(world, pdim)[size_t(r)].contiguous(), mc = torch::zeros_like(pc);
              auto dp = test::to_device(pc), dm = test::to_device(mc);
              HostStagedTp dtp(tp);
              for (auto& g : grads) {
                auto gl = g.chunk(world, pdim)[size_t(r)].contiguous();
                auto dg = test::to_device(gl);
                MuonParam mp = make_muon_param(pc, gl, mc);
                mp.partition_dim = pdim, mp.is_qkv = qkv;
                MuonParam dmp = mp;
                dmp.param = dp.as<float>(), dmp.grad = dg.as<float>(), dmp.momentum_buffer = dm.as<float>();
                cpu::muon_step(std::span(&mp, 1), gh, o, &tp);
                gpu::muon_step(std::span(&dmp, 1), gh, o, &dtp);
              }
              cpu_p[size_t(r)] = pc, cpu_m[size_t(r)] = mc;
              gpu_p[size_t(r)] = test::from_device(dp, pc), gpu_m[size_t(r)] = test::from_device(dm, mc);
            });
            for (int r = 0; r < world; ++r) {
              INFO("rank " << r);
              const auto& p0r = p0.chunk(world, pdim)[size_t(r)];
              // The momentum is elementwise (bit-equal); the update goes through cuBLAS (the kernels' NS bound).
              CHECK(bit_equal(gpu_m[size_t(r)], cpu_m[size_t(r)]));
              CHECK(rel_max_diff(gpu_p[size_t(r)] - p0r, cpu_p[size_t(r)] - p0r) <
                    (prec == MatmulPrecision::Highest ? 1e-4 : 5e-2));
            }
          }
        }
      }
    }
  }
}

}  // namespace

namespace {
// A TP group that counts the floats this rank receives (a collective's share of the traffic into this rank).
class CountingTp final : public TpGroup {
 public:
  explicit CountingTp(TpGroup& g) : g_(g) {}
  int size() const override { return g_.size(); }
  int rank() const override { return g_.rank(); }
  void all_gather(const float* send, int64_t count, float* recv) override {
    received += count * (size() - 1);
    g_.all_gather(send, count, recv);
  }
  void all_reduce_sum(float* data, int64_t count) override {
    received += count * (size() - 1);  // every other rank's contribution, however the backend routes it
    g_.all_reduce_sum(data, count);
  }
  void gather(const float* send, int64_t count, float* recv, int root) override {
    if (rank() == root) received += count * (size() - 1);
    g_.gather(send, count, recv, root);
  }
  void scatter(const float* send, int64_t count, float* recv, int root) override {
    if (rank() != root) received += count;
    g_.scatter(send, count, recv, root);
  }
  int64_t received = 0;

 private:
  TpGroup& g_;
};
}  // namespace

TEST_CASE("layer_sharded moves (size - 1) / size of each matrix to its home and back: 2 / size of duplicated's "
          "all-gather, the same bits",
          "[muon][tp]") {
  torch::manual_seed(43);
  const int world = 4;
  MuonOptions o;
  // A column-split 64 x 160 weight and a row-split 160 x 64 one, 64 x 40 and 40 x 64 per rank.
  const torch::Tensor g_col = torch::randn({64, 160}), g_row = torch::randn({160, 64});
  const int64_t whole = 64 * 160;  // elements of each matrix
  std::map<MuonTpMode, int64_t> traffic;
  std::map<MuonTpMode, std::vector<torch::Tensor>> result;
  for (MuonTpMode mode : {MuonTpMode::Duplicated, MuonTpMode::LayerSharded}) {
    o.tp_mode = mode;
    std::vector<int64_t> received(world);
    std::vector<torch::Tensor> out(2 * world);
    on_ranks(world, [&](int r, TpGroup& tp) {
      CountingTp counting(tp);
      torch::Tensor pc = torch::zeros({64, 40}), pr = torch::zeros({40, 64});
      torch::Tensor mc = torch::zeros_like(pc), mr_ = torch::zeros_like(pr);
      torch::Tensor gc = g_col.chunk(world, 1)[size_t(r)].contiguous(), gr = g_row.chunk(world, 0)[size_t(r)].contiguous();
      std::vector<MuonParam> mp = {make_muon_param(pc, gc, mc), make_muon_param(pr, gr, mr_)};
      mp[0].partition_dim = 1;
      mp[1].partition_dim = 0;
      cpu::muon_step(mp, std::vector<GroupHyper>{{0.02, 0.0, 1}}, o, &counting);
      received[size_t(r)] = counting.received;
      out[size_t(2 * r)] = pc;
      out[size_t(2 * r + 1)] = pr;
    });
    traffic[mode] = std::accumulate(received.begin(), received.end(), int64_t{0});
    result[mode] = out;
  }
  // Two matrices: duplicated all-gathers each to every rank, (size - 1) whole copies; layer_sharded gathers
  // (size - 1) / size of it on the home and scatters as much back.
  CHECK(traffic[MuonTpMode::Duplicated] == 2 * (world - 1) * whole);
  CHECK(traffic[MuonTpMode::LayerSharded] == 2 * 2 * (world - 1) * whole / world);
  for (size_t i = 0; i < result[MuonTpMode::Duplicated].size(); ++i)
    CHECK(bit_equal(result[MuonTpMode::LayerSharded][i], result[MuonTpMode::Duplicated][i]));
}

TEST_CASE("CUDA layer_sharded Muon with two matrices in one step (homes 0 and 1) agrees with the CPU's",
          "[muon][gpu][tp]") {
  MR_REQUIRE_GPU_OR_SKIP();
  torch::manual_seed(47);
  const int world = 2;
  MuonOptions o;
  o.tp_mode = MuonTpMode::LayerSharded;
  o.ns.precision = MatmulPrecision::Highest;
  // A column-split and a row-split matrix: the first's home is rank 0, the second's rank 1 (muon_plan.h).
  const std::vector<torch::Tensor> p0 = {torch::randn({64, 80}) * 0.02, torch::randn({80, 64}) * 0.02};
  const std::vector<torch::Tensor> g0 = {torch::randn({64, 80}), torch::randn({80, 64})};
  const int pdims[2] = {1, 0};
  std::vector<GroupHyper> gh = {{0.02, 0.1, 1}};
  std::vector<std::vector<torch::Tensor>> cpu_p(world), gpu_p(world), cpu_m(world), gpu_m(world);
  std::vector<int64_t> cpu_traffic(world), gpu_traffic(world);
  on_ranks(world, [&](int r, TpGroup& tp) {
    CountingTp ctp(tp);
    HostStagedTp staged(tp);
    CountingTp dtp(staged);
    std::vector<torch::Tensor> pc, mc, gc;
    std::vector<gpu::DeviceBuffer> dp, dm, dg;
    std::vector<MuonParam> cps, gps;
    for (size_t i = 0; i < 2; ++i) {
      pc.push_back(p0[i].chunk(world, pdims[i])[size_t(r)].contiguous());
      mc.push_back(torch::zeros_like(pc.back()));
      gc.push_back(g0[i].chunk(world, pdims[i])[size_t(r)].contiguous());
    }
    for (size_t i = 0; i < 2; ++i) {
      dp.push_back(test::to_device(pc[i])), dm.push_back(test::to_device(mc[i])), dg.push_back(test::to_device(gc[i]));
      cps.push_back(make_muon_param(pc[i], gc[i], mc[i]));
      cps.back().partition_dim = pdims[i];
      MuonParam d = cps.back();
      d.param = dp.back().as<float>(), d.grad = dg.back().as<float>(), d.momentum_buffer = dm.back().as<float>();
      gps.push_back(d);
    }
    cpu::muon_step(cps, gh, o, &ctp);
    gpu::muon_step(gps, gh, o, &dtp);
    cpu_traffic[size_t(r)] = ctp.received, gpu_traffic[size_t(r)] = dtp.received;
    for (size_t i = 0; i < 2; ++i) {
      cpu_p[size_t(r)].push_back(pc[i]), cpu_m[size_t(r)].push_back(mc[i]);
      gpu_p[size_t(r)].push_back(test::from_device(dp[i], pc[i]));
      gpu_m[size_t(r)].push_back(test::from_device(dm[i], mc[i]));
    }
  });
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < 2; ++i) {
      INFO("rank " << r << " matrix " << i);
      const torch::Tensor p0r = p0[i].chunk(world, pdims[i])[size_t(r)];
      CHECK(bit_equal(gpu_m[size_t(r)][i], cpu_m[size_t(r)][i]));
      CHECK(rel_max_diff(gpu_p[size_t(r)][i] - p0r, cpu_p[size_t(r)][i] - p0r) < 1e-4);
    }
  // Each rank is the home of one matrix: it receives the other's shard, and its own shard back of the other.
  CHECK(gpu_traffic == cpu_traffic);
  for (int r = 0; r < world; ++r) CHECK(cpu_traffic[size_t(r)] == 2 * 64 * 40);
}
