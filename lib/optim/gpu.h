// The CUDA implementations (built when CUDA is found; otherwise every call but the queries throws). Same
// contracts as mr::optim::cpu, with device pointers in the slots / params (the slot lists themselves live on the
// host). StepControl::noop_flag and ::found_inf are device pointers here. No CUDA header is needed to use this.
//
// Elementwise steps (Adam/AdamW, SGD, Lion): one launch updates the whole tensor list (a chunk work list, one
// block per chunk); the arithmetic is elementwise.h compiled with -fmad=false and IEEE div/sqrt, so results are
// bit-equal to mr::optim::ref. SOAP: cuBLAS and cuSOLVER. Newton-Schulz: cuBLAS GEMMs (bf16 in/out with fp32 accumulation for Medium, TF32
// for High, fp32 for Highest), strided-batched for same-shape batches.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "optim/kernels.h"
#include "optim/muon.h"
#include "optim/soap.h"

namespace mr::optim::gpu {

bool built_with_cuda();
// Usable CUDA devices: 0 without CUDA support, driver or device (never throws).
int device_count();
// "NVIDIA H200 (sm_90, 141 GB)", or why there is no GPU.
std::string describe();
// MR_CUDA_SYNC_CHECK=1 (read once): every kernel launch check (lib/optim's and lib/run's) also waits for the device
// (cudaDeviceSynchronize), so that an asynchronous fault (an illegal address) is reported under the kernel that
// made it, not under the next synchronising call. Slow; for diagnosing a failure (scripts/gpu-check-run.sh's rerun).
bool sync_check();

// Device memory (throw std::runtime_error with the CUDA error on failure).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  void fill_zero();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

void synchronize();
// Best (minimum) device time in seconds of f() over `reps` runs after one warm-up, timed with CUDA events.
double time_best(int reps, const std::function<void()>& f);
// One device-to-device cudaMemcpy of `bytes` from src to dst.
void memcpy_d2d(void* dst, const void* src, size_t bytes);

// adam_step, sgd_step, lion_step: one per line of elementwise_kernels.def (kernels.h's MR_ELEMENTWISE_STEP_DECL).
#define MR_ELEMENTWISE_KERNEL MR_ELEMENTWISE_STEP_DECL
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
// Synchronises (the result comes back to the host). Deterministic sum.
UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place);

// Device x / out (rows x cols fp32, row-major); same algorithm as cpu::newton_schulz.
void newton_schulz(const float* x, float* out, int64_t rows, int64_t cols, const NsOptions& o);
void newton_schulz_batched(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols,
                           const NsOptions& o);
// Muon step on device buffers (QKV split included), as cpu::muon_step. `tp`: the tensor-parallel group, whose
// all_gather / all_reduce_sum take *device* pointers (NCCL in the run; every rank calls with its shards in the
// same order); the duplicated and distributed modes orthogonalise across it. Without it every matrix is
// orthogonalised on its own.
void muon_step(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o,
               TpGroup* tp = nullptr);

// SOAP step on device buffers, as cpu::soap_step (soap.h): cuBLAS GEMMs in fp32, cuSOLVER's syevd on the first step
// and geqrf + orgqr after it; agrees with the CPU to bounds (the solvers and GEMMs sum differently).
void soap_step(std::span<const SoapParam> params, std::span<const GroupHyper> groups, const SoapOptions& o);

// A plain cuBLAS GEMM, row-major C(m x n) = A(m x k) B(k x n), at the precision NS uses (benchmark baseline).
void gemm(int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, MatmulPrecision precision);

}  // namespace mr::optim::gpu
