// What the CUDA translation units of lib/optim share (internal; see gpu.h for the API): error checks, the cuBLAS
// handle, the per-purpose device scratch areas and the launch geometry (launch_geometry.h).
//   gpu_device.cu       device queries, DeviceBuffer, timing, and the definitions below;
//   gpu_elementwise.cu  the multi-tensor Adam/AdamW, SGD and Lion steps, unscale + found-inf;
//   gpu_muon.cu         Newton-Schulz (cuBLAS) and the Muon step;
//   gpu_soap.cu         the SOAP step (cuBLAS, cuSOLVER).
// Every .cu file builds with -fmad=false: the only fused multiply-adds are the explicit ones of elementwise.h.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "optim/gpu.h"
#include "optim/launch_geometry.h"

namespace mr::optim::gpu::detail {

// Throw std::runtime_error naming `what` and the CUDA / cuBLAS error.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(s));
}
// After a kernel launch: its configuration error, and with MR_CUDA_SYNC_CHECK=1 (gpu.h, sync_check) its run.
inline void check_launch(const char* what) {
  check(cudaGetLastError(), what);
  if (sync_check())
    check(cudaDeviceSynchronize(), (std::string(what) + ", run to its end (MR_CUDA_SYNC_CHECK=1)").c_str());
}
// A size or count for a 32-bit API argument (cuBLAS' m, n, k, leading dimensions, batch): std::runtime_error
// naming `what` when it does not fit.
inline int to_int32(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX)
    throw std::runtime_error(std::string(what) + " is " + std::to_string(v) + ", past cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}
// A failure deliberately ignored (a cleanup, an optional query): cleared, so that the next check_launch does not
// report it as its own.
inline void ignore(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
}

// This thread's cuBLAS handle (created on first use, kept).
cublasHandle_t blas();

// The device scratch areas, one per purpose (a purpose's buffers are never live twice at once).
enum class Scratch : int {
  StepMeta,      // elementwise step: slots | consts | work list | absmax
  NsW,           // Newton-Schulz: the iterate X (bf16 or fp32)
  NsY,           //                the next iterate
  NsA,           //                A = X X^T
  NsB,           //                B = b A + c A A
  NsPartial,     //                per-block partial sums of squares
  NsDenom,       //                max(||X||_F, eps) per matrix
  UnscaleMeta,   // unscale_and_check: slots | work list | partial sums | flag
  MuonUpdate,    // Muon step: the momentum updates of one job
  MuonOrth,      //            their orthogonalised, scaled values
  MuonQkvIn,     //            one QKV part, gathered
  MuonQkvOut,    //            that part orthogonalised
  MuonTpGathered,  //          duplicated TP mode: the TP group's shards, all-gathered
  MuonTpWhole,     //          the whole matrix they make
  MuonTpWholeOrth, //          the whole matrix orthogonalised (shards split by columns)
  NsTotal,       // distributed Newton-Schulz: the sum of squares, summed over the TP group
  NsGram32,      //                            the Gram matrix in fp32 (bf16 precision), summed over the group
  SoapA,         // SOAP step: four work matrices of max(m, n)^2 or m x n floats
  SoapB,
  SoapC,
  SoapD,
  SoapSolveA,    //            the column-major matrix cuSOLVER works on (eigh, QR)
  SoapSolveW,    //            its eigenvalues, QR's tau, or the Rayleigh quotients (never two at once)
  SoapSolveWork, //            cuSOLVER's workspace
  SoapSolveDouble, //          the fp64 retry of eigh: the matrix and its eigenvalues
  SoapInfo,      //            cuSOLVER's info
  SoapOrder,     //            the eigenvalues' descending order
};
// A device area of at least `bytes` for `which`, grown on demand (doubling) and kept: no cudaMalloc in the
// steady state. Per host thread.
void* scratch(Scratch which, size_t bytes);

// The launch geometry (threads per block, elements per thread, chunk size, grid sizes): launch_geometry.h, shared
// with the CPU test of the index arithmetic.
using geom::kIlp;
using geom::kThreads;
constexpr int64_t kChunk = geom::kGpuChunk;
using geom::grid_for;
inline dim3 to_dim3(const geom::Grid& g) { return dim3(g.x, g.y, g.z); }

}  // namespace mr::optim::gpu::detail
