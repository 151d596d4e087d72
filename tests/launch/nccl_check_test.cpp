// launch/nccl_check.h: what the launcher says is missing for --distributed-backend nccl, for each way the worker
// can be built and each kind of machine (util/gpu_devices.h's fields set as a probe would).
#include <catch2/catch.hpp>

#include <string>

#include "launch/nccl_check.h"

using namespace mr::launch;
using mr::util::GpuDevices;

namespace {

GpuDevices nvidia(int n) {
  GpuDevices d;
  d.nvidia_nodes = d.nvidia_driver_gpus = n;
  d.nvidia_driver = true;
  return d;
}

GpuDevices rocm() {
  GpuDevices d;
  d.rocm = true;
  return d;
}

}  // namespace

TEST_CASE("own worker: the build first, then an NVIDIA GPU", "[launch][nccl-check]") {
  CHECK(worker_nccl_from("built") == WorkerNccl::Built);
  CHECK(worker_nccl_from("no-cuda") == WorkerNccl::NoCuda);
  CHECK(worker_nccl_from("no-nccl") == WorkerNccl::NoNccl);
  CHECK(worker_nccl_from("no-worker") == WorkerNccl::NoWorker);
  // A build without the backend is refused on any machine, GPUs or not.
  for (const GpuDevices& d : {nvidia(8), GpuDevices{}}) {
    CHECK(own_worker_nccl_missing(WorkerNccl::NoCuda, d) ==
          "megatron-run was built without CUDA (its worker has no CUDA backend and no NCCL)");
    CHECK_THAT(own_worker_nccl_missing(WorkerNccl::NoNccl, d), Catch::StartsWith("megatron-run was built with CUDA but without NCCL"));
    CHECK_THAT(own_worker_nccl_missing(WorkerNccl::NoWorker, d), Catch::StartsWith("megatron-run was built without its worker"));
  }
  // Built with it: an NVIDIA GPU is all the launcher can check.
  CHECK(own_worker_nccl_missing(WorkerNccl::Built, nvidia(1)).empty());
  CHECK(own_worker_nccl_missing(WorkerNccl::Built, GpuDevices{}) ==
        "this machine shows no NVIDIA GPU (no /dev/nvidia<N> device, no NVIDIA driver: /proc/driver/nvidia absent)");
  GpuDevices hidden = nvidia(2);
  hidden.cuda_visible_devices = "-1";
  CHECK(own_worker_nccl_missing(WorkerNccl::Built, hidden) == "CUDA_VISIBLE_DEVICES='-1' hides every GPU");
  // ROCm: our CUDA path does not drive it, and the refusal says why the GPU it has does not count.
  CHECK(own_worker_nccl_missing(WorkerNccl::Built, rocm()) ==
        "this machine shows no NVIDIA GPU (no /dev/nvidia<N> device, no NVIDIA driver: /proc/driver/nvidia absent); "
        "/dev/kfd is an AMD GPU, which megatron-run's CUDA path does not drive");
}

TEST_CASE("the user's program: doubted only on a machine without any GPU", "[launch][nccl-check]") {
  CHECK(program_nccl_doubt(nvidia(1)).empty());
  CHECK(program_nccl_doubt(rocm()).empty());  // torch's nccl is RCCL there
  CHECK(program_nccl_doubt(GpuDevices{}) ==
        "this machine shows no GPU (no /dev/nvidia<N> device, no GPU in /proc/driver/nvidia/gpus, no ROCm /dev/kfd)");
  GpuDevices hidden = nvidia(4);
  hidden.cuda_visible_devices = "";
  CHECK(program_nccl_doubt(hidden) == "CUDA_VISIBLE_DEVICES='' hides every GPU");
}
