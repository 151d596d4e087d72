// The CUDA SOAP step (gpu.h): cpu::soap_step's algorithm (soap_cpu.cpp) on device buffers, step for step. GEMMs
// with cuBLAS in fp32 (no TF32, as torch's default fp32 matmul), the first step's eigendecomposition (syevd) and
// the later steps' QR (geqrf + orgqr) with cuSOLVER, the elementwise parts elementwise.h's functions compiled with
// -fmad=false. It agrees with the CPU step to bounds, not bits: cuSOLVER and LAPACK, cuBLAS and OpenBLAS, sum in
// other orders (tests/optim/soap_test.cpp, "[soap][gpu]").
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/elementwise.h"
#include "optim/gpu.h"
#include "optim/gpu_device.cuh"
#include "optim/soap.h"

namespace mr::optim::gpu {
namespace {

using detail::blas;
using detail::check;
using detail::check_launch;
using detail::grid_for;
using detail::kThreads;
using detail::Scratch;
using detail::scratch;
namespace geom = ::mr::optim::geom;

void check(cusolverStatus_t s, const char* what) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuSOLVER error in ") + what + ": status " + std::to_string(static_cast<int>(s)));
}

// This thread's cuSOLVER handle (created on first use, kept; on the legacy default stream, as cuBLAS's).
cusolverDnHandle_t solver() {
  static thread_local cusolverDnHandle_t h = [] {
    cusolverDnHandle_t x = nullptr;
    check(cusolverDnCreate(&x), "cusolverDnCreate");
    return x;
  }();
  return h;
}

int as_int(int64_t v, const char* what) {
  if (v > std::numeric_limits<int>::max())
    throw std::runtime_error(std::string("SOAP on the GPU: ") + what + " is past cuSOLVER's 32-bit sizes");
  return static_cast<int>(v);
}

// ---- elementwise kernels (grid-stride over `count`) ------------------------------------------------------------

#define MR_FOR_EACH(i, count)                                                          \
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < (count); \
       i += geom::grid_stride_step(gridDim.x, blockDim.x))

__global__ void identity_kernel(float* q, int64_t n) {
  MR_FOR_EACH(i, n * n) q[i] = (i / n == i % n) ? 1.0f : 0.0f;
}
// KL-Shampoo's scaled basis: scaled[i, j] = q[i, j] * (1 / dim) * max(eig_j, eps)^-1 (the CPU's kl_correction; the
// max written as it is there, so a NaN eigenvalue stays NaN).
__global__ void kl_scale_kernel(const float* q, const float* eig, int64_t n, float inv_dim, float eps, float* scaled) {
  MR_FOR_EACH(i, n * n) {
    const float e = eig[i % n];
    const float s = inv_dim * (1.0f / (e < eps ? eps : e));
    scaled[i] = q[i] * s;
  }
}
__global__ void lerp_kernel(float* x, const float* y, int64_t count, float w) {
  MR_FOR_EACH(i, count) x[i] = lerp_(x[i], y[i], w);
}
__global__ void decay_kernel(float* p, int64_t count, float neg_wd_lr) {
  MR_FOR_EACH(i, count) decay_element(p[i], neg_wd_lr);
}
// The inner Adam on the projected gradient, in place: gp <- its Adam direction, the moments updated.
__global__ void adam_kernel(float* gp, float* m, float* v, int64_t count, SoapAdamConsts c) {
  MR_FOR_EACH(i, count) {
    float mi = m[i], vi = v[i];
    gp[i] = soap_adam_element(gp[i], mi, vi, c);
    m[i] = mi;
    v[i] = vi;
  }
}
__global__ void apply_kernel(float* p, const float* update, uint16_t* p_bf16, int64_t count, float neg_lr) {
  MR_FOR_EACH(i, count) {
    float pi = p[i];
    muon_apply_element(pi, update[i], neg_lr);
    p[i] = pi;
    if (p_bf16) p_bf16[i] = f32_to_bf16(pi);
  }
}
// t = a^T (n x n): the row-major buffer and LAPACK's column-major one.
__global__ void transpose_kernel(const float* a, float* t, int64_t n) {
  MR_FOR_EACH(i, n * n) t[(i % n) * n + i / n] = a[i];
}
__global__ void to_double_kernel(const float* a, double* d, int64_t count) {
  MR_FOR_EACH(i, count) d[i] = static_cast<double>(a[i]);
}
__global__ void to_float_kernel(const double* d, float* a, int64_t count) {
  MR_FOR_EACH(i, count) a[i] = static_cast<float>(d[i]);
}
// syevd's result (ascending eigenvalues wa, eigenvector j in column j of the column-major `col`) in descending
// order: w[k] = wa[n-1-k], q[:, k] (row-major) = that eigenvector.
__global__ void flip_kernel(const float* col, const float* wa, int64_t n, float* q, float* w) {
  MR_FOR_EACH(i, n * n) {
    const int64_t r = i / n, k = i % n, from = n - 1 - k;
    q[i] = col[from * n + r];
    if (r == 0) w[k] = wa[from];
  }
}
// e_i = (Q^T F)[i, :] . Q[:, i], summed in double in j's order (the CPU's loop): one thread per i.
__global__ void rayleigh_kernel(const float* qtf, const float* q, int64_t n, float* e) {
  MR_FOR_EACH(i, n) {
    double acc = 0.0;
    for (int64_t j = 0; j < n; ++j) acc += static_cast<double>(qtf[i * n + j]) * static_cast<double>(q[j * n + i]);
    e[i] = static_cast<float>(acc);
  }
}
// q[:, k] <- old[:, order[k]], eig[k] <- e[order[k]].
__global__ void permute_kernel(const float* old, const float* e, const int64_t* order, int64_t n, float* q, float* eig) {
  MR_FOR_EACH(i, n * n) {
    const int64_t r = i / n, k = i % n;
    q[i] = old[r * n + order[k]];
    if (r == 0) eig[k] = e[order[k]];
  }
}
#undef MR_FOR_EACH

// ---- building blocks -----------------------------------------------------------------------------------------

// Row-major C (m x n) = op(A) op(B), fp32: column-major C^T = op(B)^T op(A)^T.
void mul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm(blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(n, "a matrix"),
                    as_int(m, "a matrix"), as_int(k, "a matrix"), &one, b, as_int(tb ? k : n, "a matrix"), a,
                    as_int(ta ? m : k, "a matrix"), &zero, c, as_int(n, "a matrix")),
        "cublasSgemm (SOAP)");
}

int device_info(const int* dev_info) {
  int info = 0;
  check(cudaMemcpy(&info, dev_info, sizeof info, cudaMemcpyDeviceToHost), "cudaMemcpy (cuSOLVER's info)");
  return info;
}

// Descending eigenvalues into w and the eigenvectors as the columns of row-major q, of the symmetric row-major a
// (cpu::symmetric_eigh: the same triangle, and once more in double where fp32 does not converge).
void symmetric_eigh(const float* a, int64_t n, float* w, float* q) {
  const int nn = as_int(n, "a Kronecker factor");
  // syevd's workspace is at least 1 + 6n + 2n^2 elements, counted in an int (as the CPU's LAPACK).
  (void)as_int(1 + 6 * n + 2 * n * n, "the eigensolver's workspace of a Kronecker factor");
  const size_t nsq = static_cast<size_t>(n * n);
  auto* col = static_cast<float*>(scratch(Scratch::SoapSolveA, nsq * sizeof(float)));
  auto* wa = static_cast<float*>(scratch(Scratch::SoapSolveW, static_cast<size_t>(n) * sizeof(float)));
  auto* info = static_cast<int*>(scratch(Scratch::SoapInfo, sizeof(int)));
  check(cudaMemcpy(col, a, nsq * sizeof(float), cudaMemcpyDeviceToDevice), "cudaMemcpy (SOAP eigh)");
  // The row-major buffer read as column-major is its transpose: "upper" there is the logical lower triangle,
  // torch.linalg.eigh's UPLO='L'.
  const auto jobz = CUSOLVER_EIG_MODE_VECTOR;
  const auto uplo = CUBLAS_FILL_MODE_UPPER;
  int lwork = 0;
  check(cusolverDnSsyevd_bufferSize(solver(), jobz, uplo, nn, col, nn, wa, &lwork), "cusolverDnSsyevd_bufferSize");
  if (lwork < 0) throw std::runtime_error("SOAP on the GPU: cuSOLVER's eigensolver workspace size overflowed");
  auto* work = static_cast<float*>(scratch(Scratch::SoapSolveWork, static_cast<size_t>(std::max(lwork, 1)) * sizeof(float)));
  check(cusolverDnSsyevd(solver(), jobz, uplo, nn, col, nn, wa, work, lwork, info), "cusolverDnSsyevd");
  int status = device_info(info);
  if (status < 0) throw std::logic_error("SOAP: cuSOLVER's eigensolver rejected argument " + std::to_string(-status));
  if (status > 0) {  // fp32 did not converge: once more in double (torch's eigh_with_fallback)
    auto* dcol = static_cast<double*>(scratch(Scratch::SoapSolveDouble, (nsq + static_cast<size_t>(n)) * sizeof(double)));
    double* dw = dcol + nsq;
    to_double_kernel<<<grid_for(n * n), kThreads>>>(a, dcol, n * n);
    check_launch("SOAP eigh to double");
    check(cusolverDnDsyevd_bufferSize(solver(), jobz, uplo, nn, dcol, nn, dw, &lwork), "cusolverDnDsyevd_bufferSize");
    if (lwork < 0) throw std::runtime_error("SOAP on the GPU: cuSOLVER's eigensolver workspace size overflowed");
    auto* dwork = static_cast<double*>(
        scratch(Scratch::SoapSolveWork, static_cast<size_t>(std::max(lwork, 1)) * sizeof(double)));
    check(cusolverDnDsyevd(solver(), jobz, uplo, nn, dcol, nn, dw, dwork, lwork, info), "cusolverDnDsyevd");
    status = device_info(info);
    if (status < 0) throw std::logic_error("SOAP: cuSOLVER's eigensolver rejected argument " + std::to_string(-status));
    if (status > 0)
      throw std::runtime_error("SOAP: the eigendecomposition of a " + std::to_string(n) + " x " + std::to_string(n) +
                               " Kronecker factor did not converge in fp32 or fp64 (cuSOLVER info " +
                               std::to_string(status) + "); the factor may hold non-finite values");
    to_float_kernel<<<grid_for(n * n), kThreads>>>(dcol, col, n * n);
    check_launch("SOAP eigh to float");
    to_float_kernel<<<grid_for(n), kThreads>>>(dw, wa, n);
    check_launch("SOAP eigh eigenvalues to float");
  }
  flip_kernel<<<grid_for(n * n), kThreads>>>(col, wa, n, q, w);
  check_launch("SOAP eigh flip");
}

// Q of the QR decomposition of row-major n x n a into q (cpu::qr_q: Householder, LAPACK's signs).
void qr_q(const float* a, int64_t n, float* q) {
  const int nn = as_int(n, "a Kronecker factor");
  auto* col = static_cast<float*>(scratch(Scratch::SoapSolveA, static_cast<size_t>(n * n) * sizeof(float)));
  auto* tau = static_cast<float*>(scratch(Scratch::SoapSolveW, static_cast<size_t>(n) * sizeof(float)));
  auto* info = static_cast<int*>(scratch(Scratch::SoapInfo, sizeof(int)));
  transpose_kernel<<<grid_for(n * n), kThreads>>>(a, col, n);
  check_launch("SOAP QR transpose");
  int lwork = 0, lwork2 = 0;
  check(cusolverDnSgeqrf_bufferSize(solver(), nn, nn, col, nn, &lwork), "cusolverDnSgeqrf_bufferSize");
  check(cusolverDnSorgqr_bufferSize(solver(), nn, nn, nn, col, nn, tau, &lwork2), "cusolverDnSorgqr_bufferSize");
  if (lwork < 0 || lwork2 < 0) throw std::runtime_error("SOAP on the GPU: cuSOLVER's QR workspace size overflowed");
  lwork = std::max({lwork, lwork2, 1});
  auto* work = static_cast<float*>(scratch(Scratch::SoapSolveWork, static_cast<size_t>(lwork) * sizeof(float)));
  check(cusolverDnSgeqrf(solver(), nn, nn, col, nn, tau, work, lwork, info), "cusolverDnSgeqrf");
  int status = device_info(info);
  if (status == 0) {
    check(cusolverDnSorgqr(solver(), nn, nn, nn, col, nn, tau, work, lwork, info), "cusolverDnSorgqr");
    status = device_info(info);
  }
  if (status != 0) throw std::runtime_error("SOAP: cuSOLVER's QR failed (info " + std::to_string(status) + ")");
  transpose_kernel<<<grid_for(n * n), kThreads>>>(col, q, n);
  check_launch("SOAP QR transpose back");
}

// Orthogonal iteration from the current basis (cpu's orthogonal_iteration): Q <- QR(F Q) `steps` times, eigenvalues
// diag(Q^T F Q), both sorted in descending order (descending_order, on the host, as the CPU's).
void orthogonal_iteration(const float* f, float* q, float* eig, int64_t n, int steps, float* tmp, float* tmp2) {
  for (int s = 0; s < steps; ++s) {
    mul(false, false, n, n, n, f, q, tmp);  // F Q
    qr_q(tmp, n, q);                        // re-orthogonalise
  }
  mul(true, false, n, n, n, q, f, tmp);  // Q^T F
  auto* e = static_cast<float*>(scratch(Scratch::SoapSolveW, static_cast<size_t>(n) * sizeof(float)));
  rayleigh_kernel<<<grid_for(n), kThreads>>>(tmp, q, n, e);
  check_launch("SOAP Rayleigh quotients");
  std::vector<float> he(static_cast<size_t>(n));
  check(cudaMemcpy(he.data(), e, he.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy (SOAP eigenvalues)");
  const std::vector<int64_t> order = descending_order(he);
  auto* dorder = static_cast<int64_t*>(scratch(Scratch::SoapOrder, order.size() * sizeof(int64_t)));
  check(cudaMemcpy(dorder, order.data(), order.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
        "cudaMemcpy (SOAP order)");
  check(cudaMemcpy(tmp2, q, static_cast<size_t>(n * n) * sizeof(float), cudaMemcpyDeviceToDevice), "cudaMemcpy (SOAP basis)");
  permute_kernel<<<grid_for(n * n), kThreads>>>(tmp2, e, dorder, n, q, eig);
  check_launch("SOAP sort the basis");
}

// One matrix's step: cpu's soap_matrix, with the four work areas on the device.
void soap_matrix(const SoapParam& p, const GroupHyper& g, const SoapOptions& o) {
  const int64_t m = p.rows, n = p.cols, mn = m * n;
  const size_t work = static_cast<size_t>(std::max(std::max(m, n) * std::max(m, n), mn)) * sizeof(float);
  auto* wa = static_cast<float*>(scratch(Scratch::SoapA, work));
  auto* wb = static_cast<float*>(scratch(Scratch::SoapB, work));
  auto* wc = static_cast<float*>(scratch(Scratch::SoapC, work));
  auto* wd = static_cast<float*>(scratch(Scratch::SoapD, work));
  const auto [L, R, QL, QR, eL, eR] = kronecker_parts(p.kronecker, m, n);
  const float* grad = p.grad;
  const int64_t t = g.step;
  const float eps = static_cast<float>(o.eps);
  if (t == 1) {  // SOAP's initial eigenbases are the identity (the KL update of the first step reads them)
    identity_kernel<<<grid_for(m * m), kThreads>>>(QL, m);
    identity_kernel<<<grid_for(n * n), kThreads>>>(QR, n);
    check_launch("SOAP identity");
  }
  // 1. The Kronecker factors' moving average, with shampoo_beta's bias correction.
  const float weight = soap_factor_weight(o, t);
  auto lerp = [&](float* x, const float* y, int64_t count) {
    lerp_kernel<<<grid_for(count), kThreads>>>(x, y, count, weight);
    check_launch("SOAP factor average");
  };
  auto kl_correction = [&](const float* q, const float* eig, int64_t k, float* scaled, float* out) {
    kl_scale_kernel<<<grid_for(k * k), kThreads>>>(q, eig, k, static_cast<float>(1.0 / static_cast<double>(k)), eps,
                                                    scaled);
    check_launch("SOAP KL correction");
    mul(false, true, k, k, k, scaled, q, out);
  };
  if (o.use_kl_shampoo) {
    kl_correction(QL, eL, m, wa, wb);         // corr_L (m x m)
    mul(true, false, n, m, m, grad, wb, wc);  // G^T corr_L (n x m)
    mul(false, false, n, n, m, wc, grad, wd); // G^T corr_L G: R's update
    kl_correction(QR, eR, n, wa, wb);         // corr_R (n x n)
    mul(false, false, m, n, n, grad, wb, wc); // G corr_R (m x n)
    lerp(R, wd, n * n);
    mul(false, true, m, m, n, wc, grad, wd);  // G corr_R G^T: L's update
    lerp(L, wd, m * m);
  } else {
    mul(false, true, m, m, n, grad, grad, wa);  // G G^T
    lerp(L, wa, m * m);
    mul(true, false, n, n, m, grad, grad, wa);  // G^T G
    lerp(R, wa, n * n);
  }
  // 2. exp_avg out of the old eigenbasis, the bases refreshed, exp_avg into the new one.
  mul(false, false, m, n, m, QL, p.exp_avg, wa);
  mul(false, true, m, n, n, wa, QR, p.exp_avg);
  if (t == 1) {
    symmetric_eigh(L, m, eL, QL);
    symmetric_eigh(R, n, eR, QR);
  } else {
    orthogonal_iteration(L, QL, eL, m, o.power_iter_steps, wa, wb);
    orthogonal_iteration(R, QR, eR, n, o.power_iter_steps, wa, wb);
  }
  mul(true, false, m, n, m, QL, p.exp_avg, wa);
  mul(false, false, m, n, n, wa, QR, p.exp_avg);
  // 3. Decoupled weight decay.
  if (g.weight_decay != 0.0) {
    decay_kernel<<<grid_for(mn), kThreads>>>(p.param, mn, static_cast<float>(-g.weight_decay * g.lr));
    check_launch("SOAP weight decay");
  }
  // 4. Adam on Q_L^T G Q_R, the direction projected back out, the step.
  mul(true, false, m, n, m, QL, grad, wa);
  mul(false, false, m, n, n, wa, QR, wb);
  adam_kernel<<<grid_for(mn), kThreads>>>(wb, p.exp_avg, p.exp_avg_sq, mn, soap_adam_consts(o, t));
  check_launch("SOAP inner Adam");
  mul(false, false, m, n, m, QL, wb, wa);
  mul(false, true, m, n, n, wa, QR, wb);
  apply_kernel<<<grid_for(mn), kThreads>>>(p.param, wb, p.param_bf16, mn, static_cast<float>(-g.lr));
  check_launch("SOAP apply");
}

}  // namespace

void soap_step(std::span<const SoapParam> params, std::span<const GroupHyper> groups, const SoapOptions& o) {
  for (const SoapParam& p : params) {
    if (p.rows <= 0 || p.cols <= 0 || !p.param || !p.grad || !p.exp_avg || !p.exp_avg_sq || !p.kronecker)
      throw std::invalid_argument("gpu::soap_step: a matrix without its buffers or with an empty shape");
    if (p.group < 0 || static_cast<size_t>(p.group) >= groups.size())
      throw std::invalid_argument("gpu::soap_step: parameter group " + std::to_string(p.group) + " out of range");
    soap_matrix(p, groups[static_cast<size_t>(p.group)], o);
  }
}

}  // namespace mr::optim::gpu
