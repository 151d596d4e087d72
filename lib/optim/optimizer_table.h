// One table of the optimizers --optimizer names: which kernel steps it, which state buffers a parameter carries,
// and what Muon does with the parameters it does not orthogonalise. The training run (allocation, memory check,
// step dispatch), `megatron-run params`' memory estimate and the benchmarks read it; so will the GPU run.
//
// The table itself is constexpr and torch-free (mr_run_model reads it without linking mr_optim); the step
// dispatch, cpu::elementwise_step(), is in mr_optim (optim/elementwise_step.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/args.h"

namespace mr::optim {

// The update rule a row runs (optim/kernels.h, optim/muon.h, optim/soap.h): first the elementwise ones, one per
// line of optim/elementwise_kernels.def (Adam, Sgd, Lion); then Muon's and SOAP's matrices. None: no kernel of ours
// yet.
enum class Kernel {
#define MR_ELEMENTWISE_KERNEL(Name, name) Name,
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
  Muon,
  Soap,
  None,
};

// What a parameter's optimizer state holds: fp32 buffers of the parameter's size.
struct StateLayout {
  bool exp_avg = false;     // Adam's and Lion's first moment, SGD's and Muon's momentum buffer
  bool exp_avg_sq = false;  // Adam's second moment, Adaptive Muon's moment2 buffer
  // The precision-aware optimizer's --exp-avg-dtype / --exp-avg-sq-dtype apply (Adam's moments only).
  bool precision_aware = false;
  // SGD: the momentum buffer exists only when --sgd-momentum is not 0.
  bool momentum_from_flag = false;
  // SOAP: per matrix also the Kronecker factors, their eigenbases and eigenvalues (kronecker_floats below, fp32).
  bool kronecker = false;

  constexpr int buffers() const { return (exp_avg ? 1 : 0) + (exp_avg_sq ? 1 : 0); }
  constexpr int fp32_bytes_per_param() const { return 4 * buffers(); }
};

// Parameters an optimizer does not take itself (Muon, lion, SOAP: not 2-D, embeddings, the output layer) go to
// another rule.
enum class ScalarRule {
  None,              // the optimizer takes every parameter
  MuonScalarOptimizer,  // --muon-scalar-optimizer (adam or lion) for what Muon does not take
  // Megatron's emerging-optimizer defaults (_default_param_overrides_factory): non-2-D, embedding and output
  // parameters to Adam (with the --adam-* options).
  EmergingAdam,
};

struct OptimizerInfo {
  arg::Optimizer id;
  std::string_view name;  // as --optimizer spells it
  Kernel kernel;
  StateLayout state;      // of the parameters the optimizer takes itself
  ScalarRule scalar_rule = ScalarRule::None;
  // The state the scalar rule's parameters carry in the memory estimate and in the run's buffers: Adam's two
  // moments (optimizer_info(id, scalar) below: Lion's one with --muon-scalar-optimizer lion).
  StateLayout scalar_state = {};
};

// SOAP's preconditioner of one rows x cols matrix: L (rows^2), R (cols^2), their eigenbases Q_L, Q_R (as large) and
// eigenvalues (rows + cols), in floats (optim/soap.h lays them out).
constexpr int64_t kronecker_floats(int64_t rows, int64_t cols) { return 2 * (rows * rows + cols * cols) + rows + cols; }
// The scratch one SOAP step of a rows x cols matrix takes while it runs, on the CPU (soap_cpu.cpp) and the GPU
// (gpu_soap.cu) alike, with b = max(rows, cols): four fp32 work matrices of max(b^2, rows x cols), the solver's
// fp32 copy of a factor and its eigenvalues (b^2 + b), the eigensolver's workspace (LAPACK's minimum for syevd,
// 1 + 6b + 2b^2 elements, taken as doubles for the fp64 retry; cuSOLVER's may be somewhat larger) and that
// retry's copy (b^2 + b doubles).
constexpr int64_t soap_work_bytes(int64_t rows, int64_t cols) {
  const int64_t b = rows > cols ? rows : cols, sq = b * b, mn = rows * cols;
  return 4 * 4 * (sq > mn ? sq : mn) + 4 * (sq + b) + 8 * (1 + 6 * b + 2 * sq) + 8 * (sq + b);
}

inline constexpr StateLayout kAdamState{.exp_avg = true, .exp_avg_sq = true, .precision_aware = true};
inline constexpr StateLayout kMomentumState{.exp_avg = true};
// Adaptive Muon: the momentum buffer (exp_avg) and the second moment (exp_avg_sq: moment2_buffer), fp32 always.
inline constexpr StateLayout kMuonMoment2State{.exp_avg = true, .exp_avg_sq = true};

inline constexpr OptimizerInfo kOptimizers[] = {
    {arg::Optimizer::adam, "adam", Kernel::Adam, kAdamState},
    {arg::Optimizer::sgd, "sgd", Kernel::Sgd, {.exp_avg = true, .momentum_from_flag = true}},
    {arg::Optimizer::muon, "muon", Kernel::Muon, kMomentumState, ScalarRule::MuonScalarOptimizer, kAdamState},
    // The deprecated spelling of muon with the distributed optimizer (finalize_optimizer_config: muon on the
    // layer-wise path): Muon's kernel and state; the run shards it as --use-distributed-optimizer would.
    {arg::Optimizer::dist_muon, "dist_muon", Kernel::Muon, kMomentumState, ScalarRule::MuonScalarOptimizer,
     kAdamState},
    // Megatron routes lion through its emerging-optimizer path: Lion on the 2-D weights (with the --adam-beta1/2 it
    // passes as `betas`), Adam on the rest.
    {arg::Optimizer::lion, "lion", Kernel::Lion, kMomentumState, ScalarRule::EmergingAdam, kAdamState},
    // Megatron builds SOAP from Emerging-Optimizers' registry with the emerging defaults (Adam for non-2-D,
    // embedding and output parameters): the inner Adam's two moments (in the eigenbasis) and the preconditioner.
    {arg::Optimizer::soap, "soap", Kernel::Soap, {.exp_avg = true, .exp_avg_sq = true, .kronecker = true},
     ScalarRule::EmergingAdam, kAdamState},
    // Muon with a second moment of the orthogonalised update (AdaMuon): momentum and moment2 per matrix.
    {arg::Optimizer::adaptive_muon, "adaptive_muon", Kernel::Muon, kMuonMoment2State, ScalarRule::MuonScalarOptimizer,
     kAdamState},
};

// The row of --optimizer (every choice has one: tests/optim/optimizer_table_test.cpp).
constexpr const OptimizerInfo& optimizer_info(arg::Optimizer id) {
  for (const OptimizerInfo& o : kOptimizers)
    if (o.id == id) return o;
  return kOptimizers[0];
}

// The row as a run with --muon-scalar-optimizer `scalar` uses it: Muon's scalar parameters stepped by Lion carry
// Lion's one moment, not Adam's two (the run allocates, checkpoints and estimates exactly that).
constexpr OptimizerInfo optimizer_info(arg::Optimizer id, arg::MuonScalarOptimizer scalar) {
  OptimizerInfo o = optimizer_info(id);
  if (o.scalar_rule == ScalarRule::MuonScalarOptimizer && scalar == arg::MuonScalarOptimizer::lion)
    o.scalar_state = kMomentumState;
  return o;
}

// Whether a parameter is stepped by the optimizer's own rule (else by its scalar rule): Muon takes the 2-D weights
// that are not embeddings or the output layer and not marked use_muon=False (_is_muon_excluded); lion's and soap's
// emerging defaults the 2-D weights that are not embeddings or the output layer (_is_nonlinear_or_embedding).
constexpr bool takes_own_rule(const OptimizerInfo& o, size_t ndim, bool embedding_or_output, bool use_muon) {
  switch (o.scalar_rule) {
    case ScalarRule::None: return true;
    case ScalarRule::MuonScalarOptimizer: return ndim == 2 && !embedding_or_output && use_muon;
    case ScalarRule::EmergingAdam: return ndim == 2 && !embedding_or_output;
  }
  return true;
}

// The state layout of one parameter: the scalar rule's for what the optimizer does not take (`own` false).
constexpr const StateLayout& state_of(const OptimizerInfo& o, bool own) {
  return o.scalar_rule != ScalarRule::None && !own ? o.scalar_state : o.state;
}

}  // namespace mr::optim
