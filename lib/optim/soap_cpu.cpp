// SOAP on the CPU (optim/soap.h): the Kronecker factors, their eigenbases and the inner Adam of Emerging-Optimizers'
// SOAP.step, for one matrix at a time. The elementwise math is elementwise.h's (soap_adam_element, decay_element,
// muon_apply_element, lerp_); the matrix products go through cpu::gemm (CBLAS), eigh and QR through LAPACK.
#include "optim/soap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/dtype.h"
#include "optim/elementwise.h"
#include "optim/muon.h"  // cpu::gemm

#if MR_OPTIM_HAVE_LAPACK
// LAPACK's Fortran entry points (OpenBLAS exports them), with the hidden lengths of the character arguments.
extern "C" {
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);
}
#endif

namespace mr::optim {

SoapAdamConsts soap_adam_consts(const SoapOptions& o, int64_t step) {
  SoapAdamConsts c;
  c.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  const double t = static_cast<double>(step);
  c.bias_correction1 = o.correct_bias ? static_cast<float>(1.0 - std::pow(o.beta1, t)) : 1.0f;
  c.bias_correction2 = o.correct_bias ? static_cast<float>(1.0 - std::pow(o.beta2, t)) : 1.0f;
  c.eps = static_cast<float>(o.eps);
  return c;
}

std::vector<int64_t> descending_order(std::span<const float> e) {
  std::vector<int64_t> order(e.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return e[static_cast<size_t>(x)] > e[static_cast<size_t>(y)]; });
  return order;
}

float soap_factor_weight(const SoapOptions& o, int64_t step) {
  double sb = o.shampoo_beta;
  if (o.correct_bias) sb = 1.0 - (1.0 - sb) / (1.0 - std::pow(sb, static_cast<double>(step)));
  return static_cast<float>(1.0 - sb);
}

namespace cpu {

bool have_lapack() { return MR_OPTIM_HAVE_LAPACK != 0; }

namespace {

[[noreturn]] void no_lapack() {
  throw std::logic_error("SOAP needs LAPACK (ssyevd, sgeqrf, sorgqr); this build of mr_optim has none");
}

// Row-major products, C = op(A) op(B), of square or rectangular fp32 matrices.
void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  gemm(ta, tb, m, n, k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

void set_identity(float* q, int64_t n) {
  std::fill(q, q + n * n, 0.0f);
  for (int64_t i = 0; i < n; ++i) q[i * n + i] = 1.0f;
}

// x <- lerp(x, y, w) elementwise (torch's lerp_ with a scalar weight).
void lerp_into(float* x, const float* y, int64_t count, float w) {
  for (int64_t i = 0; i < count; ++i) x[i] = lerp_(x[i], y[i], w);
}

// KL-Shampoo's correction of one side: Q diag(s) Q^T with s_j = (1 / dim) * max(eigval_j, eps)^-1 (n x n).
void kl_correction(const float* q, const float* eig, int64_t n, int64_t dim, float eps, float* scaled, float* out) {
  const float inv_dim = static_cast<float>(1.0 / static_cast<double>(dim));
  for (int64_t j = 0; j < n; ++j) {
    const float s = inv_dim * (1.0f / std::max(eig[j], eps));  // clamp_min(eps) ** -1, then the 1/dim factor
    for (int64_t i = 0; i < n; ++i) scaled[i * n + j] = q[i * n + j] * s;
  }
  mul(false, true, n, n, n, scaled, q, out);
}

struct Work {
  std::vector<float> a, b, c, d;
  void fit(int64_t m, int64_t n) {
    const int64_t big = std::max(m, n);
    for (auto* v : {&a, &b, &c, &d}) v->resize(static_cast<size_t>(std::max(big * big, m * n)));
  }
};

// The matrix's eigenbasis and approximate eigenvalues by orthogonal iteration from its current basis (later steps):
// Q <- QR(F Q) `steps` times, eigenvalues diag(Q^T F Q), then both sorted in descending order.
void orthogonal_iteration(const float* f, float* q, float* eig, int64_t n, int steps, Work& w) {
  for (int s = 0; s < steps; ++s) {
    mul(false, false, n, n, n, f, q, w.a.data());  // F Q
    qr_q(w.a.data(), n, q);                        // re-orthogonalise
  }
  mul(true, false, n, n, n, q, f, w.a.data());  // Q^T F
  std::vector<float> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {  // (Q^T F)[i, :] . Q[:, i]
    double acc = 0.0;
    for (int64_t j = 0; j < n; ++j) acc += static_cast<double>(w.a[static_cast<size_t>(i * n + j)]) * q[j * n + i];
    e[static_cast<size_t>(i)] = static_cast<float>(acc);
  }
  const std::vector<int64_t> order = descending_order(e);
  std::copy(q, q + n * n, w.b.begin());
  for (int64_t k = 0; k < n; ++k) {
    const int64_t from = order[static_cast<size_t>(k)];
    eig[k] = e[static_cast<size_t>(from)];
    for (int64_t i = 0; i < n; ++i) q[i * n + k] = w.b[static_cast<size_t>(i * n + from)];
  }
}

void soap_matrix(const SoapParam& p, const GroupHyper& g, const SoapOptions& o, Work& w) {
  const int64_t m = p.rows, n = p.cols, mn = m * n;
  const auto [L, R, QL, QR, eL, eR] = kronecker_parts(p.kronecker, m, n);
  const float* grad = p.grad;
  const int64_t t = g.step;  // 1-based: SOAP's state["step"] + 1
  const float eps = static_cast<float>(o.eps);
  // SOAP's initial eigenbases are the identity (the KL update of the first step reads them).
  if (t == 1) set_identity(QL, m), set_identity(QR, n);

  // 1. The Kronecker factors' moving average, with shampoo_beta's bias correction 1 - (1 - b) / (1 - b^t).
  const float weight = soap_factor_weight(o, t);
  if (o.use_kl_shampoo) {
    // KL-Shampoo: L <- lerp(L, G (Q_R diag(1/(n max(eig_R, eps))) Q_R^T) G^T), R likewise with the left side; both
    // corrections from the eigenbases and eigenvalues of the previous step.
    kl_correction(QL, eL, m, m, eps, w.a.data(), w.b.data());     // corr_L (m x m)
    mul(true, false, n, m, m, grad, w.b.data(), w.c.data());      // G^T corr_L (n x m)
    mul(false, false, n, n, m, w.c.data(), grad, w.d.data());     // G^T corr_L G (n x n): R's update
    kl_correction(QR, eR, n, n, eps, w.a.data(), w.b.data());     // corr_R (n x n)
    mul(false, false, m, n, n, grad, w.b.data(), w.c.data());     // G corr_R (m x n)
    lerp_into(R, w.d.data(), n * n, weight);
    mul(false, true, m, m, n, w.c.data(), grad, w.d.data());      // G corr_R G^T (m x m): L's update
    lerp_into(L, w.d.data(), m * m, weight);
  } else {
    mul(false, true, m, m, n, grad, grad, w.a.data());  // G G^T
    lerp_into(L, w.a.data(), m * m, weight);
    mul(true, false, n, n, m, grad, grad, w.a.data());  // G^T G
    lerp_into(R, w.a.data(), n * n, weight);
  }

  // 2. The moments follow the basis: exp_avg out of the old eigenbasis (Q_L M Q_R^T), into the new one after the
  //    refresh (Q_L^T M Q_R); exp_avg_sq is kept as it is, as SOAP keeps it.
  mul(false, false, m, n, m, QL, p.exp_avg, w.a.data());
  mul(false, true, m, n, n, w.a.data(), QR, p.exp_avg);
  if (t == 1) {  // the first refresh is a full eigendecomposition
    symmetric_eigh(L, m, eL, QL);
    symmetric_eigh(R, n, eR, QR);
  } else {
    orthogonal_iteration(L, QL, eL, m, o.power_iter_steps, w);
    orthogonal_iteration(R, QR, eR, n, o.power_iter_steps, w);
  }
  mul(true, false, m, n, m, QL, p.exp_avg, w.a.data());
  mul(false, false, m, n, n, w.a.data(), QR, p.exp_avg);

  // 3. Decoupled weight decay on the parameter.
  if (g.weight_decay != 0.0) {
    const float neg_wd_lr = static_cast<float>(-g.weight_decay * g.lr);
    for (int64_t i = 0; i < mn; ++i) decay_element(p.param[i], neg_wd_lr);
  }

  // 4. Adam on the projected gradient Q_L^T G Q_R, the direction projected back out, the step.
  mul(true, false, m, n, m, QL, grad, w.a.data());
  mul(false, false, m, n, n, w.a.data(), QR, w.b.data());
  const SoapAdamConsts c = soap_adam_consts(o, t);
  for (int64_t i = 0; i < mn; ++i)
    w.b[static_cast<size_t>(i)] = soap_adam_element(w.b[static_cast<size_t>(i)], p.exp_avg[i], p.exp_avg_sq[i], c);
  mul(false, false, m, n, m, QL, w.b.data(), w.a.data());
  mul(false, true, m, n, n, w.a.data(), QR, w.b.data());
  const float neg_lr = static_cast<float>(-g.lr);
  for (int64_t i = 0; i < mn; ++i) {
    muon_apply_element(p.param[i], w.b[static_cast<size_t>(i)], neg_lr);
    if (p.param_bf16) p.param_bf16[i] = f32_to_bf16(p.param[i]);
  }
}

}  // namespace

#if MR_OPTIM_HAVE_LAPACK
namespace {
// LAPACK's eigensolver and QR call OpenBLAS's level-2 kernels (symv, gemv), which split their sums over the threads:
// their bits would depend on the thread count, and SOAP's first step turns last-bit differences into other updates
// (docs/optim.md). One OpenBLAS thread while LAPACK runs keeps the run's bits the same at any thread count. The
// setting is process-wide, which is right here: each rank is its own process and steps its matrices in turn.
class OneBlasThread {
 public:
  OneBlasThread() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~OneBlasThread() { openblas_set_num_threads(saved_); }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_;
};
}  // namespace
#endif

void symmetric_eigh(const float* a, int64_t n, float* w, float* q) {
#if MR_OPTIM_HAVE_LAPACK
  const OneBlasThread one;
  const int nn = static_cast<int>(n);
  // The row-major buffer read as column-major is its transpose; "U" there is the logical lower triangle, the one
  // torch.linalg.eigh reads (UPLO='L').
  std::vector<float> col(a, a + n * n);
  std::vector<float> wa(static_cast<size_t>(n));
  // syevd's workspace: the size query answers in a float, which can round below the minimum for large n (a 3000 x
  // 3000 factor needs 18,018,001, an odd number past 2^24 that no float holds): never less than LAPACK's documented
  // minimum for JOBZ='V', 1 + 6n + 2n^2 and 3 + 5n.
  const int64_t min_lwork = 1 + 6 * n + 2 * n * n;
  const int64_t min_liwork = 3 + 5 * n;
  if (min_lwork > std::numeric_limits<int>::max())
    throw std::runtime_error("SOAP: a " + std::to_string(n) + " x " + std::to_string(n) +
                             " Kronecker factor is past what LAPACK's 32-bit workspace sizes can eigendecompose");
  auto sizes = [&](double wq, int iwq, int& lwork, int& liwork) {
    lwork = static_cast<int>(std::max<double>(std::ceil(wq), static_cast<double>(min_lwork)));
    liwork = std::max<int>(iwq, static_cast<int>(min_liwork));
  };
  auto bad_argument = [](int info) {
    return std::logic_error("SOAP: LAPACK's eigensolver rejected argument " + std::to_string(-info));
  };
  int info = 0, lwork = -1, liwork = -1, iwq = 0;
  float wq = 0.0f;
  ssyevd_("V", "U", &nn, col.data(), &nn, wa.data(), &wq, &lwork, &iwq, &liwork, &info, 1, 1);
  if (info < 0) throw bad_argument(info);
  sizes(wq, iwq, lwork, liwork);
  std::vector<float> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  ssyevd_("V", "U", &nn, col.data(), &nn, wa.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  if (info < 0) throw bad_argument(info);
  if (info > 0) {  // fp32 did not converge: torch's eigh_with_fallback goes once more in double
    std::vector<double> dcol(a, a + n * n), dw(static_cast<size_t>(n));
    double dq = 0.0;
    lwork = -1, liwork = -1;
    dsyevd_("V", "U", &nn, dcol.data(), &nn, dw.data(), &dq, &lwork, &iwq, &liwork, &info, 1, 1);
    if (info < 0) throw bad_argument(info);
    sizes(dq, iwq, lwork, liwork);
    std::vector<double> dwork(static_cast<size_t>(lwork));
    iwork.assign(static_cast<size_t>(liwork), 0);
    dsyevd_("V", "U", &nn, dcol.data(), &nn, dw.data(), dwork.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
    if (info < 0) throw bad_argument(info);
    if (info > 0)
      throw std::runtime_error("SOAP: the eigendecomposition of a " + std::to_string(n) + " x " + std::to_string(n) +
                               " Kronecker factor did not converge in fp32 or fp64 (LAPACK info " +
                               std::to_string(info) + "); the factor may hold non-finite values");
    for (int64_t i = 0; i < n * n; ++i) col[static_cast<size_t>(i)] = static_cast<float>(dcol[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < n; ++i) wa[static_cast<size_t>(i)] = static_cast<float>(dw[static_cast<size_t>(i)]);
  }
  // LAPACK: ascending eigenvalues, eigenvector j in column j of the column-major result. Descending, as columns of
  // the row-major q.
  for (int64_t k = 0; k < n; ++k) {
    const int64_t from = n - 1 - k;
    w[k] = wa[static_cast<size_t>(from)];
    for (int64_t i = 0; i < n; ++i) q[i * n + k] = col[static_cast<size_t>(from * n + i)];
  }
#else
  (void)a, (void)n, (void)w, (void)q;
  no_lapack();
#endif
}

void qr_q(const float* a, int64_t n, float* q) {
#if MR_OPTIM_HAVE_LAPACK
  const OneBlasThread one;
  const int nn = static_cast<int>(n);
  std::vector<float> col(static_cast<size_t>(n * n)), tau(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) col[static_cast<size_t>(j * n + i)] = a[i * n + j];
  int info = 0, lwork = -1;
  float wq = 0.0f;
  sgeqrf_(&nn, &nn, col.data(), &nn, tau.data(), &wq, &lwork, &info);
  lwork = std::max(1, static_cast<int>(wq));
  std::vector<float> work(static_cast<size_t>(lwork));
  sgeqrf_(&nn, &nn, col.data(), &nn, tau.data(), work.data(), &lwork, &info);
  if (info == 0) {
    lwork = -1;
    sorgqr_(&nn, &nn, &nn, col.data(), &nn, tau.data(), &wq, &lwork, &info);
    lwork = std::max(1, static_cast<int>(wq));
    work.resize(static_cast<size_t>(lwork));
    sorgqr_(&nn, &nn, &nn, col.data(), &nn, tau.data(), work.data(), &lwork, &info);
  }
  if (info != 0) throw std::runtime_error("SOAP: LAPACK's QR failed (info " + std::to_string(info) + ")");
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) q[i * n + j] = col[static_cast<size_t>(j * n + i)];
#else
  (void)a, (void)n, (void)q;
  no_lapack();
#endif
}

void soap_step(std::span<const SoapParam> params, std::span<const GroupHyper> groups, const SoapOptions& o) {
  if (!have_lapack()) no_lapack();
  Work w;
  for (const SoapParam& p : params) {
    if (p.rows <= 0 || p.cols <= 0 || !p.param || !p.grad || !p.exp_avg || !p.exp_avg_sq || !p.kronecker)
      throw std::invalid_argument("soap_step: a matrix without its buffers or with an empty shape");
    if (p.group < 0 || static_cast<size_t>(p.group) >= groups.size())
      throw std::invalid_argument("soap_step: parameter group " + std::to_string(p.group) + " out of range");
    w.fit(p.rows, p.cols);
    soap_matrix(p, groups[static_cast<size_t>(p.group)], o, w);
  }
}

}  // namespace cpu
}  // namespace mr::optim
