// The synthetic gradient on a CUDA device (run/gpu_synthetic.h). Built with -fmad=false like the optimizer
// kernels: the element function of run/synthetic_grad.h has no fused multiply-add on the CPU either.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "optim/gpu.h"
#include "optim/launch_geometry.h"
#include "run/abs_max.h"
#include "run/buffers.h"
#include "run/gpu_synthetic.h"
#include "run/tensor_index.h"

namespace mr::run::gpu {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

template <optim::DType D>
__device__ float load(const void* model, int64_t i) {
  if constexpr (D == optim::DType::F32) return static_cast<const float*>(model)[i];
  else if constexpr (D == optim::DType::BF16) return optim::bf16_to_f32(static_cast<const uint16_t*>(model)[i]);
  else return optim::f16_to_f32(static_cast<const uint16_t*>(model)[i]);
}

// One thread per element (grid stride): the element function of the CPU loop, then the block's max |p - target|
// into *max_out (run/abs_max.h: |x|'s float bits order as unsigned integers, NaN on top).
template <optim::DType D>
__global__ void __launch_bounds__(optim::geom::kThreads)
    synthetic_kernel(const void* __restrict__ model, const float* __restrict__ target, float* __restrict__ grad,
                     int64_t n, ShardIndex where, uint32_t key, SampleTable table, int bits, float keep,
                     unsigned* max_out) {
  __shared__ uint32_t block_max[optim::geom::kThreads];
  uint32_t m = 0;  // max |p - target| as bits (run/abs_max.h: a NaN is the max, as on the CPU)
  const int64_t step = optim::geom::grid_stride_step(gridDim.x, blockDim.x);
  for (int64_t i = optim::geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += step) {
    const float d = load<D>(model, i) - target[i];                                       // p - target
    const uint64_t gi = static_cast<uint64_t>(whole_index(where, i));                    // index in the whole tensor
    const uint32_t e = element_bits(key, gi);                                            // alpha's key bits
    grad[i] = keep * (quantize(d, bits) * static_cast<float>(table.sum(e)));             // 8 x my samples' sum
    m = max_bits(m, abs_bits(d));                                                        // for the loss's max
  }
  block_max[threadIdx.x] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) block_max[threadIdx.x] = max_bits(block_max[threadIdx.x], block_max[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicMax(max_out, block_max[0]);
}

}  // namespace

float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples, int bits,
                      bool zero, const GradTensor& t) {
  if (t.n == 0) return 0.0f;
  // The block maxima's target: one word, allocated once and kept (no cudaMalloc/cudaFree per parameter).
  static unsigned* max_word = nullptr;
  if (!max_word) check(cudaMalloc(&max_word, sizeof(unsigned)), "cudaMalloc (synthetic gradient)");
  unsigned host = 0;
  check(cudaMemset(max_word, 0, sizeof(unsigned)), "cudaMemset (synthetic gradient)");
  const ShardIndex where = shard_index(p, tp_rank);
  const unsigned grid = optim::geom::grid_for(t.n);
  const float keep = zero ? 0.0f : 1.0f;
  switch (t.dtype) {
    case optim::DType::F32:
      synthetic_kernel<optim::DType::F32><<<grid, optim::geom::kThreads>>>(t.model, t.target, t.grad, t.n, where, key,
                                                                      samples, bits, keep, max_word);
      break;
    case optim::DType::BF16:
      synthetic_kernel<optim::DType::BF16><<<grid, optim::geom::kThreads>>>(t.model, t.target, t.grad, t.n, where, key,
                                                                       samples, bits, keep, max_word);
      break;
    case optim::DType::F16:
      synthetic_kernel<optim::DType::F16><<<grid, optim::geom::kThreads>>>(t.model, t.target, t.grad, t.n, where, key,
                                                                      samples, bits, keep, max_word);
      break;
    case optim::DType::E4M3:  // a state's dtype, never the model's (buffer_dtypes)
      break;
  }
  check(cudaGetLastError(), "the synthetic-gradient kernel launch");
  if (optim::gpu::sync_check())
    check(cudaDeviceSynchronize(), "the synthetic-gradient kernel, run to its end (MR_CUDA_SYNC_CHECK=1)");
  check(cudaMemcpy(&host, max_word, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy (synthetic gradient max)");
  float m;
  static_assert(sizeof m == sizeof host);
  __builtin_memcpy(&m, &host, sizeof m);
  return m;
}

}  // namespace mr::run::gpu
