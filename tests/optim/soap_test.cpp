// SOAP (optim/soap.h): the eigendecomposition and QR building blocks, the step's invariants, and SOAP steps against
// PyTorch's (tests/optim/data/soap_golden.json, written by make_soap_golden.py with torch's LAPACK eigh and QR).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "config/value.h"
#include "optim/config.h"
#include "optim/dtype.h"
#include "optim/gpu.h"
#include "optim/soap.h"
#include "optim_test_util.h"

namespace {

using mr::optim::GroupHyper;
using mr::optim::SoapOptions;
using mr::optim::SoapParam;
namespace cpu = mr::optim::cpu;

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = d(gen);
  return v;
}

// A^T A + shift I: symmetric positive definite with distinct eigenvalues (almost surely).
std::vector<float> spd(int64_t n, uint32_t seed) {
  const std::vector<float> a = random_matrix(n, n, seed);
  std::vector<float> s(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += double(a[size_t(k * n + i)]) * a[size_t(k * n + j)];
      s[size_t(i * n + j)] = static_cast<float>(acc) + (i == j ? 0.5f : 0.0f);
    }
  return s;
}

// max |Q^T Q - I|
double orthogonality_error(const std::vector<float>& q, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += double(q[size_t(k * n + i)]) * q[size_t(k * n + j)];
      worst = std::max(worst, std::abs(acc - (i == j ? 1.0 : 0.0)));
    }
  return worst;
}

const mr::Value& field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return v;
  throw std::out_of_range("soap golden data: no field " + k);
}
std::vector<float> floats(const mr::Value& list) {
  std::vector<float> out;
  for (const mr::Value& v : list.as_list()) out.push_back(static_cast<float>(v.as_float()));
  return out;
}

const mr::Value& golden() {
  static const mr::Value data = [] {
    std::ifstream in(std::filesystem::path(MR_SOURCE_DIR) / "tests/optim/data/soap_golden.json");
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    return mr::Value::parse_json(ss.str());
  }();
  return data;
}

// max |got - want| over max |want|.
double worst_rel(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, double(std::abs(got[i] - want[i])));
    scale = std::max(scale, double(std::abs(want[i])));
  }
  return worst / scale;
}

// A golden case's SOAP options, and its hyperparameters at (0-based) step t.
SoapOptions case_options(const mr::Value& c) {
  SoapOptions o;
  o.beta1 = field(c, "beta1").as_float();
  o.beta2 = field(c, "beta2").as_float();
  o.shampoo_beta = field(c, "shampoo_beta").as_float();
  o.eps = field(c, "eps").as_float();
  o.use_kl_shampoo = field(c, "kl").as_bool();
  return o;
}
GroupHyper case_hyper(const mr::Value& c, size_t t) {
  return {field(c, "lr").as_float(), field(c, "weight_decay").as_float(), static_cast<int64_t>(t + 1)};
}

struct Matrix {
  int64_t rows, cols;
  std::vector<float> param, exp_avg, exp_avg_sq, kronecker;
  Matrix(int64_t r, int64_t c, std::vector<float> p)
      : rows(r), cols(c), param(std::move(p)), exp_avg(size_t(r * c), 0.0f), exp_avg_sq(size_t(r * c), 0.0f),
        kronecker(size_t(mr::optim::soap_state_floats(r, c)), 0.0f) {}
  SoapParam slot(const std::vector<float>& grad) {
    SoapParam s;
    s.param = param.data();
    s.grad = grad.data();
    s.exp_avg = exp_avg.data();
    s.exp_avg_sq = exp_avg_sq.data();
    s.kronecker = kronecker.data();
    s.rows = rows;
    s.cols = cols;
    return s;
  }
  const float* q_left() const { return kronecker.data() + rows * rows + cols * cols; }
};

}  // namespace

TEST_CASE("SOAP's symmetric eigendecomposition: descending eigenvalues, orthonormal eigenvectors", "[soap]") {
  REQUIRE(cpu::have_lapack());
  for (int64_t n : {1, 2, 5, 17, 64}) {
    const std::vector<float> a = spd(n, static_cast<uint32_t>(n));
    std::vector<float> w(static_cast<size_t>(n)), q(static_cast<size_t>(n * n));
    cpu::symmetric_eigh(a.data(), n, w.data(), q.data());
    for (int64_t k = 1; k < n; ++k) CHECK(w[size_t(k - 1)] >= w[size_t(k)]);
    CHECK(orthogonality_error(q, n) < 1e-5);
    // A q_k = w_k q_k, relative to the largest eigenvalue.
    double worst = 0;
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < n; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += double(a[size_t(i * n + j)]) * q[size_t(j * n + k)];
        worst = std::max(worst, std::abs(acc - double(w[size_t(k)]) * q[size_t(i * n + k)]));
      }
    CHECK(worst / w[0] < 1e-5);
  }
}

TEST_CASE("SOAP's QR: orthonormal Q with Q R = A for an upper triangular R", "[soap]") {
  for (int64_t n : {1, 3, 8, 33}) {
    const std::vector<float> a = random_matrix(n, n, 7u + static_cast<uint32_t>(n));
    std::vector<float> q(static_cast<size_t>(n * n));
    cpu::qr_q(a.data(), n, q.data());
    CHECK(orthogonality_error(q, n) < 1e-5);
    // R = Q^T A must be upper triangular.
    double below = 0, scale = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) acc += double(q[size_t(k * n + i)]) * a[size_t(k * n + j)];
        scale = std::max(scale, std::abs(acc));
        if (i > j) below = std::max(below, std::abs(acc));
      }
    CHECK(below / scale < 1e-5);
  }
}

TEST_CASE("SOAP steps agree with PyTorch's (eigh and QR from LAPACK on both sides)", "[soap]") {
  REQUIRE(cpu::have_lapack());
  for (const mr::Value& c : field(golden(), "cases").as_list()) {
    const std::string name = field(c, "name").as_str();
    INFO(name);
    const int64_t rows = field(c, "rows").as_int(), cols = field(c, "cols").as_int();
    const SoapOptions o = case_options(c);
    Matrix m(rows, cols, floats(field(c, "param0")));
    const auto& grads = field(c, "grads").as_list();
    const auto& steps = field(c, "steps").as_list();
    REQUIRE(grads.size() == steps.size());
    for (size_t t = 0; t < steps.size(); ++t) {
      INFO("step " << t + 1);
      const std::vector<float> g = floats(grads[t]);
      const GroupHyper h = case_hyper(c, t);
      SoapParam s = m.slot(g);
      cpu::soap_step({&s, 1}, {&h, 1}, o);
      if (field(c, "params").as_bool()) {
        const double rel = worst_rel(m.param, floats(field(steps[t], "param")));
        // fp32 eigensolvers and GEMMs summing in other orders: the parameters agree to ~1e-6 of their scale, up to
        // 6.1e-6 on some OpenBLAS core types (measured over Haswell, SkylakeX, Zen, Sandybridge, Prescott at 1 and
        // 3 threads); each step moves an element by about lr = 0.01, so the update itself agrees to ~1e-3.
        CHECK(rel < 1e-5);
      }
      const std::vector<float> eig_l = floats(field(steps[t], "eig_L"));
      const std::vector<float> eig_r = floats(field(steps[t], "eig_R"));
      const float* el = mr::optim::kronecker_parts(m.kronecker.data(), rows, cols).eig_l;
      for (int64_t k = 0; k < rows; ++k) CHECK(el[k] == Approx(eig_l[size_t(k)]).epsilon(1e-4).margin(1e-5 * eig_l[0]));
      for (int64_t k = 0; k < cols; ++k)
        CHECK(el[rows + k] == Approx(eig_r[size_t(k)]).epsilon(1e-4).margin(1e-5 * eig_r[0]));
    }
  }
}

TEST_CASE("SOAP's first step is the polar factor of the gradient: Q_L^T G Q_R is diagonal, Adam makes it the signs",
          "[soap]") {
  // The first step's eigenbases are G's singular vectors (L ~ G G^T, R ~ G^T G), so the projected gradient is
  // diagonal and the inner Adam step with zero moments is sign(gp) there (eps far above the fp32 noise off the
  // diagonal): the update Q_L sign(diag) Q_R^T = U V^T, G's orthogonal polar factor, which is what Muon's
  // Newton-Schulz approximates. G = U1 diag(s) V1^T is built with known orthogonal U1, V1 and singular values
  // 1.0, 1.2, ..., 1.8 (well apart, so the eigenbases are accurate). eps 1e-2 is far above the fp32 noise off the
  // diagonal, and Adam's step on the diagonal is s / (s + eps): the update is U1 diag(s / (s + eps)) V1^T.
  const int64_t n = 5;
  std::vector<float> u1(size_t(n * n)), v1(size_t(n * n)), g(size_t(n * n), 0.0f);
  const std::vector<float> r1 = random_matrix(n, n, 21u), r2 = random_matrix(n, n, 22u);
  cpu::qr_q(r1.data(), n, u1.data());
  cpu::qr_q(r2.data(), n, v1.data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k)
        g[size_t(i * n + j)] += u1[size_t(i * n + k)] * (1.0f + 0.2f * float(k)) * v1[size_t(j * n + k)];
  for (bool kl : {true, false}) {
    Matrix m(n, n, std::vector<float>(size_t(n * n), 0.0f));
    GroupHyper h{1.0, 0.0, 1};
    SoapOptions o;
    o.eps = 1e-2;
    o.use_kl_shampoo = kl;
    SoapParam s = m.slot(g);
    cpu::soap_step({&s, 1}, {&h, 1}, o);
    double worst = 0;  // the param moved by -lr * P with lr 1
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t k = 0; k < n; ++k) {
          const double sk = 1.0 + 0.2 * double(k);
          want += double(u1[size_t(i * n + k)]) * (sk / (sk + 1e-2)) * v1[size_t(j * n + k)];
        }
        worst = std::max(worst, std::abs(-double(m.param[size_t(i * n + j)]) - want));
      }
    INFO("KL-Shampoo " << kl);
    CHECK(worst < 5e-4);  // P's entries are ~0.5; the eps term alone moves them by ~5e-3
  }
}

TEST_CASE("SOAP's options come from Megatron's OptimizerConfig as _default_adam_based_eopt_config_to_kwargs passes them",
          "[soap]") {
  mr::OptimizerConfig c;
  c.adam_beta1 = 0.8;
  c.adam_beta2 = 0.99;
  c.adam_eps = 1e-5;  // not SOAP's: its eps stays 1e-8
  c.soap_shampoo_beta = 0.9;
  c.soap_use_kl_shampoo = false;
  const SoapOptions o = mr::optim::soap_options(c);
  CHECK(o.beta1 == 0.8);
  CHECK(o.beta2 == 0.99);
  CHECK(o.eps == 1e-8);
  CHECK(o.shampoo_beta == 0.9);
  CHECK_FALSE(o.use_kl_shampoo);
  CHECK(o.correct_bias);
  CHECK(o.power_iter_steps == 1);
  CHECK(mr::optim::soap_state_floats(3, 5) == 2 * (9 + 25) + 3 + 5);
}

TEST_CASE("SOAP refuses matrices without buffers and groups out of range", "[soap]") {
  Matrix m(2, 2, {1, 2, 3, 4});
  std::vector<float> g(4, 1.0f);
  GroupHyper h;
  SoapParam s = m.slot(g);
  s.group = 3;
  CHECK_THROWS_AS(cpu::soap_step({&s, 1}, {&h, 1}, SoapOptions{}), std::invalid_argument);
  s.group = 0;
  s.kronecker = nullptr;
  CHECK_THROWS_AS(cpu::soap_step({&s, 1}, {&h, 1}, SoapOptions{}), std::invalid_argument);
}

TEST_CASE("CUDA SOAP steps agree with PyTorch's and with the CPU's", "[soap][gpu]") {
  MR_REQUIRE_GPU_OR_SKIP();
  REQUIRE(cpu::have_lapack());  // the CPU's step beside it
  namespace gpu = mr::optim::gpu;
  auto upload = [](const std::vector<float>& v) {
    gpu::DeviceBuffer b(v.size() * sizeof(float));
    b.upload(v.data(), b.bytes());
    return b;
  };
  auto download = [](const gpu::DeviceBuffer& b, size_t count) {
    std::vector<float> v(count);
    b.download(v.data(), count * sizeof(float));
    return v;
  };
  for (const mr::Value& c : field(golden(), "cases").as_list()) {
    const std::string name = field(c, "name").as_str();
    INFO(name);
    const int64_t rows = field(c, "rows").as_int(), cols = field(c, "cols").as_int();
    const SoapOptions o = case_options(c);
    Matrix host(rows, cols, floats(field(c, "param0")));  // the CPU's step, side by side
    gpu::DeviceBuffer dp = upload(host.param), dm = upload(host.exp_avg), dv = upload(host.exp_avg_sq),
                      dk = upload(host.kronecker);
    gpu::DeviceBuffer dbf(host.param.size() * sizeof(uint16_t));
    const auto& grads = field(c, "grads").as_list();
    const auto& steps = field(c, "steps").as_list();
    for (size_t t = 0; t < steps.size(); ++t) {
      INFO("step " << t + 1);
      const std::vector<float> g = floats(grads[t]);
      const GroupHyper h = case_hyper(c, t);
      SoapParam cs = host.slot(g);
      cpu::soap_step({&cs, 1}, {&h, 1}, o);
      gpu::DeviceBuffer dg = upload(g);
      SoapParam ds{dp.as<float>(), dg.as<float>(), dm.as<float>(), dv.as<float>(), dk.as<float>(), rows, cols, 0,
                   dbf.as<uint16_t>()};
      gpu::soap_step({&ds, 1}, {&h, 1}, o);
      const std::vector<float> param = download(dp, host.param.size());
      // cuSOLVER and cuBLAS against LAPACK and OpenBLAS: a bound ten times the CPU's against PyTorch (not yet
      // measured on a GPU: docs/device.md).
      // (Not where SOAP's own epsilon turns the eigensolver's last bits into other updates: "params" false.)
      if (field(c, "params").as_bool()) {
        CHECK(worst_rel(param, floats(field(steps[t], "param"))) < 1e-4);
        CHECK(worst_rel(param, host.param) < 1e-4);
      }
      std::vector<float> k = download(dk, host.kronecker.size());
      const float* el = mr::optim::kronecker_parts(k.data(), rows, cols).eig_l;
      const std::vector<float> eig_l = floats(field(steps[t], "eig_L"));
      const std::vector<float> eig_r = floats(field(steps[t], "eig_R"));
      for (int64_t i = 0; i < rows; ++i)
        CHECK(el[i] == Approx(eig_l[size_t(i)]).epsilon(1e-4).margin(1e-5 * eig_l[0]));
      for (int64_t i = 0; i < cols; ++i)
        CHECK(el[rows + i] == Approx(eig_r[size_t(i)]).epsilon(1e-4).margin(1e-5 * eig_r[0]));
      // The bf16 copy is the fp32 parameter rounded, element for element.
      std::vector<uint16_t> bf(host.param.size());
      dbf.download(bf.data(), bf.size() * sizeof(uint16_t));
      size_t off = 0;
      for (size_t i = 0; i < bf.size(); ++i) off += bf[i] != mr::optim::f32_to_bf16(param[i]);
      CHECK(off == 0);
    }
  }
}
