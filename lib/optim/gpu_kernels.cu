// CUDA implementations of the optimizer kernels (see gpu.h). Built with -fmad=false: the only fused
// multiply-adds are the explicit ones of elementwise.h, so the elementwise steps are bit-equal to the CPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/gpu.h"
#include "optim/muon_plan.h"

namespace mr::optim::gpu {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(s));
}
void check_launch(const char* what) { check(cudaGetLastError(), what); }

cublasHandle_t blas() {
  static thread_local cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    check(cublasCreate(&x), "cublasCreate");
    return x;
  }();
  return h;
}

// A device scratch area per purpose, grown on demand and kept (no cudaMalloc in the steady state).
void* scratch(int which, size_t bytes) {
  static thread_local std::map<int, DeviceBuffer> bufs;
  DeviceBuffer& b = bufs[which];
  if (b.bytes() < bytes) b = DeviceBuffer(std::max(bytes, b.bytes() * 2));
  return b.get();
}

constexpr int kThreads = 256;
constexpr int kIlp = 4;
constexpr int64_t kChunk = 16384;  // elements per block

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
  uint8_t scaled[3];  // fp16-with-scale: exp_avg, exp_avg_sq, master
};

struct DevWork {
  int32_t slot;
  int64_t begin, len;
};

__device__ __forceinline__ float dload(const void* p, uint8_t d, int64_t i) {
  if (d == static_cast<uint8_t>(DType::F32)) return static_cast<const float*>(p)[i];
  uint16_t h = static_cast<const uint16_t*>(p)[i];
  return d == static_cast<uint8_t>(DType::BF16) ? bf16_to_f32(h) : f16_to_f32(h);
}
__device__ __forceinline__ void dstore(void* p, uint8_t d, int64_t i, float x) {
  if (d == static_cast<uint8_t>(DType::F32)) static_cast<float*>(p)[i] = x;
  else if (d == static_cast<uint8_t>(DType::BF16)) static_cast<uint16_t*>(p)[i] = f32_to_bf16(x);
  else static_cast<uint16_t*>(p)[i] = f32_to_f16(x);
}

__device__ __forceinline__ float new_rscale(const unsigned* amax, int slot, int k) {
  float s = __uint_as_float(amax[slot * 3 + k]) / 32752.0f;
  return s > 0.0f ? 1.0f / s : 0.0f;
}

struct AdamG {
  using Consts = AdamConsts;
  __device__ static void apply(float& p, float g, float& s0, float& s1, const Consts& c) { adam_element(p, g, s0, s1, c); }
};
struct SgdG {
  using Consts = SgdConsts;
  __device__ static void apply(float& p, float g, float& s0, float&, const Consts& c) { sgd_element(p, g, s0, c); }
};
struct LionG {
  using Consts = LionConsts;
  __device__ static void apply(float& p, float g, float& s0, float&, const Consts& c) { lion_element(p, g, s0, c); }
};

// kPass 0: absmax of the new values of the scaled fp16 states (nothing stored). kPass 1: the update.
template <class Op, int kPass>
__global__ void __launch_bounds__(kThreads) multi_tensor_kernel(const DevSlot* __restrict__ slots,
                                                                const typename Op::Consts* __restrict__ consts,
                                                                const DevWork* __restrict__ work, float gs,
                                                                const int32_t* noop, int32_t* found_inf,
                                                                unsigned* amax) {
  if (noop && *noop) return;
  const DevWork w = work[blockIdx.x];
  const DevSlot& s = slots[w.slot];
  const typename Op::Consts c = consts[s.group];
  float rs[3] = {1.0f, 1.0f, 1.0f}, old[3] = {1.0f, 1.0f, 1.0f};
  for (int k = 0; k < 2; ++k)
    if (s.scaled[k]) old[k] = *s.st_scale[k];
  if (s.scaled[2]) old[2] = *s.master_scale;
  if (kPass == 1)
    for (int k = 0; k < 3; ++k)
      if (s.scaled[k]) rs[k] = new_rscale(amax, w.slot, k);
  float mx[3] = {0.0f, 0.0f, 0.0f};
  bool bad = false;
  const int64_t end = w.begin + w.len;
  for (int64_t base = w.begin + threadIdx.x; base < end; base += int64_t{kThreads} * kIlp) {
    float p[kIlp], g[kIlp], a[kIlp], b[kIlp];
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int64_t i = base + int64_t{u} * kThreads;
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
      const int64_t i = base + int64_t{u} * kThreads;
      if (i >= end) continue;
      float gg = g[u] * gs;
      bad = bad || !finite_(gg);
      Op::apply(p[u], gg, a[u], b[u], c);
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

__global__ void write_scales_kernel(const DevSlot* slots, int n, const unsigned* amax) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const DevSlot& s = slots[i];
  for (int k = 0; k < 2; ++k)
    if (s.scaled[k]) *const_cast<float*>(s.st_scale[k]) = __uint_as_float(amax[i * 3 + k]) / 32752.0f;
  if (s.scaled[2]) *const_cast<float*>(s.master_scale) = __uint_as_float(amax[i * 3 + 2]) / 32752.0f;
}

template <class Op, class Consts>
void run_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const std::vector<Consts>& consts,
              bool used0, bool used1, const StepControl& ctl) {
  std::vector<DevSlot> ds;
  std::vector<DevWork> work;
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
    d.scaled[0] = used0 && s.exp_avg_dtype == DType::F16;
    d.scaled[1] = used1 && s.exp_avg_sq_dtype == DType::F16;
    d.scaled[2] = s.master && s.master_dtype == DType::F16;
    any_scaled = any_scaled || (s.numel > 0 && (d.scaled[0] || d.scaled[1] || d.scaled[2]));
    ds.push_back(d);
    for (int64_t b = 0; b < s.numel; b += kChunk)
      work.push_back({static_cast<int32_t>(i), b, std::min(kChunk, s.numel - b)});
  }
  if (work.empty()) return;
  (void)groups;
  // Metadata: slots | consts | work | amax, in one upload.
  auto align = [](size_t x) { return (x + 255) / 256 * 256; };
  const size_t o_consts = align(ds.size() * sizeof(DevSlot));
  const size_t o_work = o_consts + align(consts.size() * sizeof(Consts));
  const size_t o_amax = o_work + align(work.size() * sizeof(DevWork));
  const size_t total = o_amax + align(ds.size() * 3 * sizeof(unsigned));
  std::vector<char> host(total, 0);
  std::memcpy(host.data(), ds.data(), ds.size() * sizeof(DevSlot));
  std::memcpy(host.data() + o_consts, consts.data(), consts.size() * sizeof(Consts));
  std::memcpy(host.data() + o_work, work.data(), work.size() * sizeof(DevWork));
  char* dev = static_cast<char*>(scratch(0, total));
  check(cudaMemcpy(dev, host.data(), total, cudaMemcpyHostToDevice), "upload step metadata");
  auto* d_slots = reinterpret_cast<const DevSlot*>(dev);
  auto* d_consts = reinterpret_cast<const Consts*>(dev + o_consts);
  auto* d_work = reinterpret_cast<const DevWork*>(dev + o_work);
  auto* d_amax = reinterpret_cast<unsigned*>(dev + o_amax);
  const unsigned blocks = static_cast<unsigned>(work.size());
  if (any_scaled) {
    multi_tensor_kernel<Op, 0><<<blocks, kThreads>>>(d_slots, d_consts, d_work, ctl.grad_scale, ctl.noop_flag, nullptr, d_amax);
    check_launch("optimizer absmax pass");
  }
  multi_tensor_kernel<Op, 1><<<blocks, kThreads>>>(d_slots, d_consts, d_work, ctl.grad_scale, ctl.noop_flag, ctl.found_inf, d_amax);
  check_launch("optimizer update pass");
  if (any_scaled) {
    const int n = static_cast<int>(ds.size());
    write_scales_kernel<<<(n + 127) / 128, 128>>>(d_slots, n, d_amax);
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
  for (int64_t i = w.begin + threadIdx.x; i < w.begin + w.len; i += kThreads) {
    float g = dload(s.grad, s.grad_dtype, i);
    bad = bad || !finite_(g);
    float y = g * inv;
    sum += static_cast<double>(y) * static_cast<double>(y);
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

// ---- Newton-Schulz -------------------------------------------------------------------------------------------

__global__ void sumsq_kernel(const float* x, int64_t per, int64_t blocks_per, double* partial) {
  const int64_t b = blockIdx.y;
  const float* xb = x + b * per;
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < per; i += blocks_per * kThreads)
    s += static_cast<double>(xb[i]) * static_cast<double>(xb[i]);
  __shared__ double red[kThreads];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int off = kThreads / 2; off > 0; off /= 2) {
    if (static_cast<int>(threadIdx.x) < off) red[threadIdx.x] += red[threadIdx.x + off];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[b * blocks_per + blockIdx.x] = red[0];
}

__global__ void norm_kernel(const double* partial, int64_t blocks_per, int64_t batch, float eps, float* denom) {
  int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (b >= batch) return;
  double s = 0.0;
  for (int64_t i = 0; i < blocks_per; ++i) s += partial[b * blocks_per + i];
  denom[b] = fmaxf(static_cast<float>(sqrt(s)), eps);
}

// out[b] (m x n, T) = (transpose ? x[b]^T : x[b]) / denom[b]; x[b] is rows x cols.
template <class T>
__global__ void prepare_kernel(const float* x, T* out, int64_t rows, int64_t cols, bool transpose, const float* denom) {
  __shared__ float tile[32][33];
  const int64_t b = blockIdx.z;
  const float* xb = x + b * rows * cols;
  T* ob = out + b * rows * cols;
  const float d = denom[b];
  // The tile of the *source* at (blockIdx.y*32, blockIdx.x*32).
  const int64_t r0 = int64_t{blockIdx.y} * 32, c0 = int64_t{blockIdx.x} * 32;
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[k][threadIdx.x] = xb[r * cols + c] / d;
  }
  __syncthreads();
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    float v;
    int64_t idx;
    if (transpose) {  // out is cols x rows: out[c][r]
      int64_t c = c0 + k, r = r0 + threadIdx.x;
      if (c >= cols || r >= rows) continue;
      v = tile[threadIdx.x][k];
      idx = c * rows + r;
    } else {
      int64_t r = r0 + k, c = c0 + threadIdx.x;
      if (r >= rows || c >= cols) continue;
      v = tile[k][threadIdx.x];
      idx = r * cols + c;
    }
    if constexpr (sizeof(T) == 2) reinterpret_cast<uint16_t*>(ob)[idx] = f32_to_bf16(v);
    else ob[idx] = v;
  }
}

// out[b] (rows x cols fp32) = (transpose ? w[b]^T : w[b]) with w[b] m x n.
template <class T>
__global__ void finish_kernel(const T* w, float* out, int64_t rows, int64_t cols, bool transpose) {
  __shared__ float tile[32][33];
  const int64_t b = blockIdx.z;
  const int64_t m = transpose ? cols : rows, n = transpose ? rows : cols;
  const T* wb = w + b * rows * cols;
  float* ob = out + b * rows * cols;
  const int64_t r0 = int64_t{blockIdx.y} * 32, c0 = int64_t{blockIdx.x} * 32;  // tile of w (m x n)
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < m && c < n) {
      float v;
      if constexpr (sizeof(T) == 2) v = bf16_to_f32(reinterpret_cast<const uint16_t*>(wb)[r * n + c]);
      else v = wb[r * n + c];
      tile[k][threadIdx.x] = v;
    }
  }
  __syncthreads();
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    if (transpose) {
      int64_t c = c0 + k, r = r0 + threadIdx.x;  // out[c][r] = w[r][c]
      if (c < n && r < m) ob[c * m + r] = tile[threadIdx.x][k];
    } else {
      int64_t r = r0 + k, c = c0 + threadIdx.x;
      if (r < m && c < n) ob[r * n + c] = tile[k][threadIdx.x];
    }
  }
}

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  size_t elem;
};
GemmTypes gemm_types(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::Medium: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2};
    case MatmulPrecision::High: return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4};
    case MatmulPrecision::Highest: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, 4};
  }
  return {CUDA_R_32F, CUBLAS_COMPUTE_32F, 4};
}

// Column-major strided-batched GEMM helper.
void gemm_cm(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
             int64_t lda, int64_t sa, const void* b, int64_t ldb, int64_t sb, float beta, void* c, int64_t ldc,
             int64_t sc, int64_t batch, const GemmTypes& t) {
  check(cublasGemmStridedBatchedEx(blas(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha,
                                   a, t.data, static_cast<int>(lda), sa, b, t.data, static_cast<int>(ldb), sb, &beta, c,
                                   t.data, static_cast<int>(ldc), sc, static_cast<int>(batch), t.compute,
                                   CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

void ns_device(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols, const NsOptions& o) {
  const auto sched = ns_schedule(o.coefficients, o.steps);
  const bool transpose = rows > cols;
  const int64_t m = transpose ? cols : rows, n = transpose ? rows : cols, mn = m * n, mm = m * m;
  const GemmTypes t = gemm_types(o.precision);
  const int64_t blocks_per = std::min<int64_t>(1024, (mn + kThreads - 1) / kThreads);
  char* w = static_cast<char*>(scratch(1, static_cast<size_t>(batch * mn) * t.elem));
  char* y = static_cast<char*>(scratch(2, static_cast<size_t>(batch * mn) * t.elem));
  char* a = static_cast<char*>(scratch(3, static_cast<size_t>(batch * mm) * t.elem));
  char* bm = static_cast<char*>(scratch(4, static_cast<size_t>(batch * mm) * t.elem));
  auto* partial = static_cast<double*>(scratch(5, static_cast<size_t>(batch * blocks_per) * sizeof(double)));
  auto* denom = static_cast<float*>(scratch(6, static_cast<size_t>(batch) * sizeof(float)));
  sumsq_kernel<<<dim3(static_cast<unsigned>(blocks_per), static_cast<unsigned>(batch)), kThreads>>>(x, mn, blocks_per, partial);
  check_launch("NS sum of squares");
  norm_kernel<<<static_cast<unsigned>((batch + 127) / 128), 128>>>(partial, blocks_per, batch, o.eps, denom);
  check_launch("NS norm");
  dim3 tb(32, 8), tg(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32), static_cast<unsigned>(batch));
  if (t.elem == 2) prepare_kernel<uint16_t><<<tg, tb>>>(x, reinterpret_cast<uint16_t*>(w), rows, cols, transpose, denom);
  else prepare_kernel<float><<<tg, tb>>>(x, reinterpret_cast<float*>(w), rows, cols, transpose, denom);
  check_launch("NS prepare");
  // Row-major W (m x n) is the column-major n x m matrix Wc = W^T.
  //   A = W W^T      -> A = Wc^T Wc                    (symmetric: layouts agree)
  //   B = b A + c A A
  //   Y = a W + B W  -> Yc = a Wc + Wc B               (B symmetric)
  for (const NsCoeff& k : sched) {
    const float fa = static_cast<float>(k.a), fb = static_cast<float>(k.b), fc = static_cast<float>(k.c);
    gemm_cm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, 1.0f, w, n, mn, w, n, mn, 0.0f, a, m, mm, batch, t);
    check(cudaMemcpyAsync(y, w, static_cast<size_t>(batch * mn) * t.elem, cudaMemcpyDeviceToDevice), "NS copy");
    if (k.c != 0.0) {
      check(cudaMemcpyAsync(bm, a, static_cast<size_t>(batch * mm) * t.elem, cudaMemcpyDeviceToDevice), "NS copy");
      gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, fc, a, m, mm, a, m, mm, fb, bm, m, mm, batch, t);
      gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, 1.0f, w, n, mn, bm, m, mm, fa, y, n, mn, batch, t);
    } else {
      gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, fb, w, n, mn, a, m, mm, fa, y, n, mn, batch, t);
    }
    std::swap(w, y);
  }
  dim3 fg(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>((m + 31) / 32), static_cast<unsigned>(batch));
  if (t.elem == 2) finish_kernel<uint16_t><<<fg, tb>>>(reinterpret_cast<const uint16_t*>(w), out, rows, cols, transpose);
  else finish_kernel<float><<<fg, tb>>>(reinterpret_cast<const float*>(w), out, rows, cols, transpose);
  check_launch("NS finish");
}

// ---- Muon elementwise ----------------------------------------------------------------------------------------

__global__ void muon_momentum_kernel(float* p, const float* g, float* m, float* u, int64_t n, MuonMomentumConsts c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float pi = p[i], mi = m[i];
    u[i] = muon_momentum_element(pi, g[i], mi, c);
    p[i] = pi;
    m[i] = mi;
  }
}
__global__ void muon_scale_kernel(float* x, int64_t n, float sf, float esf) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = muon_scale_element(x[i], sf, esf);
}
__global__ void muon_apply_kernel(float* p, const float* o, int64_t n, float neg_lr, uint16_t* lowp) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float pi = p[i];
    muon_apply_element(pi, o[i], neg_lr);
    p[i] = pi;
    if (lowp) lowp[i] = f32_to_bf16(pi);
  }
}
unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 65535)); }

}  // namespace

// ---- public API ------------------------------------------------------------------------------------------------

bool built_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::string describe() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no GPU (") + cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "no GPU (no CUDA device)";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "GPU 0 (properties unavailable)";
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB)";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) throw std::out_of_range("DeviceBuffer::upload past the end");
  check(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice), "upload");
}
void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) throw std::out_of_range("DeviceBuffer::download past the end");
  check(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost), "download");
}
void DeviceBuffer::fill_zero() {
  if (bytes_) check(cudaMemset(ptr_, 0, bytes_), "cudaMemset");
}

void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

double time_best(int reps, const std::function<void()>& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  f();
  synchronize();
  float best = 1e30f;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a), "cudaEventRecord");
    f();
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    best = std::min(best, ms);
  }
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  return best * 1e-3;
}

void memcpy_d2d(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy D2D");
}

void adam_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const AdamOptions& o,
               const StepControl& ctl) {
  check_slots(slots, groups, "adam", true, true);
  std::vector<AdamConsts> c;
  for (const auto& g : groups) c.push_back(adam_consts(o, g));
  run_step<AdamG>(slots, groups, c, true, true, ctl);
}

void sgd_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const SgdOptions& o,
              const StepControl& ctl) {
  check_slots(slots, groups, "sgd", o.momentum != 0.0, false);
  std::vector<SgdConsts> c;
  for (const auto& g : groups) c.push_back(sgd_consts(o, g));
  run_step<SgdG>(slots, groups, c, o.momentum != 0.0, false, ctl);
}

void lion_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const LionOptions& o,
               const StepControl& ctl) {
  check_slots(slots, groups, "lion", true, false);
  std::vector<LionConsts> c;
  for (const auto& g : groups) c.push_back(lion_consts(o, g));
  run_step<LionG>(slots, groups, c, true, false, ctl);
}

UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place) {
  std::vector<DevSlot> ds;
  std::vector<DevWork> work;
  for (size_t i = 0; i < grads.size(); ++i) {
    DevSlot d{};
    d.grad = grads[i].grad;
    d.grad_dtype = static_cast<uint8_t>(grads[i].dtype);
    d.numel = grads[i].numel;
    ds.push_back(d);
    for (int64_t b = 0; b < grads[i].numel; b += kChunk)
      work.push_back({static_cast<int32_t>(i), b, std::min(kChunk, grads[i].numel - b)});
  }
  UnscaleResult r;
  if (work.empty()) return r;
  const size_t o_work = (ds.size() * sizeof(DevSlot) + 255) / 256 * 256;
  const size_t o_part = o_work + (work.size() * sizeof(DevWork) + 255) / 256 * 256;
  const size_t o_flag = o_part + work.size() * sizeof(double);
  const size_t total = o_flag + sizeof(int32_t);
  std::vector<char> host(total, 0);
  std::memcpy(host.data(), ds.data(), ds.size() * sizeof(DevSlot));
  std::memcpy(host.data() + o_work, work.data(), work.size() * sizeof(DevWork));
  char* dev = static_cast<char*>(scratch(7, total));
  check(cudaMemcpy(dev, host.data(), total, cudaMemcpyHostToDevice), "upload unscale metadata");
  unscale_kernel<<<static_cast<unsigned>(work.size()), kThreads>>>(
      reinterpret_cast<const DevSlot*>(dev), reinterpret_cast<const DevWork*>(dev + o_work), inv_scale, in_place ? 1 : 0,
      reinterpret_cast<double*>(dev + o_part), reinterpret_cast<int32_t*>(dev + o_flag));
  check_launch("unscale_and_check");
  std::vector<double> partial(work.size());
  int32_t flag = 0;
  check(cudaMemcpy(partial.data(), dev + o_part, partial.size() * sizeof(double), cudaMemcpyDeviceToHost), "download");
  check(cudaMemcpy(&flag, dev + o_flag, sizeof(flag), cudaMemcpyDeviceToHost), "download");
  for (double p : partial) r.sum_sq += p;
  r.found_inf = flag != 0;
  return r;
}

void newton_schulz(const float* x, float* out, int64_t rows, int64_t cols, const NsOptions& o) {
  ns_device(x, out, 1, rows, cols, o);
}

void newton_schulz_batched(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols,
                           const NsOptions& o) {
  if (batch > 0) ns_device(x, out, batch, rows, cols, o);
}

void muon_step(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o) {
  check_muon_params(params, groups);
  for (const MuonParam& p : params)
    if (p.partition_dim >= 0 && o.tp_mode != MuonTpMode::Blockwise)
      throw std::invalid_argument(std::string("muon step on the GPU: tensor-parallel ") +
                                  (o.tp_mode == MuonTpMode::Duplicated ? "duplicated" : "distributed") +
                                  " mode needs the dist layer's collectives (not wired yet)");
  // The jobs as on the CPU (no TP group here: every matrix is orthogonalised on its own, so up to ns_batch_size
  // same-shape ones share one strided-batched NS).
  const std::vector<MuonJob> jobs = plan_muon_jobs(params, o, /*tp_size=*/1);
  const float esf = static_cast<float>(o.extra_scale_factor);
  auto orthogonalize = [&](const float* x, float* out, int64_t batch, int64_t r, int64_t cc) {
    ns_device(x, out, batch, r, cc, o.ns);
    const float sf = static_cast<float>(muon_scale_factor(r, cc, o.scale_mode));
    muon_scale_kernel<<<grid_for(batch * r * cc), 256>>>(out, batch * r * cc, sf, esf);
    check_launch("muon scale");
  };
  for (const MuonJob& job : jobs) {
    const MuonParam& first = params[job.members.front()];
    const int64_t n = job.rows * job.cols, nb = n * static_cast<int64_t>(job.members.size());
    auto* u = static_cast<float*>(scratch(8, static_cast<size_t>(nb) * 4));
    auto* orth = static_cast<float*>(scratch(9, static_cast<size_t>(nb) * 4));
    for (size_t j = 0; j < job.members.size(); ++j) {
      const MuonParam& p = params[job.members[j]];
      const MuonMomentumConsts c = muon_momentum_consts(o, groups[static_cast<size_t>(p.group)]);
      muon_momentum_kernel<<<grid_for(n), 256>>>(p.param, p.grad, p.momentum_buffer, u + static_cast<int64_t>(j) * n, n, c);
      check_launch("muon momentum");
    }
    if (job.split_qkv) {
      const std::vector<int64_t>& shapes = first.qkv_split_shapes.empty() ? o.qkv_split_shapes : first.qkv_split_shapes;
      if (shapes.empty()) throw std::runtime_error("Muon QKV split requested but qkv_split_shapes is not set");
      const int64_t total = std::accumulate(shapes.begin(), shapes.end(), int64_t{0});
      if (total <= 0 || first.rows % total != 0) throw std::runtime_error("Muon QKV split shape mismatch");
      const int64_t ng = first.rows / total;
      auto* bin = static_cast<float*>(scratch(10, static_cast<size_t>(n) * 4));
      auto* bout = static_cast<float*>(scratch(11, static_cast<size_t>(n) * 4));
      int64_t off = 0;
      for (int64_t s : shapes) {
        // The rows of this part in every query group, stacked: one 2-D strided copy each way.
        const size_t w = static_cast<size_t>(s * first.cols) * 4, pitch = static_cast<size_t>(total * first.cols) * 4;
        check(cudaMemcpy2DAsync(bin, w, u + off * first.cols, pitch, w, static_cast<size_t>(ng), cudaMemcpyDeviceToDevice), "qkv gather");
        orthogonalize(bin, bout, 1, ng * s, first.cols);
        check(cudaMemcpy2DAsync(orth + off * first.cols, pitch, bout, w, w, static_cast<size_t>(ng), cudaMemcpyDeviceToDevice), "qkv scatter");
        off += s;
      }
    } else {
      orthogonalize(u, orth, static_cast<int64_t>(job.members.size()), job.rows, job.cols);
    }
    for (size_t j = 0; j < job.members.size(); ++j) {
      const MuonParam& p = params[job.members[j]];
      muon_apply_kernel<<<grid_for(n), 256>>>(p.param, orth + static_cast<int64_t>(j) * n, n,
                                              static_cast<float>(-groups[static_cast<size_t>(p.group)].lr), p.param_bf16);
      check_launch("muon apply");
    }
  }
}

void gemm(int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, MatmulPrecision precision) {
  // Row-major C = A B is column-major C^T = B^T A^T.
  gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, 1.0f, b, n, 0, a, k, 0, 0.0f, c, n, 0, 1, gemm_types(precision));
}

}  // namespace mr::optim::gpu
