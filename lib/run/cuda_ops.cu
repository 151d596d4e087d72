// The CUDA calls and kernels of the training run's CUDA backend (run/cuda_ops.h). Built with -fmad=false like
// the optimizer kernels: no fused multiply-add where the CPU loop has none. Every index comes from
// optim/launch_geometry.h (grid-stride launches of kThreads threads, grid_for(n) blocks), whose arithmetic the
// CPU tests check.
#include <cuda_runtime.h>

#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/elementwise.h"
#include "optim/gpu.h"
#include "optim/launch_geometry.h"
#include "run/abs_max.h"
#include "run/checksum_term.h"
#include "run/cuda_ops.h"
#include "run/fixed_point.h"
#include "run/row_rescale.h"

namespace mr::run::cuda {

namespace {

namespace geom = optim::geom;
using optim::DType;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
// After a kernel launch: its configuration error, and with MR_CUDA_SYNC_CHECK=1 (optim/gpu.h) its run.
void check_launch(const char* what) {
  check(cudaGetLastError(), what);
  if (optim::gpu::sync_check())
    check(cudaDeviceSynchronize(), (std::string(what) + ", run to its end (MR_CUDA_SYNC_CHECK=1)").c_str());
}
// A failure deliberately ignored (a cleanup): cleared, so that the next launch check does not report it.
void ignore(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
}

// A device area kept for the process and grown on demand: no cudaMalloc in the steady state. Main thread only
// (the training loop).
struct GrowingDeviceArea {
  void* p = nullptr;
  size_t have = 0;
  void* at_least(size_t bytes, const char* what) {
    if (bytes > have) {
      if (p) ignore(cudaFree(p));
      p = nullptr;
      have = 0;
      check(cudaMalloc(&p, bytes), what);
      have = bytes;
    }
    return p;
  }
};

// The reductions' partial results.
void* scratch(size_t bytes) {
  static GrowingDeviceArea area;
  return area.at_least(bytes, "cudaMalloc (reduction scratch)");
}

template <DType D>
__device__ float load(const void* model, int64_t i) {
  if constexpr (D == DType::F32) return static_cast<const float*>(model)[i];
  else if constexpr (D == DType::BF16) return optim::bf16_to_f32(static_cast<const uint16_t*>(model)[i]);
  else return optim::f16_to_f32(static_cast<const uint16_t*>(model)[i]);
}
template <DType D>
__device__ uint32_t load_bits(const void* model, int64_t i) {
  if constexpr (D == DType::F32) return __float_as_uint(static_cast<const float*>(model)[i]);  // fp32 bits
  else return static_cast<const uint16_t*>(model)[i];                                            // the 16 bits
}

// The values of the sums of squares.
struct F32Values {
  const float* x;
  __device__ float operator()(int64_t i) const { return x[i]; }
};
template <DType D>
struct ModelValues {
  const void* model;
  int64_t begin;
  __device__ float operator()(int64_t i) const { return load<D>(model, begin + i); }
};
template <DType D>
struct ModelMinusTarget {
  const void* model;
  const float* target;
  int64_t begin;
  __device__ float operator()(int64_t i) const { return load<D>(model, begin + i) - target[begin + i]; }  // p - t
};

// Block b's sum of fixed_square_bits(v(i)) over its grid-stride elements, in 128 bits, into partial[b].
template <class V>
__global__ void __launch_bounds__(geom::kThreads) fixed_sum_kernel(V v, int64_t n, double scale, U128* partial) {
  __shared__ uint64_t lo[geom::kThreads], hi[geom::kThreads];
  U128 acc;
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step)
    acc.add(static_cast<uint64_t>(fixed_square_bits(v(i), scale)));  // trunc(x^2 2^E) >= 0, < 2^62
  lo[threadIdx.x] = acc.lo;
  hi[threadIdx.x] = acc.hi;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      U128 a{lo[threadIdx.x], hi[threadIdx.x]};
      a.add(U128{lo[threadIdx.x + s], hi[threadIdx.x + s]});  // integers: any order, the same sum
      lo[threadIdx.x] = a.lo;
      hi[threadIdx.x] = a.hi;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = U128{lo[0], hi[0]};
}

template <class V>
Fixed fixed_sum(V v, int64_t n, double scale) {
  if (n <= 0) return 0;
  const unsigned blocks = geom::grid_for(n);
  auto* partial = static_cast<U128*>(scratch(sizeof(U128) * blocks));
  fixed_sum_kernel<<<blocks, geom::kThreads>>>(v, n, scale, partial);
  check_launch("the fixed-point sum of squares");
  std::vector<U128> host(blocks);
  check(cudaMemcpy(host.data(), partial, sizeof(U128) * blocks, cudaMemcpyDeviceToHost), "cudaMemcpy (sum partials)");
  U128 total;
  for (const U128& p : host) total.add(p);
  return to_fixed(total);
}

// Max |v(i)| as float bits into *out (run/abs_max.h: finite < inf < NaN as unsigned integers, so a NaN is the max).
template <class V>
__global__ void __launch_bounds__(geom::kThreads) max_abs_kernel(V v, int64_t n, unsigned* out) {
  __shared__ uint32_t block_max[geom::kThreads];
  uint32_t m = 0;
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step)
    m = max_bits(m, abs_bits(v(i)));  // |x| as bits: the larger wins, NaN above all
  block_max[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) block_max[threadIdx.x] = max_bits(block_max[threadIdx.x], block_max[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicMax(out, block_max[0]);
}

template <class V>
float max_abs_of(V v, int64_t n) {
  if (n <= 0) return 0.0f;
  auto* out = static_cast<unsigned*>(scratch(sizeof(unsigned)));
  check(cudaMemset(out, 0, sizeof(unsigned)), "cudaMemset (max |x|)");
  max_abs_kernel<<<geom::grid_for(n), geom::kThreads>>>(v, n, out);
  check_launch("max |x|");
  unsigned host = 0;
  check(cudaMemcpy(&host, out, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy (max |x|)");
  return abs_of_bits(host);
}

__global__ void __launch_bounds__(geom::kThreads) scale_kernel(float* __restrict__ x, int64_t n, float factor) {
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step)
    x[i] = optim::scale_element(x[i], factor);  // optim::cpu::scale_grads' element function
}

__global__ void __launch_bounds__(geom::kThreads) finish_grads_kernel(float* __restrict__ x, int64_t n, float factor,
                                                                       GradFormat f) {
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step)
    x[i] = grad_element(x[i], factor, f);  // the CPU loop's element function
}

__global__ void __launch_bounds__(geom::kThreads) zeros_kernel(const float* __restrict__ x, int64_t n,
                                                               unsigned long long* out) {
  __shared__ unsigned long long block[geom::kThreads];
  unsigned long long c = 0;
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step)
    c += x[i] == 0.0f ? 1u : 0u;  // +0 and -0; NaN is not zero
  block[threadIdx.x] = c;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) block[threadIdx.x] += block[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, block[0]);
}

template <DType D>
__global__ void __launch_bounds__(geom::kThreads) checksum_kernel(const void* __restrict__ model, int64_t base, int64_t n,
                                                                  uint64_t key, ShardIndex where, unsigned long long* out) {
  __shared__ unsigned long long block[geom::kThreads];
  unsigned long long sum = 0;
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step)
    sum += checksum_term(key, whole_index(where, i), load_bits<D>(model, base + i));  // mod 2^64
  block[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) block[threadIdx.x] += block[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, block[0]);  // wraps: mod 2^64, any order
}

// --embedding-min-norm's row passes (run/row_rescale.h): a thread per row of the piece (grid-stride over rows),
// each walking its row's elements in the piece; integers and maxima, so the same bits as the CPU loop.
__global__ void __launch_bounds__(geom::kThreads) row_max_kernel(RowPiece p, int64_t rows, uint32_t* out) {
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  const int64_t first = p.first_row();
  for (int64_t r = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); r < rows; r += step) {
    uint32_t m = 0;
    for (int64_t i = p.row_begin(first + r); i < p.row_end(first + r); ++i) m = max_bits(m, abs_bits(p.load(i)));
    out[r] = m;
  }
}
__global__ void __launch_bounds__(geom::kThreads) row_sum_kernel(RowPiece p, int64_t rows, const double* scale,
                                                                 U128* out) {
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  const int64_t first = p.first_row();
  for (int64_t r = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); r < rows; r += step) {
    U128 acc;
    for (int64_t i = p.row_begin(first + r); i < p.row_end(first + r); ++i)
      acc.add(static_cast<uint64_t>(row_square_term(p.load(i), scale[r])));  // >= 0, < 2^62
    out[r] = acc;
  }
}
__global__ void __launch_bounds__(geom::kThreads) scale_rows_kernel(RowPiece p, const float* factor) {
  const int64_t step = geom::grid_stride_step(gridDim.x, blockDim.x);
  const int64_t n = p.end - p.begin, first = p.first_row();
  for (int64_t k = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); k < n; k += step) {
    const int64_t i = p.begin + k;
    const float f = factor[p.row_of(i) - first];
    if (f != 1.0f) p.scale(i, f);  // a factor of 1 leaves the row as it is
  }
}

}  // namespace

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

std::string device_name(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();
    return "an unknown GPU";
  }
  return std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor);
}

void memory_info(double* free_bytes, double* total_bytes) {
  size_t f = 0, t = 0;
  check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
  *free_bytes = static_cast<double>(f);
  *total_bytes = static_cast<double>(t);
}

void* allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc (the training run's buffers)");
  const cudaError_t e = cudaMemset(p, 0, bytes);
  if (e != cudaSuccess) {
    ignore(cudaFree(p));
    check(e, "cudaMemset");
  }
  return p;
}
void release(void* p) noexcept {
  if (p) ignore(cudaFree(p));
}
void to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}
void to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}
void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void* staging(size_t bytes) {
  static GrowingDeviceArea area;
  return area.at_least(bytes, "cudaMalloc (host collective staging)");
}

Fixed sum_squares(const float* x, int64_t n, double scale) { return fixed_sum(F32Values{x}, n, scale); }

Fixed sum_squares_model(const void* model, DType d, int64_t begin, int64_t end, double scale) {
  switch (d) {
    case DType::F32: return fixed_sum(ModelValues<DType::F32>{model, begin}, end - begin, scale);
    case DType::BF16: return fixed_sum(ModelValues<DType::BF16>{model, begin}, end - begin, scale);
    case DType::F16: return fixed_sum(ModelValues<DType::F16>{model, begin}, end - begin, scale);
    case DType::E4M3: break;  // a state's dtype, never the model's
  }
  return 0;
}

Fixed sum_squares_model_minus_target(const void* model, DType d, const float* target, int64_t begin, int64_t end,
                                     double scale) {
  switch (d) {
    case DType::F32: return fixed_sum(ModelMinusTarget<DType::F32>{model, target, begin}, end - begin, scale);
    case DType::BF16: return fixed_sum(ModelMinusTarget<DType::BF16>{model, target, begin}, end - begin, scale);
    case DType::F16: return fixed_sum(ModelMinusTarget<DType::F16>{model, target, begin}, end - begin, scale);
    case DType::E4M3: break;
  }
  return 0;
}

double max_abs(const float* x, int64_t n) { return static_cast<double>(max_abs_of(F32Values{x}, n)); }

float max_abs_model(const void* model, DType d, int64_t begin, int64_t end) {
  switch (d) {
    case DType::F32: return max_abs_of(ModelValues<DType::F32>{model, begin}, end - begin);
    case DType::BF16: return max_abs_of(ModelValues<DType::BF16>{model, begin}, end - begin);
    case DType::F16: return max_abs_of(ModelValues<DType::F16>{model, begin}, end - begin);
    case DType::E4M3: break;
  }
  return 0.0f;
}

void scale(float* x, int64_t n, float factor) {
  if (n <= 0) return;
  scale_kernel<<<geom::grid_for(n), geom::kThreads>>>(x, n, factor);
  check_launch("the gradient scale");
}

void finish_grads(float* x, int64_t n, float factor, GradFormat f) {
  if (n <= 0) return;
  if (!f.rounds()) return scale(x, n, factor);
  finish_grads_kernel<<<geom::grid_for(n), geom::kThreads>>>(x, n, factor, f);
  check_launch("the gradient's rounding to its buffer dtype");
}

namespace {
unsigned long long counter_result(const char* what, const std::function<void(unsigned long long*)>& launch) {
  auto* out = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  check(cudaMemset(out, 0, sizeof(unsigned long long)), "cudaMemset (a counter)");
  launch(out);
  check_launch(what);
  unsigned long long h = 0;
  check(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost), "cudaMemcpy (a counter)");
  return h;
}
}  // namespace

int64_t count_zeros(const float* x, int64_t n) {
  if (n <= 0) return 0;
  return static_cast<int64_t>(counter_result("the zero count", [&](unsigned long long* out) {
    zeros_kernel<<<geom::grid_for(n), geom::kThreads>>>(x, n, out);
  }));
}

uint64_t checksum_part(const void* model, DType d, int64_t base, int64_t n, uint64_t key, const ShardIndex& where) {
  if (n <= 0) return 0;
  return counter_result("the model checksum", [&](unsigned long long* out) {
    const unsigned g = geom::grid_for(n);
    switch (d) {
      case DType::F32: checksum_kernel<DType::F32><<<g, geom::kThreads>>>(model, base, n, key, where, out); break;
      case DType::BF16: checksum_kernel<DType::BF16><<<g, geom::kThreads>>>(model, base, n, key, where, out); break;
      case DType::F16: checksum_kernel<DType::F16><<<g, geom::kThreads>>>(model, base, n, key, where, out); break;
      case DType::E4M3: break;
    }
  });
}

namespace {
// The row passes' inputs (per-row scales or factors), beside the reductions' scratch.
void* row_inputs(size_t bytes) {
  static GrowingDeviceArea area;
  return area.at_least(bytes, "cudaMalloc (row inputs)");
}
}  // namespace

void row_max_bits(const RowPiece& p, uint32_t* out) {
  const int64_t rows = p.rows();
  if (rows <= 0) return;
  auto* d = static_cast<uint32_t*>(scratch(sizeof(uint32_t) * static_cast<size_t>(rows)));
  row_max_kernel<<<geom::grid_for(rows), geom::kThreads>>>(p, rows, d);
  check_launch("the embedding rows' max |x|");
  std::vector<uint32_t> host(static_cast<size_t>(rows));
  check(cudaMemcpy(host.data(), d, sizeof(uint32_t) * host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy (row max)");
  for (size_t r = 0; r < host.size(); ++r) out[r] = max_bits(out[r], host[r]);
}

void row_sum_squares(const RowPiece& p, const double* scale, Fixed* out) {
  const int64_t rows = p.rows();
  if (rows <= 0) return;
  const size_t n = static_cast<size_t>(rows);
  auto* s = static_cast<double*>(row_inputs(sizeof(double) * n));
  check(cudaMemcpy(s, scale, sizeof(double) * n, cudaMemcpyHostToDevice), "cudaMemcpy (row scales)");
  auto* d = static_cast<U128*>(scratch(sizeof(U128) * n));
  row_sum_kernel<<<geom::grid_for(rows), geom::kThreads>>>(p, rows, s, d);
  check_launch("the embedding rows' sums of squares");
  std::vector<U128> host(n);
  check(cudaMemcpy(host.data(), d, sizeof(U128) * n, cudaMemcpyDeviceToHost), "cudaMemcpy (row sums)");
  for (size_t r = 0; r < n; ++r) out[r] += to_fixed(host[r]);
}

void scale_rows(const RowPiece& p, const float* factor) {
  const int64_t rows = p.rows();
  if (rows <= 0) return;
  const size_t n = static_cast<size_t>(rows);
  auto* f = static_cast<float*>(row_inputs(sizeof(float) * n));
  check(cudaMemcpy(f, factor, sizeof(float) * n, cudaMemcpyHostToDevice), "cudaMemcpy (row factors)");
  scale_rows_kernel<<<geom::grid_for(p.end - p.begin), geom::kThreads>>>(p, f);
  check_launch("the embedding rows' rescale");
}

void* event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
}
void event_record(void* e) { check(cudaEventRecord(static_cast<cudaEvent_t>(e), 0), "cudaEventRecord"); }
double event_elapsed_ms(void* from, void* to) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(to)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)), "cudaEventElapsedTime");
  return static_cast<double>(ms);
}
void event_destroy(void* e) noexcept {
  if (e) ignore(cudaEventDestroy(static_cast<cudaEvent_t>(e)));
}

}  // namespace mr::run::cuda
