// Whether --distributed-backend nccl can run here, asked by the launcher before it starts any worker (rule
// dist.nccl-unavailable; docs/launch.md). megatron-run's own worker runs nccl through CUDA and NCCL, NVIDIA only:
// it needs a build with both and an NVIDIA GPU. The user's program (Megatron's pretrain_gpt.py) gets "nccl" from
// torch, which is RCCL on ROCm: only a machine without any GPU is worth a warning there. Torch-free.
#pragma once

#include <string>

#include "util/gpu_devices.h"

namespace mr::launch {

// How megatron-run-worker was built (known when megatron-run is configured; apps/megatron-run/CMakeLists.txt).
enum class WorkerNccl {
  Built,     // CUDA and NCCL: the nccl backend is there
  NoCuda,    // built without CUDA (the CUDA backend is a stub)
  NoNccl,    // with CUDA but without NCCL
  NoWorker,  // no worker at all (no LibTorch)
};
// The build's, from "built", "no-cuda", "no-nccl" or anything else (no worker).
WorkerNccl worker_nccl_from(const std::string& word);

// What megatron-run's own worker lacks for --distributed-backend nccl on the machine `gpus` describes: the build
// (first) or an NVIDIA GPU; "" when nothing is missing that the launcher can see (the worker checks again, with
// CUDA: a driver too old, fewer GPUs than ranks).
std::string own_worker_nccl_missing(WorkerNccl build, const util::GpuDevices& gpus);

// For the user's program with --distributed-backend nccl: why it will likely fail (neither an NVIDIA GPU nor
// ROCm's /dev/kfd is here), "" when a GPU of either kind is.
std::string program_nccl_doubt(const util::GpuDevices& gpus);

}  // namespace mr::launch
