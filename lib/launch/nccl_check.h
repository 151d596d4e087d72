// Whether --distributed-backend nccl can run here, asked by the launcher before it starts any worker (rule
// dist.nccl-unavailable; docs/launch.md). megatron-run's own worker runs nccl through CUDA and NCCL, NVIDIA only:
// it needs a build with both and an NVIDIA GPU. The user's program (Megatron's pretrain_gpt.py) gets "nccl" from
// torch, which is RCCL on ROCm: only a machine without any GPU is worth a warning there. Torch-free.
#pragma once

#include <string>

#include "config/rule.h"
#include "util/gpu_devices.h"

namespace mr::launch {

// --distributed-backend nccl for megatron-run's own worker where it cannot run: refused by the launcher, once,
// before any worker starts (apps/megatron-run/launch.cpp), and by each worker (lib/distributed/worker.cpp, and the
// CUDA backend of a build without CUDA, lib/run/backend_cuda_stub.cpp).
extern const Rule kNcclUnavailableRule;
// A rank whose LOCAL_RANK has no GPU of its own (util::choose_device's `shared`): refused by the worker's CUDA
// backend and its NCCL communicators.
extern const Rule kLocalRankGpuRule;
// The refusal of util::choose_device's choice `c`, for `backend` ("the nccl backend", "the CUDA backend"):
// "[dist.local-rank-gpu] BACKEND: ..." when the GPU would be shared, else "BACKEND: ...".
std::string device_refusal(const util::DeviceChoice& c, const std::string& backend);

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
