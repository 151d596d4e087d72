// The reference optimizer steps: one element at a time, one thread, every conversion spelled out. The fast CPU
// kernels and the CUDA kernels must reproduce these results bit for bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/kernels.h"
#include "optim/state_codec.h"

namespace mr::optim::ref {
namespace {

// An optimizer state (or fp16 master): fp32, bf16, or fp16 / fp8 times a per-tensor scale.
struct State {
  void* buf;
  DType dtype;
  float* scale;

  float get(int64_t i) const {
    const float x = load_element(buf, dtype, i);
    return scaled_state(dtype) ? x * *scale : x;
  }

  // Stores a whole tensor's new values; an fp16 or fp8 state is scaled from their absmax first (state_scale).
  void put_all(const std::vector<float>& x) const {
    encode_state(x.data(), static_cast<int64_t>(x.size()), dtype, buf, scale);
  }
};

// The fp32 master value of element i, wherever it lives.
float load_master(const TensorSlot& s, int64_t i) {
  if (s.remainder) return join_remainder(static_cast<const uint16_t*>(s.param)[i], s.remainder[i]);
  if (s.master) return State{s.master, s.master_dtype, s.master_scale}.get(i);
  return load_element(s.param, s.param_dtype, i);
}

// Writes the new master values and the parameter derived from them.
void store_master(const TensorSlot& s, const std::vector<float>& p) {
  if (s.remainder) {
    for (size_t i = 0; i < p.size(); ++i) split_remainder(p[i], static_cast<uint16_t*>(s.param)[i], s.remainder[i]);
    return;
  }
  if (s.master) State{s.master, s.master_dtype, s.master_scale}.put_all(p);
  for (size_t i = 0; i < p.size(); ++i) store_element(s.param, s.param_dtype, static_cast<int64_t>(i), p[i]);
}

// The step of kernel K (kernels.h's <Name>Kernel): K::element(p, g, state0, state1, consts) over every element
// of every slot.
template <class K>
void run(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const typename K::Options& o,
         const StepControl& ctl) {
  constexpr int kStates = K::kStates;
  check_slots(slots, groups, K::kName, K::uses_state(o, 0), kStates > 1 && K::uses_state(o, 1));
  std::vector<typename K::Consts> consts;
  for (const auto& g : groups) consts.push_back(K::consts(o, g));
  if (ctl.noop_flag && *ctl.noop_flag) return;
  bool found_inf = false;
  for (const TensorSlot& s : slots) {
    const typename K::Consts& c = consts[static_cast<size_t>(s.group)];
    State st[2] = {{s.exp_avg, s.exp_avg_dtype, s.exp_avg_scale}, {s.exp_avg_sq, s.exp_avg_sq_dtype, s.exp_avg_sq_scale}};
    std::vector<float> p(static_cast<size_t>(s.numel)), x0(p.size()), x1(p.size());
    for (int64_t i = 0; i < s.numel; ++i) {
      float g = load_element(s.grad, s.grad_dtype, i) * ctl.grad_scale;
      found_inf = found_inf || !finite_(g);
      float pi = load_master(s, i);
      float s0 = kStates > 0 && st[0].buf ? st[0].get(i) : 0.0f;
      float s1 = kStates > 1 ? st[1].get(i) : 0.0f;
      K::element(pi, g, s0, s1, c);
      p[static_cast<size_t>(i)] = pi;
      x0[static_cast<size_t>(i)] = s0;
      x1[static_cast<size_t>(i)] = s1;
    }
    store_master(s, p);
    if (kStates > 0 && st[0].buf) st[0].put_all(x0);
    if (kStates > 1) st[1].put_all(x1);
  }
  if (found_inf && ctl.found_inf) *ctl.found_inf = 1;
}

}  // namespace

// adam_step, sgd_step, lion_step (elementwise_kernels.def).
#define MR_ELEMENTWISE_KERNEL(Name, name)                                                                         \
  void name##_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const Name##Options& o, \
                   const StepControl& ctl) {                                                                      \
    run<Name##Kernel>(slots, groups, o, ctl);                                                                     \
  }
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL

UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place) {
  UnscaleResult r;
  for (const GradSlot& s : grads) {
    for (int64_t i = 0; i < s.numel; ++i) {
      const float x = unscale_element(load_element(s.grad, s.dtype, i), inv_scale, r.sum_sq, r.found_inf);
      if (in_place) store_element(s.grad, s.dtype, i, x);
    }
  }
  return r;
}

}  // namespace mr::optim::ref
