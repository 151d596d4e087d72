// The CUDA device utilities (gpu.h): device queries, DeviceBuffer, synchronisation and timing, the cuBLAS handle
// and the scratch areas the kernels share (gpu_device.cuh).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "optim/gpu.h"
#include "optim/gpu_device.cuh"

namespace mr::optim::gpu {

namespace detail {

cublasHandle_t blas() {
  static thread_local cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    check(cublasCreate(&x), "cublasCreate");
    return x;
  }();
  return h;
}

void* scratch(Scratch which, size_t bytes) {
  static thread_local std::map<int, DeviceBuffer> bufs;
  DeviceBuffer& b = bufs[static_cast<int>(which)];
  if (b.bytes() < bytes) {
    // To exactly the size asked (the shapes repeat every step, so an area grows only in the first one), the old
    // buffer freed first: a growth never holds both (rule run.device-memory counts one, optim::MuonDeviceWork).
    b = DeviceBuffer();
    b = DeviceBuffer(bytes);
  }
  return b.get();
}

}  // namespace detail

using detail::check;

bool built_with_cuda() { return true; }

bool sync_check() {
  static const bool on = [] {
    const char* v = std::getenv("MR_CUDA_SYNC_CHECK");
    return v && std::string(v) == "1";
  }();
  return on;
}

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
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return "GPU 0 (properties unavailable)";
  }
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB)";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) detail::ignore(cudaFree(ptr_));
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) detail::ignore(cudaFree(ptr_));
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
  detail::ignore(cudaEventDestroy(a));
  detail::ignore(cudaEventDestroy(b));
  return best * 1e-3;
}

void memcpy_d2d(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy D2D");
}

}  // namespace mr::optim::gpu
