// What this machine shows of its GPUs without loading a driver library: NVIDIA's device nodes (/dev/nvidia0, ...)
// and driver directory (/proc/driver/nvidia/gpus/<PCI address>), ROCm's /dev/kfd, and CUDA_VISIBLE_DEVICES. One
// probe for the launcher's --nproc-per-node gpu, its --distributed-backend nccl check (launch/nccl_check.h) and the
// validation target's GPU architecture (config/target_env.h). The file system root is a parameter, so that a test
// can lay out each kind of machine in a directory (MR_DEVICE_ROOT; machine_gpu_devices()).
#pragma once

#include <optional>
#include <string>

namespace mr::util {

struct GpuDevices {
  int nvidia_nodes = 0;        // /dev/nvidia<N> device nodes (not nvidiactl, nvidia-uvm, ...)
  int nvidia_driver_gpus = 0;  // entries of /proc/driver/nvidia/gpus (one per GPU the driver knows)
  bool nvidia_driver = false;  // /proc/driver/nvidia/gpus or /dev/nvidiactl is there
  bool rocm = false;           // /dev/kfd: AMD's compute driver (ROCm; RCCL serves torch's "nccl" there)
  std::optional<std::string> cuda_visible_devices;  // CUDA_VISIBLE_DEVICES as set (nullopt: unset)

  // CUDA_VISIBLE_DEVICES hides every GPU: set empty, to -1 (or a list starting with it: CUDA stops at the first
  // invalid entry) or NoDevFiles (what some batch systems set on a node without GPUs).
  bool hidden() const;
  // The NVIDIA GPUs this machine shows, before CUDA_VISIBLE_DEVICES: the device nodes or the driver's entries.
  int nvidia() const { return nvidia_nodes > nvidia_driver_gpus ? nvidia_nodes : nvidia_driver_gpus; }
  // The GPUs a CUDA program would see: none when hidden(); CUDA_VISIBLE_DEVICES's entries when it lists some;
  // else nvidia().
  int visible() const;
  // Why a CUDA program would find no NVIDIA GPU here ("" when it would find one): CUDA_VISIBLE_DEVICES, or the
  // device nodes and driver directory that are missing.
  std::string why_no_nvidia() const;
};

// Probes the machine whose file system root is `root` ("/" normally), with `cuda_visible_devices` as the value
// of CUDA_VISIBLE_DEVICES (nullopt: unset).
GpuDevices probe_gpu_devices(const std::string& root, const std::optional<std::string>& cuda_visible_devices);

// The process's CUDA_VISIBLE_DEVICES (nullopt: unset).
std::optional<std::string> cuda_visible_devices_env();

// This machine: the root MR_DEVICE_ROOT names (a test's fake machine), else "/"; the process's CUDA_VISIBLE_DEVICES.
GpuDevices machine_gpu_devices();

// The CUDA device a rank takes, for the CUDA backend (run/device_plan.h) and the NCCL communicators
// (distributed/nccl.cpp), so that both pick the same one: LOCAL_RANK among the `visible` devices (what
// cudaGetDeviceCount reports), or device 0 when only one is visible (one GPU per process, CUDA_VISIBLE_DEVICES set
// per rank). `refusal` is set instead (device -1) when there is no device, LOCAL_RANK is negative, or more than
// one device is visible and LOCAL_RANK is not below their count: wrapping around would put two ranks of this
// machine on one GPU, which NCCL refuses only later ("Duplicate GPU detected") [dist.local-rank-gpu].
struct DeviceChoice {
  int device = -1;
  std::string refusal;
  // The refusal is that LOCAL_RANK has no GPU of its own (it would share one): rule dist.local-rank-gpu, which the
  // caller puts on its message (launch::device_refusal; util has no rules).
  bool shared = false;
};
DeviceChoice choose_device(int local_rank, int visible, const std::optional<std::string>& cuda_visible_devices);

}  // namespace mr::util
