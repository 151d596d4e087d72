// The launcher's check of --distributed-backend nccl (nccl_check.h).
#include "launch/nccl_check.h"

#include "util/rule_id.h"

namespace mr::launch {

const Rule kNcclUnavailableRule{
    "dist.nccl-unavailable", Rule::Level::Error,
    "--distributed-backend nccl (given) for megatron-run's own worker where it cannot run: a build without CUDA or "
    "NCCL, or a machine that shows no NVIDIA GPU (CUDA_VISIBLE_DEVICES hiding them all included): refused before "
    "any worker starts (not in --dry-run or check); the worker refuses it too. A program's nccl is not refused.",
    __FILE__, __LINE__, kStageInit};
const Rule kLocalRankGpuRule{
    "dist.local-rank-gpu", Rule::Level::Error,
    "A rank of megatron-run's worker on a GPU path whose LOCAL_RANK is not below the number of GPUs visible to it "
    "(more than one visible): it would share another local rank's GPU, which NCCL refuses only later, so the "
    "worker refuses it at once, naming CUDA_VISIBLE_DEVICES.",
    __FILE__, __LINE__, kStageRun};

std::string device_refusal(const util::DeviceChoice& c, const std::string& backend) {
  const std::string text = backend + ": " + c.refusal;
  return c.shared ? with_rule_id(kLocalRankGpuRule.id, text) : text;
}

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
