// The training run's flat buffers: every local parameter back to back (`offset`). Routed experts come last,
// [expert_begin, numel). With the distributed optimizer the dense part is padded to a multiple of the
// data-parallel size and the experts' to a multiple of the expert data-parallel size, and this rank's shard of main
// params and optimizer state is its block of each: [lo, hi) and [elo, ehi), stored back to back (`local`).
// Without it the shard is everything, [lo, hi) = [0, numel). Internal to lib/run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "optim/clip_grads.h"
#include "optim/dtype.h"
#include "optim/kernels.h"
#include "optim/optimizer_table.h"
#include "run/buffer_dtypes.h"
#include "run/checksum_term.h"
#include "run/model.h"
#include "run/tensor_index.h"

namespace mr::run {

// Deterministic synthetic values (splitmix64: mix64 in run/checksum_term.h; FNV-1a, uniform and Box-Muller normal
// from a key).
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);
uint64_t name_key(const std::string& s, uint64_t seed);
float uniform(uint64_t key);  // in [-1, 1)
float normal(uint64_t key);
// The element's index in the whole (unsplit) tensor, so that values do not depend on the TP layout (routed
// experts: `tp_rank` is the expert tensor-parallel rank).
int64_t global_index(const ParamSpec& p, int64_t tp_rank, int64_t local);
ShardIndex shard_index(const ParamSpec& p, int64_t tp_rank);  // run/tensor_index.h

inline size_t dtype_bytes(optim::DType d) { return static_cast<size_t>(optim::dtype_size(d)); }

// What the flat buffers take, in bytes (the host check and the device check, run/device_plan.h, both use it).
struct BufferBytes {
  double model = 0, grad = 0, grad_shard = 0, main = 0, state = 0, target = 0;
  double work = 0;  // what the optimizer step allocates while it runs (SOAP's, the CUDA Muon's scratch), not a buffer
  double total() const { return model + grad + grad_shard + main + state + target + work; }
};

// How the distributed optimizer shards the buffers: over the data-parallel group (dense parameters) and the expert
// data-parallel group (routed experts). `distributed` false: no shards. `layer_wise`: Megatron's layer-wise
// distributed optimizer (Muon, which orthogonalises whole matrices): each data-parallel rank owns whole
// parameters, a contiguous run of them (and of the routed experts over the expert data-parallel group).
struct ShardGroups {
  bool distributed = false;
  int64_t dp = 1, dp_rank = 0;
  int64_t edp = 1, edp_rank = 0;
  bool layer_wise = false;
};


struct FlatBuffers {
  optim::DType model_dtype = optim::DType::F32;
  optim::DType exp_avg_dtype = optim::DType::F32, exp_avg_sq_dtype = optim::DType::F32;  // BufferDtypes
  MainStorage main_storage = MainStorage::F32;
  std::vector<int64_t> offset;   // of each parameter of the plan
  std::vector<int32_t> group_of;  // its parameter group: (weight decay, none, RMSNorm gamma) x (--decoupled-lr or not)
  int64_t numel = 0, padded = 0, lo = 0, hi = 0;
  int64_t dense_end = 0;     // the dense parameters occupy [0, dense_end)
  int64_t expert_begin = 0;  // routed experts occupy [expert_begin, numel): dense_end, padded when sharded
  int64_t elo = 0, ehi = 0;  // this rank's block of the experts (sharded; else empty, at numel)
  bool sharded = false;   // the distributed optimizer's shards (a data-parallel group of more than one)
  // Layer-wise (ShardGroups::layer_wise): data-parallel rank r owns the whole dense parameters in
  // [bounds[r], bounds[r + 1]), expert data-parallel rank r the routed experts in [expert_bounds[r], ...); the
  // gradients are all-reduced (not scattered) and each rank's parameters broadcast after the step.
  bool layer_wise = false;
  std::vector<int64_t> bounds, expert_bounds;
  // The experts' gradients are reduce-scattered over an expert data-parallel group of more than one; with a group
  // of one this rank's block is all of them, reduced in place in `grad`.
  bool experts_scattered = false;
  bool has_main = false;        // main params (16-bit training), kept as main_storage says
  // The second moment (Adam's; Adaptive Muon's moment2) only for the parameters whose rule keeps one (the optimizer
  // table's state_of): `keeps_sq[k]` for parameter k, packed in parameter order into a buffer of `sq_numel`
  // elements (this rank's pieces). has_exp_avg_sq: some parameter of the model keeps one.
  bool has_exp_avg_sq = false;
  std::vector<uint8_t> keeps_sq;
  std::vector<int64_t> sq_shift;  // element i of parameter k (in this rank's shard) at local(i) + sq_shift[k]
  int64_t sq_numel = 0;
  // SOAP's preconditioner (optim/soap.h) of each matrix this rank steps whole (its TP shard; with the layer-wise
  // distributed optimizer only those this rank owns): parameter k's at `kronecker_at[k]` (-1: none), fp32,
  // kronecker_numel in all.
  std::vector<int64_t> kronecker_at;
  int64_t kronecker_numel = 0;
  // The scratch SOAP's step takes for the largest of those matrices (optim::soap_work_bytes; 0 without SOAP).
  double soap_work_bytes = 0;
  // The device scratch the CUDA Muon step takes (run/step.h, muon_device_work_bytes): set by the run before the
  // CUDA backend builds the buffers (set_layout leaves it), 0 otherwise; counted in bytes().work.
  double muon_work_bytes = 0;
  // The storage of the CPU backend; the CUDA backend keeps its buffers in device memory and fills these only
  // while a checkpoint is written or read (Backend::to_host / from_host).
  // The main params and the moments are stored in their dtypes (bytes); `state_scale` holds the scales of the fp16
  // and fp8 ones, one per parameter and state (scale_at), and is empty when none is scaled.
  std::vector<uint8_t> model, main, exp_avg, exp_avg_sq;
  std::vector<float> grad, grad_shard, target, state_scale, kronecker;

  int64_t shard() const { return (hi - lo) + (ehi - elo); }
  // Element i of the model (inside this rank's shard) in the shard-sized buffers: main params, states.
  int64_t local(int64_t i) const { return i < hi ? i - lo : (hi - lo) + (i - elo); }
  // Element i (inside this rank's shard) in the first-moment buffer `base`.
  void* exp_avg_at(void* base, int64_t i) const {
    return base ? static_cast<uint8_t*>(base) + local(i) * optim::dtype_size(exp_avg_dtype) : nullptr;
  }
  // Element i of parameter k (inside this rank's shard) in the second-moment buffer `base`; null where k keeps none.
  void* sq_at(void* base, size_t k, int64_t i) const {
    return base && keeps_sq[k] ? static_cast<uint8_t*>(base) + (local(i) + sq_shift[k]) * optim::dtype_size(exp_avg_sq_dtype)
                               : nullptr;
  }
  // The bytes of one main param (fp32: 4; fp16 and remainders: 2), and element i's (inside this rank's shard) in
  // the main-param buffer `base`.
  int64_t main_bytes() const { return main_storage == MainStorage::F32 ? 4 : 2; }
  void* main_at(void* base, int64_t i) const {
    return base ? static_cast<uint8_t*>(base) + local(i) * main_bytes() : nullptr;
  }
  // The dtype of a master kept as a value (fp32 or fp16; remainders are not one).
  optim::DType master_dtype() const { return main_storage == MainStorage::F16 ? optim::DType::F16 : optim::DType::F32; }
  // The states that may carry a scale (fp16, fp8: optim::scaled_state), and whether `which` does here.
  enum class Scaled : uint8_t { ExpAvg, ExpAvgSq, Main };
  bool is_scaled(Scaled which) const {
    return which == Scaled::ExpAvg     ? optim::scaled_state(exp_avg_dtype)
           : which == Scaled::ExpAvgSq ? optim::scaled_state(exp_avg_sq_dtype)
                                       : has_main && main_storage == MainStorage::F16;
  }
  // The scale of parameter k's state `which` in the scale buffer `scales`; null unless that state is scaled.
  float* scale_at(float* scales, Scaled which, size_t k) const {
    return scales && is_scaled(which) ? scales + static_cast<size_t>(which) * keeps_sq.size() + k : nullptr;
  }
  size_t scales() const {  // the scale buffer's size
    const bool any = is_scaled(Scaled::ExpAvg) || is_scaled(Scaled::ExpAvgSq) || is_scaled(Scaled::Main);
    return any ? 3 * keeps_sq.size() : 0;
  }
  // The initial bf16/fp16 model value of `v` at element i of `model`: rounded to nearest even, or with remainders
  // the high half of Transformer Engine's split, whose pair with the remainder is v.
  void store_initial(void* model, int64_t i, float v) const;
  // n main params from their fp32 values x: stored at `out` (a main_at place), an fp16 piece with its scale at
  // *scale (a scale_at place), remainders beside the bf16 model params from `model_bf16` on, which they set. And back.
  void encode_main(const float* x, int64_t n, void* out, float* scale, void* model_bf16) const;
  void decode_main(const void* in, int64_t n, const float* scale, const void* model_bf16, float* out) const;

  // Its gradient after the reduction: in the reduce-scattered shard buffer, or in the gradient buffer where nothing
  // was scattered (no distributed optimizer; experts on an expert data-parallel group of one).
  float* grad_at(float* grad, float* grad_shard, int64_t i) const {
    if (!sharded || layer_wise) return grad + i;
    if (i < hi) return grad_shard + (i - lo);
    return experts_scattered ? grad_shard + (hi - lo) + (i - elo) : grad + i;
  }
  // The size of the reduce-scattered gradient shard.
  int64_t scattered() const {
    return sharded && !layer_wise ? (hi - lo) + (experts_scattered ? ehi - elo : 0) : 0;
  }

  // The layout alone (nothing allocated): offsets, the padded size and this rank's shard, which buffers exist,
  // the parameter groups.
  void set_layout(const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
                  const ShardGroups& shards, bool decoupled_lr);
  // What the buffers of this layout take.
  BufferBytes bytes() const;

  // The CPU backend's build: the layout, the memory check against this machine (RunError when it does not fit),
  // the allocation in host memory (state buffers as the optimizer table says), and Megatron's initial values and
  // the synthetic targets: normal with --init-method-std for matrices (--embedding-init-method-std for the
  // embeddings when set; a std of 0 gives zeros, as torch's normal_), ones for norm weights, zeros for biases,
  // keyed by the element's index in the whole tensor.
  void build(const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
             const ShardGroups& shards, int64_t tp_rank, int64_t etp_rank, uint64_t seed, double init_std, bool decoupled_lr);
  // The host vectors at the layout's sizes, zero (allocate_host), or freed (release_host).
  void allocate_host();
  // Rule run.host-memory: the layout's buffers against this machine's memory for all its local ranks, the cgroup's
  // limit and this process's address space (RunError naming the sizes). Needs set_layout first; build() does not
  // call it: the run does, on every rank before any allocates (train.cpp).
  void check_memory() const;
  void release_host();
  // The host copies a checkpoint needs where the buffers live in device memory (the CUDA backend's
  // Backend::to_host / from_host): only what checkpoint_io reads and writes (the model, the main params, the
  // moments, their scales, SOAP's preconditioners), never the gradients, the gradient shard or the targets.
  // checkpoint_host_bytes: what allocate_checkpoint_host allocates; check_checkpoint_memory: rule run.host-memory for
  // those bytes on all this machine's local ranks at once (they save and load together), RunError naming them and
  // `what` (--save, --load).
  double checkpoint_host_bytes() const;
  void allocate_checkpoint_host();
  void check_checkpoint_memory(const std::string& what) const;

  // The initial value and the target of every element i in [0, numel) of parameter k (its shard on TP rank
  // `tp_rank`; the expert TP rank for routed experts): put(i, init, target), in OpenMP teams.
  template <class Put>
  void initial_values(const ParamSpec& p, uint64_t seed, double init_std, int64_t tp_rank, Put&& put) const {
    const uint64_t key = name_key(p.key, seed);
    const bool one = p.init == ParamSpec::Init::One, zero = p.init == ParamSpec::Init::Zero;
    const int64_t cnt = p.numel();
    const ShardIndex where = shard_index(p, tp_rank);
    const double sd = p.init_std.value_or(init_std);  // --embedding-init-method-std for the embeddings
    const float std_f = static_cast<float>(sd);
    // The target's distance from the start: the std, or 0.02 (--init-method-std's default) where the std is 0, whose
    // zero matrices would otherwise sit on their targets and never get a gradient.
    const float spread = sd > 0 ? std_f : 0.02f;
#ifdef _OPENMP  // (CUDA sources include this header without OpenMP)
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
#endif
    for (int64_t i = 0; i < cnt; ++i) {
      const uint64_t gi = static_cast<uint64_t>(whole_index(where, i));
      const float init = one ? 1.0f : zero ? 0.0f : std_f * normal(mix64(key ^ gi));
      put(i, init, init + spread * normal(mix64(key ^ gi) ^ 0x7f4a7c15ull));
    }
  }

  // Parameter k's initial values, the same on every backend: its model elements into `model_k` (p.numel() in the
  // model dtype, from element 0), its targets into `target_k`, and for each of its pieces [b, e) of this rank's
  // main params (16-bit training) the encoded main params into main_out(b, e) (room for e - b of them), the fp16
  // scale into `scales` (a state_scale-sized buffer). `init` is scratch.
  void initial_param(size_t k, const ParamSpec& p, uint64_t seed, double init_std, int64_t tp_rank, void* model_k,
                     float* target_k, std::vector<float>& init, const std::function<void*(int64_t, int64_t)>& main_out,
                     float* scales) const;
  // Megatron's reload_model_params on the host vectors: the main params from the model params (fp16 ones with a
  // fresh scale, remainders zero).
  void main_from_model(const ModelPlan& plan);

  // The parts of each parameter inside this rank's shard: f(k, begin, end).
  template <class F>
  void for_each_piece(const ModelPlan& plan, F&& f) const {
    for (size_t k = 0; k < plan.params.size(); ++k) pieces_of(k, plan.params[k].numel(), f);
  }
  // The parts of parameter k (of n elements) inside this rank's shard: f(k, begin, end).
  template <class F>
  void pieces_of(size_t k, int64_t n, F&& f) const {
    const int64_t first = offset[k], last = offset[k] + n;
    for (auto [rlo, rhi] : {std::pair{lo, hi}, std::pair{elo, ehi}}) {
      const int64_t b = std::max(first, rlo), e = std::min(last, rhi);
      if (b < e) f(k, b, e);
    }
  }

};

}  // namespace mr::run
