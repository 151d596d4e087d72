// The CUDA multi-tensor elementwise steps (gpu.h): Adam/AdamW, SGD and Lion over a whole tensor list in one launch
// (a work list of kChunk-element chunks, one block per chunk), and unscale + found-inf. The arithmetic is
// elementwise.h's, compiled with -fmad=false and IEEE div/sqrt, so the results are bit-equal to mr::optim::ref.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/gpu.h"
#include "optim/gpu_device.cuh"

namespace mr::optim::gpu {
namespace {

using detail::check;
using detail::check_launch;
using detail::kChunk;
namespace geom = ::mr::optim::geom;
using detail::kIlp;
using detail::kThreads;
using detail::Scratch;
using detail::scratch;

// ---- elementwise multi-tensor steps -------------------------------------------------------------------------

struct DevSlot {
  void* param;
  const void* grad;
  void* master;
  const float* master_scale;
  uint16_t* remainder;
  void* st[2];
  const float* st_scale[2];
  int64_t numel;
  int32_t group;
  uint8_t param_dtype, grad_dtype, master_dtype;
  uint8_t st_dtype[2];
  uint8_t st_used[2];
  uint8_t scaled[3];  // fp16 / fp8 with a scale: exp_avg, exp_avg_sq, master
};

using DevWork = geom::WorkItem;  // the work list: launch_geometry.h

__device__ __forceinline__ float dload(const void* p, uint8_t d, int64_t i) {
  if (d == static_cast<uint8_t>(DType::F32)) return static_cast<const float*>(p)[i];
  if (d == static_cast<uint8_t>(DType::E4M3)) return e4m3_to_f32(static_cast<const uint8_t*>(p)[i]);
  uint16_t h = static_cast<const uint16_t*>(p)[i];
  return d == static_cast<uint8_t>(DType::BF16) ? bf16_to_f32(h) : f16_to_f32(h);
}
__device__ __forceinline__ void dstore(void* p, uint8_t d, int64_t i, float x) {
  if (d == static_cast<uint8_t>(DType::F32)) static_cast<float*>(p)[i] = x;
  else if (d == static_cast<uint8_t>(DType::BF16)) static_cast<uint16_t*>(p)[i] = f32_to_bf16(x);
  else if (d == static_cast<uint8_t>(DType::E4M3)) static_cast<uint8_t*>(p)[i] = f32_to_e4m3(x);
  else static_cast<uint16_t*>(p)[i] = f32_to_f16(x);
}

// The dtype of scaled buffer k (0 exp_avg, 1 exp_avg_sq, 2 master) and its new scale from the absmax pass.
__device__ __forceinline__ DType scaled_dtype(const DevSlot& s, int k) {
  return static_cast<DType>(k < 2 ? s.st_dtype[k] : s.master_dtype);
}
__device__ __forceinline__ StateScale new_scale(const DevSlot& s, const unsigned* amax, int slot, int k) {
  return state_scale(scaled_dtype(s, k), __uint_as_float(amax[slot * 3 + k]));
}

// The step of kernel K (kernels.h's <Name>Kernel: K::element, and K::states where only the states' new values
// are needed). kPass 0: absmax of the new values of the scaled fp16 / fp8 states (nothing stored). kPass 1: the
// update.
template <class K, int kPass>
__global__ void __launch_bounds__(kThreads) multi_tensor_kernel(const DevSlot* __restrict__ slots,
                                                                const typename K::Consts* __restrict__ consts,
                                                                const DevWork* __restrict__ work, float gs,
                                                                const int32_t* noop, int32_t* found_inf,
                                                                unsigned* amax) {
  if (noop && *noop) return;
  const DevWork w = work[blockIdx.x];
  const DevSlot& s = slots[w.slot];
  const typename K::Consts c = consts[s.group];
  float rs[3] = {1.0f, 1.0f, 1.0f}, old[3] = {1.0f, 1.0f, 1.0f};
  for (int k = 0; k < 2; ++k)
    if (s.scaled[k]) old[k] = *s.st_scale[k];
  if (s.scaled[2]) old[2] = *s.master_scale;
  if (kPass == 1)
    for (int k = 0; k < 3; ++k)
      if (s.scaled[k]) rs[k] = new_scale(s, amax, w.slot, k).enc;
  float mx[3] = {0.0f, 0.0f, 0.0f};
  bool bad = false;
  const int64_t end = w.begin + w.len, rounds = geom::ilp_rounds(w.len);
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t r = 0; r < rounds; ++r) {
    float p[kIlp], g[kIlp], a[kIlp], b[kIlp];
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int64_t i = geom::ilp_index(w.begin, r, t, u);
      if (i >= end) continue;
      g[u] = dload(s.grad, s.grad_dtype, i);
      if (s.remainder) p[u] = join_remainder(static_cast<const uint16_t*>(s.param)[i], s.remainder[i]);
      else if (s.master) p[u] = dload(s.master, s.master_dtype, i) * (s.scaled[2] ? old[2] : 1.0f);
      else p[u] = dload(s.param, s.param_dtype, i);
      a[u] = s.st_used[0] ? dload(s.st[0], s.st_dtype[0], i) * (s.scaled[0] ? old[0] : 1.0f) : 0.0f;
      b[u] = s.st_used[1] ? dload(s.st[1], s.st_dtype[1], i) * (s.scaled[1] ? old[1] : 1.0f) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int64_t i = geom::ilp_index(w.begin, r, t, u);
      if (i >= end) continue;
      float gg = g[u] * gs;
      bad = bad || !finite_(gg);
      // No step needed for the absmax (p is a register copy: SGD and Lion may run the whole step).
      if (kPass == 0 && !s.scaled[2]) K::states(p[u], gg, a[u], b[u], c);
      else K::element(p[u], gg, a[u], b[u], c);
      if (kPass == 0) {
        mx[0] = fmaxf(mx[0], fabsf(a[u]));
        mx[1] = fmaxf(mx[1], fabsf(b[u]));
        mx[2] = fmaxf(mx[2], fabsf(p[u]));
        continue;
      }
      if (s.st_used[0]) dstore(s.st[0], s.st_dtype[0], i, s.scaled[0] ? a[u] * rs[0] : a[u]);
      if (s.st_used[1]) dstore(s.st[1], s.st_dtype[1], i, s.scaled[1] ? b[u] * rs[1] : b[u]);
      if (s.remainder) {
        uint16_t hi, lo;
        split_remainder(p[u], hi, lo);
        static_cast<uint16_t*>(s.param)[i] = hi;
        s.remainder[i] = lo;
      } else {
        if (s.master) dstore(s.master, s.master_dtype, i, s.scaled[2] ? p[u] * rs[2] : p[u]);
        dstore(s.param, s.param_dtype, i, p[u]);
      }
    }
  }
  if (kPass == 0) {
    for (int k = 0; k < 3; ++k) {
      float v = mx[k];
      for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
      if ((threadIdx.x & 31) == 0 && s.scaled[k]) atomicMax(&amax[w.slot * 3 + k], __float_as_uint(v));
    }
  } else if (bad && found_inf) {
    *found_inf = 1;
  }
}

// A skipped step (noop) leaves the scales as they are: its absmax pass found nothing (amax is zero).
__global__ void write_scales_kernel(const DevSlot* slots, int n, const unsigned* amax, const int32_t* noop) {
  if (noop && *noop) return;
  const int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x);
  if (i >= n) return;
  const DevSlot& s = slots[i];
  for (int k = 0; k < 2; ++k)
    if (s.scaled[k]) *const_cast<float*>(s.st_scale[k]) = new_scale(s, amax, static_cast<int>(i), k).dec;
  if (s.scaled[2]) *const_cast<float*>(s.master_scale) = new_scale(s, amax, static_cast<int>(i), 2).dec;
}

// Every buffer on a multiple of its element size (geom::aligned_for), else std::invalid_argument naming it: the
// device would fault on a misaligned load in the middle of a step.
void require_aligned(const void* p, DType t, size_t slot, const char* what) {
  if (p && !geom::aligned_for(p, t))
    throw std::invalid_argument("slot " + std::to_string(slot) + ": the " + what + " buffer is not aligned to its " +
                                std::to_string(dtype_size(t)) + "-byte elements");
}
void check_aligned(std::span<const TensorSlot> slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const TensorSlot& s = slots[i];
    require_aligned(s.param, s.param_dtype, i, "param");
    require_aligned(s.grad, s.grad_dtype, i, "grad");
    require_aligned(s.master, s.master_dtype, i, "master");
    require_aligned(s.remainder, DType::BF16, i, "remainder");
    require_aligned(s.exp_avg, s.exp_avg_dtype, i, "exp_avg");
    require_aligned(s.exp_avg_sq, s.exp_avg_sq_dtype, i, "exp_avg_sq");
  }
}
void check_aligned(std::span<const GradSlot> grads) {
  for (size_t i = 0; i < grads.size(); ++i) require_aligned(grads[i].grad, grads[i].dtype, i, "grad");
}

// One step of kernel K over the slot list: checks, per-group constants, the metadata upload and the launches.
template <class K>
void run_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const typename K::Options& o,
              const StepControl& ctl) {
  using Consts = typename K::Consts;
  const bool used0 = K::uses_state(o, 0), used1 = K::kStates > 1 && K::uses_state(o, 1);
  check_slots(slots, groups, K::kName, used0, used1);
  check_aligned(slots);
  std::vector<Consts> consts;
  for (const auto& g : groups) consts.push_back(K::consts(o, g));
  std::vector<DevSlot> ds;
  bool any_scaled = false;
  for (size_t i = 0; i < slots.size(); ++i) {
    const TensorSlot& s = slots[i];
    DevSlot d{};
    d.param = s.param;
    d.grad = s.grad;
    d.master = s.master;
    d.master_scale = s.master_scale;
    d.remainder = s.remainder;
    d.st[0] = s.exp_avg;
    d.st[1] = s.exp_avg_sq;
    d.st_scale[0] = s.exp_avg_scale;
    d.st_scale[1] = s.exp_avg_sq_scale;
    d.numel = s.numel;
    d.group = s.group;
    d.param_dtype = static_cast<uint8_t>(s.param_dtype);
    d.grad_dtype = static_cast<uint8_t>(s.grad_dtype);
    d.master_dtype = static_cast<uint8_t>(s.master_dtype);
    d.st_dtype[0] = static_cast<uint8_t>(s.exp_avg_dtype);
    d.st_dtype[1] = static_cast<uint8_t>(s.exp_avg_sq_dtype);
    d.st_used[0] = used0;
    d.st_used[1] = used1;
    d.scaled[0] = used0 && scaled_state(s.exp_avg_dtype);
    d.scaled[1] = used1 && scaled_state(s.exp_avg_sq_dtype);
    d.scaled[2] = s.master && s.master_dtype == DType::F16;
    any_scaled = any_scaled || (s.numel > 0 && (d.scaled[0] || d.scaled[1] || d.scaled[2]));
    ds.push_back(d);
  }
  const std::vector<DevWork> work = geom::chunk_list(slots, [](const TensorSlot& s) { return s.numel; }, kChunk);
  if (work.empty()) return;
  // Metadata: slots | consts | work | amax, in one upload.
  const geom::StepMeta lay = geom::step_meta(ds.size(), sizeof(DevSlot), consts.size(), sizeof(Consts), work.size());
  std::vector<char> host(lay.total, 0);
  std::memcpy(host.data(), ds.data(), ds.size() * sizeof(DevSlot));
  std::memcpy(host.data() + lay.consts, consts.data(), consts.size() * sizeof(Consts));
  std::memcpy(host.data() + lay.work, work.data(), work.size() * sizeof(DevWork));
  char* dev = static_cast<char*>(scratch(Scratch::StepMeta, lay.total));
  // Asynchronous on the default stream: ordered after the previous step's kernels (which may still read the old
  // metadata) and before this step's, without making the host wait for the device. A pageable source is staged
  // before the call returns, so `host` may go.
  check(cudaMemcpyAsync(dev, host.data(), lay.total, cudaMemcpyHostToDevice, 0), "upload step metadata");
  auto* d_slots = reinterpret_cast<const DevSlot*>(dev);
  auto* d_consts = reinterpret_cast<const Consts*>(dev + lay.consts);
  auto* d_work = reinterpret_cast<const DevWork*>(dev + lay.work);
  auto* d_amax = reinterpret_cast<unsigned*>(dev + lay.amax);
  const unsigned blocks = geom::blocks_for_work(work.size());
  if (any_scaled) {
    multi_tensor_kernel<K, 0><<<blocks, kThreads>>>(d_slots, d_consts, d_work, ctl.grad_scale, ctl.noop_flag, nullptr, d_amax);
    check_launch("optimizer absmax pass");
  }
  multi_tensor_kernel<K, 1><<<blocks, kThreads>>>(d_slots, d_consts, d_work, ctl.grad_scale, ctl.noop_flag, ctl.found_inf, d_amax);
  check_launch("optimizer update pass");
  if (any_scaled) {
    const int n = static_cast<int>(ds.size());
    write_scales_kernel<<<geom::blocks_per_item(n), geom::kNormThreads>>>(d_slots, n, d_amax, ctl.noop_flag);
    check_launch("optimizer scale update");
  }
}

// ---- unscale + check -----------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads) unscale_kernel(const DevSlot* slots, const DevWork* work, float inv,
                                                            int in_place, double* partial, int32_t* found) {
  const DevWork w = work[blockIdx.x];
  const DevSlot& s = slots[w.slot];
  double sum = 0.0;
  bool bad = false;
  for (int64_t i = geom::block_stride_first(w.begin, static_cast<int>(threadIdx.x)); i < w.begin + w.len;
       i += geom::block_stride_step()) {
    const float y = unscale_element(dload(s.grad, s.grad_dtype, i), inv, sum, bad);  // the CPU's element function
    if (in_place) dstore(const_cast<void*>(s.grad), s.grad_dtype, i, y);
  }
  __shared__ double red[kThreads];
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int off = kThreads / 2; off > 0; off /= 2) {
    if (static_cast<int>(threadIdx.x) < off) red[threadIdx.x] += red[threadIdx.x + off];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = red[0];
  if (bad) *found = 1;
}

}  // namespace

// adam_step, sgd_step, lion_step (elementwise_kernels.def).
#define MR_ELEMENTWISE_KERNEL(Name, name)                                                                         \
  void name##_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const Name##Options& o, \
                   const StepControl& ctl) {                                                                      \
    run_step<Name##Kernel>(slots, groups, o, ctl);                                                                \
  }
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL

UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place) {
  check_aligned(grads);
  std::vector<DevSlot> ds;
  for (size_t i = 0; i < grads.size(); ++i) {
    DevSlot d{};
    d.grad = grads[i].grad;
    d.grad_dtype = static_cast<uint8_t>(grads[i].dtype);
    d.numel = grads[i].numel;
    ds.push_back(d);
  }
  const std::vector<DevWork> work = geom::chunk_list(grads, [](const GradSlot& g) { return g.numel; }, kChunk);
  UnscaleResult r;
  if (work.empty()) return r;
  const geom::UnscaleMeta lay = geom::unscale_meta(ds.size(), sizeof(DevSlot), work.size());
  std::vector<char> host(lay.total, 0);
  std::memcpy(host.data(), ds.data(), ds.size() * sizeof(DevSlot));
  std::memcpy(host.data() + lay.work, work.data(), work.size() * sizeof(DevWork));
  char* dev = static_cast<char*>(scratch(Scratch::UnscaleMeta, lay.total));
  check(cudaMemcpy(dev, host.data(), lay.total, cudaMemcpyHostToDevice), "upload unscale metadata");
  unscale_kernel<<<geom::blocks_for_work(work.size()), kThreads>>>(
      reinterpret_cast<const DevSlot*>(dev), reinterpret_cast<const DevWork*>(dev + lay.work), inv_scale,
      in_place ? 1 : 0, reinterpret_cast<double*>(dev + lay.partial), reinterpret_cast<int32_t*>(dev + lay.flag));
  check_launch("unscale_and_check");
  std::vector<double> partial(work.size());
  int32_t flag = 0;
  check(cudaMemcpy(partial.data(), dev + lay.partial, partial.size() * sizeof(double), cudaMemcpyDeviceToHost),
        "download");
  check(cudaMemcpy(&flag, dev + lay.flag, sizeof(flag), cudaMemcpyDeviceToHost), "download");
  for (double p : partial) r.sum_sq += p;
  r.found_inf = flag != 0;
  return r;
}

}  // namespace mr::optim::gpu
