// SOAP: Shampoo's Kronecker-factored preconditioner with Adam run in its eigenbasis (--optimizer soap). Megatron
// builds it from NVIDIA Emerging-Optimizers' SOAP with the arguments _default_adam_based_eopt_config_to_kwargs gives
// (see soap_options in optim/config.h); this is that step on raw fp32 buffers, row-major matrices, on the CPU.
// GEMMs through CBLAS, the symmetric eigendecomposition and the QR through LAPACK (OpenBLAS), as torch's CPU
// eigh and qr do. docs/optim.md has the semantics and their sources.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optim/kernels.h"
#include "optim/optimizer_table.h"

namespace mr::optim {

// What SOAP's constructor receives from Megatron. Only the betas come from flags (--adam-beta1/2); shampoo_beta and
// use_kl_shampoo are OptimizerConfig fields without a flag; eps, nesterov, correct_bias, power_iter_steps and
// max_update_rms keep SOAP's own defaults (no OptimizerConfig field has their names).
struct SoapOptions {
  double beta1 = 0.9, beta2 = 0.95;  // the inner Adam's betas
  double shampoo_beta = 0.95;        // the Kronecker factors' moving average
  double eps = 1e-8;                 // the inner Adam's epsilon, and KL-Shampoo's eigenvalue floor
  bool use_kl_shampoo = true;        // KL-Shampoo's factor update (arXiv 2509.03378) instead of G G^T, G^T G
  bool correct_bias = true;          // the inner Adam's bias correction and the shampoo_beta correction
  int power_iter_steps = 1;          // orthogonal-iteration rounds per eigenbasis refresh (after the first step)
};

// One SOAP matrix (a 2-D parameter, or this rank's tensor-parallel shard of one: Megatron hands SOAP the local
// shard), rows m x cols n. The preconditioner state is `kronecker`, soap_state_floats(m, n) floats laid out as
// L (m x m), R (n x n), Q_L (m x m), Q_R (n x n), eigvals_L (m), eigvals_R (n): all zero before the first step
// (SOAP starts Q_L, Q_R at the identity: the first step sets them so before its KL-Shampoo update reads them).
struct SoapParam {
  float* param = nullptr;        // fp32 (master) parameter
  const float* grad = nullptr;   // fp32 gradient
  float* exp_avg = nullptr;      // the inner Adam's moments, in the eigenbasis (m x n), zero before the first step
  float* exp_avg_sq = nullptr;
  float* kronecker = nullptr;    // soap_state_floats(rows, cols) floats
  int64_t rows = 0, cols = 0;
  int32_t group = 0;
  uint16_t* param_bf16 = nullptr;  // optional: also write the updated param rounded to bf16
};

constexpr int64_t soap_state_floats(int64_t rows, int64_t cols) { return kronecker_floats(rows, cols); }

// The parts of one matrix's preconditioner inside SoapParam::kronecker (rows m, cols n), in their order.
struct KroneckerParts {
  float *L, *R, *QL, *QR, *eig_l, *eig_r;
};
constexpr KroneckerParts kronecker_parts(float* k, int64_t m, int64_t n) {
  float* R = k + m * m;
  float* QL = R + n * n;
  float* QR = QL + m * m;
  float* eig_l = QR + n * n;
  return {k, R, QL, QR, eig_l, eig_l + m};
}

// The weight of step `step`'s update in the Kronecker factors' moving average (lerp's weight, 1 - beta): with
// correct_bias, shampoo_beta's bias correction beta = 1 - (1 - b) / (1 - b^t), computed in double.
float soap_factor_weight(const SoapOptions& o, int64_t step);

// The indices of `e` ordered by descending value, ties in index order (a stable sort): how orthogonal iteration
// orders its eigenvalues and basis columns, on the CPU and the GPU alike.
std::vector<int64_t> descending_order(std::span<const float> e);

// The fp32 scalars of the inner Adam (elementwise.h's soap_adam_element) for 1-based step `step`.
SoapAdamConsts soap_adam_consts(const SoapOptions& o, int64_t step);

namespace cpu {

// Whether this build has LAPACK (ssyevd, sgeqrf, sorgqr): without it soap_step throws std::logic_error and the
// training run refuses --optimizer soap (run/run_support.h).
bool have_lapack();

// One SOAP step over `params` (their lr, weight decay and 1-based step from `groups`; step 1 computes the eigenbases
// by eigh, later steps by orthogonal iteration, as SOAP's own step counter decides).
void soap_step(std::span<const SoapParam> params, std::span<const GroupHyper> groups, const SoapOptions& o);

// The building blocks, for tests. Row-major n x n `a` (symmetric): its eigenvalues in descending order into `w`
// and the eigenvectors as the columns of `q` (torch.linalg.eigh, flipped; retried in double where fp32 fails).
void symmetric_eigh(const float* a, int64_t n, float* w, float* q);
// Q of the QR decomposition of row-major n x n `a` into `q` (torch.linalg.qr(a).Q: Householder, LAPACK's signs).
void qr_q(const float* a, int64_t n, float* q);

}  // namespace cpu
}  // namespace mr::optim
