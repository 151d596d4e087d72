// Muon: momentum, Newton-Schulz orthogonalisation of 2-D updates, scaling, and the tensor-parallel modes
// (Megatron's TensorParallelMuon over NVIDIA Emerging-Optimizers' OrthogonalizedOptimizer / newton_schulz), and
// Adaptive Muon's second moment (TensorParallelAdaptiveMuon over AdaptiveMuon).
// Raw fp32 buffers, row-major matrices; GEMMs through CBLAS (OpenBLAS) on the CPU, cuBLAS on the GPU (gpu.h).
// See docs/optim.md for the semantics and the source of every coefficient.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optim/kernels.h"

namespace mr::optim {

// ---- Newton-Schulz ---------------------------------------------------------------------------------------------

// Coefficient sets of Emerging-Optimizers' muon_utils._COEFFICIENT_SETS (NSCoeffT minus "custom").
enum class NsCoefficients { Simple, Quintic, PolarExpress, Cans, Aol, DeepseekV4, Cubic5 };
struct NsCoeff {
  double a, b, c;  // X <- a X + b (X X^T) X + c (X X^T)^2 X
};
// "simple", "quintic", "polar_express", "cans", "aol", "deepseekv4", "cubic5"; throws std::invalid_argument
// naming the choices.
NsCoefficients ns_coefficients_from_string(std::string_view name);
std::string_view to_string(NsCoefficients c);
std::span<const NsCoeff> ns_coefficient_set(NsCoefficients c);
// The (a, b, c) of each of `steps` iterations: the set cycled ("simple", "quintic", "aol", "cubic5") or its last
// entry repeated ("polar_express", "cans", "deepseekv4"). "cubic5" is a fixed 5-step schedule (throws otherwise).
std::vector<NsCoeff> ns_schedule(NsCoefficients c, int steps);

// torch.set_float32_matmul_precision for the NS GEMMs. Highest: fp32. High: TF32 on the GPU, fp32 on the CPU.
// Medium: bf16 inputs and outputs with fp32 accumulation (newton_schulz converts X to bf16). Megatron's "low"
// (--muon-fp32-matmul-prec low) is no torch precision: torch keeps its ambient one, highest by default.
enum class MatmulPrecision { Highest, High, Medium };
MatmulPrecision matmul_precision_from_string(std::string_view name);  // highest | high | medium | low (= highest)

struct NsOptions {
  NsCoefficients coefficients = NsCoefficients::Quintic;
  int steps = 5;
  MatmulPrecision precision = MatmulPrecision::Medium;
  float eps = 1e-15f;    // normalisation: X / max(||X||_F, eps)
  bool use_syrk = false;  // CPU: the two symmetric products X X^T and A A through SSYRK (half their flops)
};

// ---- scaling, options -------------------------------------------------------------------------------------------

enum class MuonScaleMode { Spectral, UnitRmsNorm, ShapeScaling };
MuonScaleMode muon_scale_mode_from_string(std::string_view name);  // spectral | unit_rms_norm | shape_scaling
// get_muon_scale_factor(size_out, size_in, mode): sqrt(max(out, in)), sqrt(out / in), sqrt(max(1, out / in)).
double muon_scale_factor(int64_t size_out, int64_t size_in, MuonScaleMode mode);

// How tensor-parallel shards are orthogonalised (--muon-tp-mode). Blockwise: each shard on its own (the update
// depends on the TP size). Duplicated: all-gather the shards, orthogonalise the whole matrix on every rank,
// keep this rank's part. Distributed: each rank keeps its shard and the NS Gram matrices are all-reduced.
// LayerSharded: the whole-matrix NS of duplicated (the same bits), run once per matrix on its home rank (round
// robin over the TP group, MuonJob::home): the shards gathered there and the result scattered back, the bytes
// Megatron's all_to_all stages move (2 / size of duplicated's all-gather). Auto (duplicated or distributed per
// weight, by a rule the spec does not give) is implemented without a TP group only (a group of one: every mode is
// the whole-matrix NS); across one, muon_partition_dim (muon_plan.h) refuses it.
enum class MuonTpMode { Blockwise, Duplicated, Distributed, Auto, LayerSharded };
MuonTpMode muon_tp_mode_from_string(std::string_view name);

// Adaptive Muon (--optimizer adaptive_muon): a second moment of the orthogonalised update after Newton-Schulz
// (Emerging-Optimizers' AdaptiveMuon). Only "adamuon", the elementwise moment, is implemented; it is what Megatron
// runs, since no flag sets OptimizerConfig.adaptive_muon_moment2_method.
enum class Moment2Method { None, AdaMuon };
// "adamuon"; "normuon" and "namo" throw std::invalid_argument saying they are not implemented.
Moment2Method moment2_method_from_string(std::string_view name);

struct AdaptiveOptions {
  Moment2Method method = Moment2Method::None;  // None: plain Muon
  double beta2 = 0.95;                         // adaptive_muon_beta2
  double eps = 1e-8;                           // adaptive_muon_eps
};

struct MuonOptions {
  double momentum = 0.9;    // muon_momentum: --muon-momentum's default (muon_options sets it from the config)
  bool nesterov = false;    // muon_nesterov
  NsOptions ns;             // muon_coefficient_type, muon_num_ns_steps, muon_fp32_matmul_prec, muon_use_syrk
  MuonScaleMode scale_mode = MuonScaleMode::Spectral;  // muon_scale_mode
  double extra_scale_factor = 1.0;                     // muon_extra_scale_factor
  bool decoupled_weight_decay = true;                  // decoupled_weight_decay (else "l2")
  bool split_qkv = true;                               // muon_split_qkv
  std::vector<int64_t> qkv_split_shapes;               // rows of Q, K, V per query group (model config)
  MuonTpMode tp_mode = MuonTpMode::Duplicated;         // muon_tp_mode
  int ns_batch_size = 1;                               // muon_ns_batch_size: same-shape matrices per NS call
  // --optimizer adaptive_muon. Megatron's TensorParallelAdaptiveMuon orthogonalises through TensorParallelMuon
  // (scaled by the whole matrix's shape), normalises by the second moment, then applies AdaptiveMuon's own Muon
  // scale by the local shard's shape: update = adamuon(NS(m) * s(whole) * extra) * s(shard) * extra.
  AdaptiveOptions adaptive;
};

// The fp32 scalars of Adaptive Muon's second-moment pass (elementwise.h).
AdaMuonConsts adamuon_consts(const AdaptiveOptions& a);

// The fp32 scalars of Muon's elementwise momentum pass (elementwise.h) for one parameter group, the same on
// the CPU and the GPU.
MuonMomentumConsts muon_momentum_consts(const MuonOptions& o, const GroupHyper& g);

// The rows of Q, K, V (and the gate, with attention_output_gate) per query group, as Megatron's
// _get_qkv_split_shapes computes them.
std::vector<int64_t> qkv_split_shapes(int64_t num_attention_heads, int64_t num_query_groups, int64_t kv_channels,
                                      bool attention_output_gate = false);

// Whether a parameter goes to the scalar optimizer (muon_scalar_optimizer: adam or lion) instead of Muon:
// not 2-D, an embedding / output layer, or use_muon=False (Megatron's _is_muon_excluded).
bool muon_excluded(int64_t ndim, bool is_embedding_or_output, bool use_muon = true);
// muon_scalar_optimizer: "adam" (adam_step with the Adam options) or "lion" (lion_step with lion_beta1/2).
enum class ScalarOptimizer { Adam, Lion };
ScalarOptimizer scalar_optimizer_from_string(std::string_view name);

// A tensor-parallel group as Muon needs it. The dist layer adapts its collectives to this; LocalTpHub
// (local_group.h) runs ranks as threads of one process.
class TpGroup {
 public:
  virtual ~TpGroup() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // recv[r * count + i] = rank r's send[i] (rank order).
  virtual void all_gather(const float* send, int64_t count, float* recv) = 0;
  // data <- sum over ranks, every rank gets the same bits.
  virtual void all_reduce_sum(float* data, int64_t count) = 0;
  // The layer-sharded mode's exchange: every rank's shard to the matrix's home rank, recv[r * count + i] = rank r's
  // send[i] there (recv is not used elsewhere); and back, recv[i] = the home's send[rank * count + i] (send is read
  // on the home only).
  virtual void gather(const float* send, int64_t count, float* recv, int root) = 0;
  virtual void scatter(const float* send, int64_t count, float* recv, int root) = 0;
};

// One Muon parameter (a 2-D matrix, or this rank's shard of one).
struct MuonParam {
  float* param = nullptr;            // fp32 (master) parameter, rows x cols, row-major
  const float* grad = nullptr;
  float* momentum_buffer = nullptr;  // zero before the first step
  float* moment2_buffer = nullptr;   // Adaptive Muon's second moment (rows x cols), zero before the first step
  int64_t rows = 0, cols = 0;
  int32_t group = 0;
  bool is_qkv = false;                 // fused QKV weight: orthogonalise Q, K, V separately (with split_qkv)
  std::vector<int64_t> qkv_split_shapes;  // overrides MuonOptions::qkv_split_shapes when non-empty
  int partition_dim = -1;                 // TP sharding dimension of this shard (0 or 1); -1 not sharded
  uint16_t* param_bf16 = nullptr;         // optional: also write the updated param rounded to bf16
};

namespace cpu {

// Orthogonalises rows x cols `x` into `out` (may alias x): the Newton-Schulz iteration of
// emerging_optimizers.newton_schulz (transposed when rows > cols, Frobenius-normalised, no scale factor).
void newton_schulz(const float* x, float* out, int64_t rows, int64_t cols, const NsOptions& o);
// `batch` same-shape matrices stored one after another. Same result as `batch` single calls.
void newton_schulz_batched(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols,
                           const NsOptions& o);
// Newton-Schulz orthogonalisations this thread has run (one per matrix or shard, batched ones included): how a test
// sees that the layer-sharded mode runs each matrix's NS on its home rank only.
int64_t newton_schulz_count();
// Distributed NS over `tp`: x is this rank's shard, split along dim `partition_dim` (0 or 1) of the full matrix.
void newton_schulz_distributed(const float* x, float* out, int64_t rows, int64_t cols, int partition_dim,
                               const NsOptions& o, TpGroup& tp);

// scaled_orthogonalize for one matrix or shard, QKV split and TP mode included: out = NS(x) * scale * extra.
// `home`: the TP rank that orthogonalises the whole matrix in the layer-sharded mode (MuonJob::home).
void muon_orthogonalize(const MuonParam& p, const float* x, float* out, const MuonOptions& o, TpGroup* tp = nullptr,
                        int home = 0);

// One Muon step over `params` (their lr / weight decay from `groups`). With a TP group, every rank calls it with
// its shards, in the same order.
void muon_step(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o,
               TpGroup* tp = nullptr);

// Row-major C = alpha * op(A) op(B) + beta * C through CBLAS when built with it (else a plain OpenMP loop).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
bool have_cblas();

}  // namespace cpu
}  // namespace mr::optim
