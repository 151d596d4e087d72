// The launcher's check of --distributed-backend nccl (nccl_check.h).
#include "launch/nccl_check.h"

namespace mr::launch {

WorkerNccl worker_nccl_from(const std::string& word) {
  if (word == "built") return WorkerNccl::Built;
  if (word == "no-cuda") return WorkerNccl::NoCuda;
  if (word == "no-nccl") return WorkerNccl::NoNccl;
  return WorkerNccl::NoWorker;
}

std::string own_worker_nccl_missing(WorkerNccl build, const util::GpuDevices& gpus) {
  switch (build) {
    case WorkerNccl::NoWorker:
      return "megatron-run was built without its worker (LibTorch was not found when it was configured)";
    case WorkerNccl::NoCuda:
      return "megatron-run was built without CUDA (its worker has no CUDA backend and no NCCL)";
    case WorkerNccl::NoNccl:
      return "megatron-run was built with CUDA but without NCCL (nccl.h / libnccl were not found when it was "
             "configured)";
    case WorkerNccl::Built:
      break;
  }
  std::string why = gpus.why_no_nvidia();
  if (!why.empty() && gpus.rocm && !gpus.hidden())
    why += "; /dev/kfd is an AMD GPU, which megatron-run's CUDA path does not drive";
  return why;
}

std::string program_nccl_doubt(const util::GpuDevices& gpus) {
  if (gpus.hidden()) return gpus.why_no_nvidia();  // the one sentence for hidden devices
  if (gpus.nvidia() > 0 || gpus.rocm) return "";
  return "this machine shows no GPU (no /dev/nvidia<N> device, no GPU in /proc/driver/nvidia/gpus, no ROCm /dev/kfd)";
}

}  // namespace mr::launch
