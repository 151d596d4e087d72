// What the training loop does on a device, behind one small interface, so that the loop (run/train.cpp,
// run/grad_sync.cpp, run/step.cpp) is written once: the flat buffers' storage and initial values, the
// synthetic gradient, the fixed-point sums of squares and max |x| (run/exact_stats.h), the collectives on the
// gradient and parameter buffers, unscale + found-inf, scaling (the average, the clip), the optimizer step over
// slots and the model checksums. Scalars (the partial sums, the found-inf flag, the norms) come back to the host
// and are reduced there; everything the size of the model stays where the backend keeps it. Internal to lib/run.
//
// Buffers are addressed through the backend: FlatBuffers (run/buffers.h) is the layout (offsets, shard,
// dtype), ptrs() the storage. Every pointer the loop builds from ptrs() (slots, GradTensor, ranges) is the
// backend's and is only handed back to it, never dereferenced by the loop.
//
// Implementations, chosen once per run by make_backend (--distributed-backend: gloo -> CPU, nccl -> CUDA):
//   - the CPU one (run/backend_cpu.cpp): host vectors, the OpenMP kernels of lib/optim, Gloo collectives on host
//     buffers, host-clock phase times;
//   - the CUDA one (run/backend_cuda.cpp, its CUDA calls and kernels in run/cuda_ops.cu): cudaSetDevice from
//     LOCAL_RANK, a cudaMemGetInfo check before allocating (rule run.device-memory, run/device_plan.h), the same
//     buffers in device memory with the initial values the CPU computes (uploaded parameter by parameter), the
//     synthetic gradient kernel (run/gpu_synthetic.cu, bit-identical), the fixed-point sums and max |x| as device
//     reductions (integers: order-free; the same bits as the CPU), NCCL collectives on Megatron's groups, the
//     optimizer kernels of lib/optim/gpu_*.cu, --embedding-min-norm's row passes, checksums on the device, per-phase CUDA event times. It has never
//     run on a GPU yet (scripts/gpu-check.sh point 2 is its check).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "distributed/runtime.h"
#include "optim/clip_grads.h"
#include "optim/config.h"
#include "optim/kernels.h"
#include "optim/muon.h"
#include "optim/optimizer_table.h"
#include "run/buffers.h"
#include "run/exact_stats.h"
#include "run/grad_format.h"
#include "run/row_rescale.h"
#include "run/synthetic_grad.h"

namespace mr::run {

// The storage of the flat buffers (FlatBuffers' layout), on the backend's device; null where a buffer is not
// allocated (main params in fp32 training, exp_avg_sq where no parameter of this rank keeps a second moment, grad_shard
// without the distributed optimizer).
struct BufferPtrs {
  void* model = nullptr;  // [0, padded) in the model dtype
  float* grad = nullptr;  // [0, padded)
  float* grad_shard = nullptr;  // FlatBuffers::scattered() elements
  void* main = nullptr;     // FlatBuffers::shard() elements as main_storage keeps them (FlatBuffers::main_at)
  void* exp_avg = nullptr;     // FlatBuffers::shard() elements in exp_avg_dtype (FlatBuffers::exp_avg_at)
  void* exp_avg_sq = nullptr;  // FlatBuffers::sq_numel elements in exp_avg_sq_dtype, packed (FlatBuffers::sq_at)
  float* state_scale = nullptr;  // the fp16 / fp8 states' scales (FlatBuffers::scale_at); null when there are none
  const float* target = nullptr;  // [0, numel)
  float* kronecker = nullptr;     // FlatBuffers::kronecker_numel elements (SOAP's preconditioners)
};

// The phases of an iteration timed for the log (--timing-log-level 1 and up), in their order; phase_name gives
// Megatron's timer names.
enum class Phase : int { Grads, GradsReduce, UnscaleCheck, ClipNorm, Step, ParamsGather };
constexpr int kPhases = 6;
const char* phase_name(Phase p);
using PhaseTimes = std::array<double, kPhases>;  // milliseconds

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // The layout, the memory check, the allocation and the initial values (FlatBuffers::build's contract).
  virtual void build(FlatBuffers& b, const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
                     const ShardGroups& shards, int64_t tp_rank, int64_t etp_rank, uint64_t seed, double init_std,
                     bool decoupled_lr) = 0;
  virtual BufferPtrs ptrs() = 0;

  // One parameter's synthetic gradient (run/synthetic_grad.h's synthetic_grads, t's pointers from ptrs());
  // returns max |p - target|.
  virtual float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples,
                                int bits, bool zero, const GradTensor& t) = 0;
  // Sets grad[i] (the MR_RUN_NONFINITE_AT knob).
  virtual void set_grad(int64_t i, float v) = 0;

  // Fixed-point sums of squares at exponent e and max |x| (run/exact_stats.h) of: an fp32 buffer x[0, n); the
  // model elements [begin, end); the model minus the target over [begin, end) (the loss). The maxima are NaN
  // when any element is NaN (run/abs_max.h); the sums are for finite elements only (the callers check the max).
  virtual Fixed sum_squares(const float* x, int64_t n, int e) = 0;
  virtual double max_abs(const float* x, int64_t n) = 0;
  virtual Fixed sum_squares_model(int64_t begin, int64_t end, int e) = 0;
  virtual float max_abs_model(int64_t begin, int64_t end) = 0;
  virtual Fixed sum_squares_model_minus_target(int64_t begin, int64_t end, int e) = 0;

  // Collectives on the backend's buffers over a group: fp32 sum all-reduce and reduce-scatter (in: n * size,
  // out: n); the all-gather of the model elements [lo, hi) of every member into the model buffer's region of
  // g.size() such blocks from `begin` (this rank's block is at [lo, hi) in it).
  virtual void all_reduce_sum(distributed::Group& g, float* x, int64_t n) = 0;
  virtual void reduce_scatter_sum(distributed::Group& g, float* in, int64_t in_n, float* out, int64_t out_n) = 0;
  virtual void all_gather_model(distributed::Group& g, int64_t begin, int64_t lo, int64_t hi) = 0;
  // The model elements [lo, hi) of member `root` to every member, in place.
  virtual void broadcast_model(distributed::Group& g, int64_t lo, int64_t hi, int root) = 0;

  // Unscale in place by inv_scale and report inf/NaN (this rank's part).
  virtual bool unscale_and_check(std::span<const optim::GradSlot> grads, float inv_scale) = 0;
  // x[0, n) = grad_element(x, factor, f) (run/grad_format.h): the average over the batch and the loss scale, as
  // Megatron's gradient buffer holds it.
  virtual void finish_grads(float* x, int64_t n, float factor, GradFormat f) = 0;
  // The clip by the total norm (optim/clip_grads.h).
  virtual void clip(std::span<const optim::ClipSlot> slots, double max_norm, double total_norm) = 0;
  // Zeros in the counted slots, summed with `reduce` (optim/clip_grads.h's count_zeros).
  virtual double count_zeros(std::span<const optim::ClipSlot> slots, const optim::ReduceFn& reduce) = 0;

  // The optimizer step: Adam/SGD/Lion over slots, Muon and SOAP over matrices (tp: the TP group, or null).
  virtual void elementwise_step(optim::Kernel k, std::span<const optim::TensorSlot> slots,
                                std::span<const optim::GroupHyper> groups, const OptimizerConfig& cfg) = 0;
  virtual void muon_step(std::span<const optim::MuonParam> mats, std::span<const optim::GroupHyper> groups,
                         const optim::MuonOptions& o, distributed::Group* tp) = 0;
  // SOAP over matrices (each rank its own shards: Megatron's SOAP is not tensor-parallel aware): LAPACK on the CPU
  // backend, cuSOLVER on the CUDA one.
  virtual void soap_step(std::span<const optim::SoapParam> mats, std::span<const optim::GroupHyper> groups,
                         const optim::SoapOptions& o) = 0;

  // --embedding-min-norm (run/row_rescale.h, run/embedding_norm.h) over one piece of this rank's shard of the word
  // embeddings (p's pointers from ptrs()); the arrays are on the host, indexed from p.first_row(), p.rows() of
  // them: each row's max |x| (its part in the piece) as bits max-ed into out[]; each row's exact sum of
  // row_square_term(x, scale[]) added into out[]; each element times its row's factor[] (1: left as it is).
  virtual void row_max_bits(const RowPiece& p, uint32_t* out) = 0;
  virtual void row_sum_squares(const RowPiece& p, const double* scale, Fixed* out) = 0;
  virtual void scale_rows(const RowPiece& p, const float* factor) = 0;

  // FNV-1a of the model bytes of elements [begin, end) (the replica check); the layout-free checksum part of one
  // parameter: sum over i in [0, n) of mix64(mix64(key ^ whole_index(where, i)) ^ bits of element base + i).
  virtual uint64_t checksum(int64_t begin, int64_t end) = 0;
  virtual uint64_t model_checksum_part(uint64_t key, const ShardIndex& where, int64_t base, int64_t n) = 0;

  // Phase times: start_timing() at the start of an iteration, end_phase(p) when phase p is done (phases may be
  // left out); take_phase_ms() the milliseconds per phase since the last take (waits for the device), then
  // zero. CPU: the host clock; CUDA: events on the stream.
  virtual void start_timing() = 0;
  virtual void end_phase(Phase p) = 0;
  virtual PhaseTimes take_phase_ms() = 0;
  virtual const char* clock() const = 0;  // "host clock", "cuda events"

  // Checkpoints (run/checkpoint.cpp): to_host() puts the buffers' current values into FlatBuffers' host vectors
  // (allocating them at the layout's sizes), from_host() makes the host vectors' values the buffers' and
  // release_host() frees the host copies. On the CPU backend the host vectors are the storage: nothing to do.
  virtual void to_host(FlatBuffers& b) = 0;
  virtual void from_host(FlatBuffers& b) = 0;
  virtual void release_host(FlatBuffers& b) = 0;
};

// Host memory, lib/optim's CPU kernels, host-buffer collectives.
std::unique_ptr<Backend> make_cpu_backend();
// Device memory on the GPU of LOCAL_RANK `local_rank`, the CUDA kernels, NCCL. RunError in a build without CUDA.
std::unique_ptr<Backend> make_cuda_backend(int local_rank);
// Which backend a run uses: the CUDA one for --distributed-backend nccl, the CPU one for gloo; chosen once.
enum class BackendKind { Cpu, Cuda };
BackendKind backend_kind(arg::DistributedBackend distributed_backend);
std::unique_ptr<Backend> make_backend(const distributed::Runtime& rt);

}  // namespace mr::run
