// Multi-tensor optimizer kernels on raw buffers: Adam/AdamW, SGD (momentum, Nesterov) and Lion, each in three
// implementations that agree bit for bit:
//   mr::optim::ref  - the readable definition: one element at a time, one thread (reference.cpp);
//   mr::optim::cpu  - the fast CPU kernels: chunked work list over OpenMP threads, SIMD with runtime dispatch
//                     (cpu_kernels.cpp);
//   mr::optim::gpu  - the CUDA kernels, one launch per step for a whole tensor list (gpu.h, *.cu).
// No LibTorch here: a step takes a list of TensorSlots (the apex / Transformer Engine "multi tensor apply"
// idea: one call updates many tensors of different sizes) and the per-group hyperparameters.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "optim/dtype.h"
#include "optim/elementwise.h"

namespace mr::optim {

// The buffers of one parameter tensor. All have `numel` elements.
//
// Precision modes (Megatron / Transformer Engine FusedAdam):
//   fp32:                       param F32, no master.
//   16-bit params + fp32 master: param BF16/F16 and master F32: the step updates the master and writes the
//                               rounded (nearest even) value to the param as well.
//   16-bit params, no master:   param BF16/F16 updated in place (math in fp32).
//   store_param_remainders:     param BF16 + `remainder` (the 16 low bits of the fp32 master, no master
//                               buffer): the pair is the exact fp32 master (see split_remainder()).
//   precision-aware states:     exp_avg / exp_avg_sq in BF16 (plain rounding), or F16 or E4M3 (fp8) with a
//                               per-tensor fp32 scale (value = stored * scale; after the step the state is stored
//                               anew from its absmax, as TE's FusedAdam._apply_scale does: dtype.h's state_scale);
//                               an F16 master likewise.
struct TensorSlot {
  int64_t numel = 0;
  void* param = nullptr;
  DType param_dtype = DType::F32;
  const void* grad = nullptr;
  DType grad_dtype = DType::F32;
  void* master = nullptr;  // F32, or F16 with master_scale
  DType master_dtype = DType::F32;
  float* master_scale = nullptr;
  uint16_t* remainder = nullptr;
  void* exp_avg = nullptr;  // Adam m, SGD momentum buffer, Lion exp_avg
  DType exp_avg_dtype = DType::F32;  // F32, BF16, or F16 / E4M3 with exp_avg_scale (also exp_avg_sq)
  float* exp_avg_scale = nullptr;
  void* exp_avg_sq = nullptr;  // Adam v
  DType exp_avg_sq_dtype = DType::F32;
  float* exp_avg_sq_scale = nullptr;
  int32_t group = 0;  // index into the GroupHyper list
};

// Per parameter group: learning rate, weight decay and the 1-based number of this step (bias correction; SGD's
// first step initialises its momentum buffer with the gradient).
struct GroupHyper {
  double lr = 1e-3;
  double weight_decay = 0.0;
  int64_t step = 1;
};

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decoupled_weight_decay = true;  // true: AdamW; false: Adam with L2 (grad += wd * param)
  bool bias_correction = true;
};
struct SgdOptions {
  double momentum = 0.9;  // 0: plain SGD (no buffer needed)
  double dampening = 0.0;
  bool nesterov = false;
};
struct LionOptions {
  double beta1 = 0.95, beta2 = 0.98;
  bool decoupled_weight_decay = true;  // Emerging-Optimizers' weight_decay_method "decoupled" (else "l2")
};

// Fused gradient handling for one step.
//   grad_scale: every gradient is multiplied by it as it is loaded (the unscale 1/loss_scale, times a clip
//               coefficient when clipping): no separate pass over the gradients.
//   noop_flag:  when non-null and *noop_flag != 0 the step changes nothing (apex's skip flag; on the GPU a
//               device pointer, so a step can be skipped without a host synchronisation).
//   found_inf:  when non-null, set to 1 if a scaled gradient element is not finite. The step itself still
//               runs: to skip steps on overflow (dynamic loss scaling), run unscale_and_check() first.
struct StepControl {
  float grad_scale = 1.0f;
  const int32_t* noop_flag = nullptr;
  int32_t* found_inf = nullptr;
};

// A gradient buffer for unscale_and_check().
struct GradSlot {
  int64_t numel = 0;
  void* grad = nullptr;
  DType dtype = DType::F32;
};
struct UnscaleResult {
  bool found_inf = false;
  double sum_sq = 0.0;  // sum of squares of the unscaled gradients (for the global grad norm); NaN/inf if found_inf
};

// The fp32 scalars of a step, formed from double hyperparameters the way LibTorch forms them.
AdamConsts adam_consts(const AdamOptions& o, const GroupHyper& g);
SgdConsts sgd_consts(const SgdOptions& o, const GroupHyper& g);
LionConsts lion_consts(const LionOptions& o, const GroupHyper& g);

// Throws std::invalid_argument when a slot's buffers do not form a supported precision mode for `kind`
// ("adam", "sgd", "lion"), or a group index is out of range.
void check_slots(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const char* kind,
                 bool needs_exp_avg, bool needs_exp_avg_sq);

// An elementwise kernel as its three implementations see it (ref::, cpu:: and gpu::<name>_step all read this
// description; elementwise_kernels.def names the kernels):
//   kName       its name in check_slots' errors;
//   kStates     the state buffers an element may carry (exp_avg, then exp_avg_sq);
//   uses_state  whether state i is there with these options (SGD keeps no buffer without momentum);
//   consts      the fp32 scalars of one group's step;
//   element     the step of one element (elementwise.h), with both states whether it has them or not;
//   states      the states' new values only (p may change: it is a copy there), for the absmax pass of scaled
//               fp16 / fp8 states beside an unscaled master, where the weight's new value is not needed.
struct AdamKernel {
  using Options = AdamOptions;
  using Consts = AdamConsts;
  static constexpr const char* kName = "adam";
  static constexpr int kStates = 2;
  static bool uses_state(const Options&, int) { return true; }
  static Consts consts(const Options& o, const GroupHyper& g) { return adam_consts(o, g); }
  MR_HD static void element(float& p, float g, float& m, float& v, const Consts& c) { adam_element(p, g, m, v, c); }
  MR_HD static void states(float& p, float g, float& m, float& v, const Consts& c) { adam_moments(p, g, m, v, c); }
};
struct SgdKernel {
  using Options = SgdOptions;
  using Consts = SgdConsts;
  static constexpr const char* kName = "sgd";
  static constexpr int kStates = 1;
  static bool uses_state(const Options& o, int i) { return i == 0 && o.momentum != 0.0; }
  static Consts consts(const Options& o, const GroupHyper& g) { return sgd_consts(o, g); }
  MR_HD static void element(float& p, float g, float& buf, float&, const Consts& c) { sgd_element(p, g, buf, c); }
  MR_HD static void states(float& p, float g, float& buf, float& s1, const Consts& c) { element(p, g, buf, s1, c); }
};
struct LionKernel {
  using Options = LionOptions;
  using Consts = LionConsts;
  static constexpr const char* kName = "lion";
  static constexpr int kStates = 1;
  static bool uses_state(const Options&, int i) { return i == 0; }
  static Consts consts(const Options& o, const GroupHyper& g) { return lion_consts(o, g); }
  MR_HD static void element(float& p, float g, float& m, float&, const Consts& c) { lion_element(p, g, m, c); }
  MR_HD static void states(float& p, float g, float& m, float& s1, const Consts& c) { element(p, g, m, s1, c); }
};

// The steps of the elementwise kernels, one per line of elementwise_kernels.def (adam_step, sgd_step, lion_step):
//   void <name>_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups,
//                    const <Name>Options& o, const StepControl& ctl = {});
// declared by this macro in ref:: and cpu:: below and in gpu:: (gpu.h).
#define MR_ELEMENTWISE_STEP_DECL(Name, name)                                                                      \
  void name##_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const Name##Options& o, \
                   const StepControl& ctl = {});

namespace ref {
#define MR_ELEMENTWISE_KERNEL MR_ELEMENTWISE_STEP_DECL
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
// One pass over the gradients: detect non-finite values and sum the squares of grad * inv_scale; with
// `in_place` also store grad * inv_scale (torch._amp_foreach_non_finite_check_and_unscale_).
UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place);
}  // namespace ref

namespace cpu {
// Same contracts as ref::, bit-equal results, any thread count (OpenMP teams of threads() threads).
#define MR_ELEMENTWISE_KERNEL MR_ELEMENTWISE_STEP_DECL
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
// Deterministic: the sum does not depend on the thread count.
UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place);

// Benchmark baseline: the same chunked, threaded, prefetching pass over an fp32 slot list's arrays with trivial arithmetic:
// reads param, grad and the states present (exp_avg, exp_avg_sq), writes param and the states (p += g, m += g, v += g).
void data_movement(std::span<const TensorSlot> slots);

// Threads the CPU kernels (Adam/SGD/Lion, unscale, Muon's elementwise passes) run on. The kernels ask for this
// many explicitly rather than inheriting OpenMP's ambient default: LibTorch lowers that default to its own count
// of physical cores when it initialises (to 1 on some virtual machines), which would silently serialise every
// optimizer step in a torch-linked process. Default: default_threads(); set_threads(n <= 0) restores it.
int threads();
void set_threads(int n);
// OMP_NUM_THREADS (its first entry) when it is a positive integer, else every processor this process may run on.
int default_threads();
// The rule behind default_threads(), for tests: `omp_num_threads` is the variable's value (nullptr when unset).
int threads_from(const char* omp_num_threads, int processors);

// Which SIMD variant the dispatcher picks on this machine ("x86-64-v4", "x86-64-v3", "default").
std::string simd_level();
}  // namespace cpu

}  // namespace mr::optim
