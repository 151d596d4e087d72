// util/gpu_devices.h: the GPU probe on machines laid out in a scratch directory (the probe's root), and what
// CUDA_VISIBLE_DEVICES makes of them.
#include <catch2/catch.hpp>

#include <string>

#include "scratch.h"
#include "util/gpu_devices.h"

using mr::util::GpuDevices;
using mr::util::probe_gpu_devices;

// A machine root named `name` with the files `paths` (directories end in '/').
static std::string machine(const std::string& name, std::initializer_list<const char*> paths) {
  return mrtest::fake_root(name, paths, "gpu-devices");
}

TEST_CASE("the GPU probe: NVIDIA's device nodes and driver entries, ROCm's /dev/kfd", "[gpu-devices]") {
  // Two NVIDIA GPUs with their driver: the nodes count, the control and UVM nodes do not.
  const std::string two = machine("two", {"dev/nvidia0", "dev/nvidia1", "dev/nvidiactl", "dev/nvidia-uvm",
                                          "dev/nvidia-modeset", "proc/driver/nvidia/gpus/0000:01:00.0/",
                                          "proc/driver/nvidia/gpus/0000:02:00.0/"});
  GpuDevices d = probe_gpu_devices(two, std::nullopt);
  CHECK(d.nvidia_nodes == 2);
  CHECK(d.nvidia_driver_gpus == 2);
  CHECK(d.nvidia_driver);
  CHECK_FALSE(d.rocm);
  CHECK(d.nvidia() == 2);
  CHECK(d.visible() == 2);
  CHECK(d.why_no_nvidia().empty());
  // A container given one GPU that is not the first: its node counts.
  d = probe_gpu_devices(machine("third", {"dev/nvidia3", "dev/nvidiactl"}), std::nullopt);
  CHECK(d.nvidia() == 1);
  CHECK(d.why_no_nvidia().empty());
  // The driver's entries without nodes (not created yet): still GPUs.
  CHECK(probe_gpu_devices(machine("driver-only", {"proc/driver/nvidia/gpus/0000:01:00.0/"}), std::nullopt).nvidia() == 1);
  // The driver loaded but no GPU in it; no driver at all; ROCm.
  d = probe_gpu_devices(machine("driver-no-gpu", {"dev/nvidiactl", "proc/driver/nvidia/gpus/"}), std::nullopt);
  CHECK(d.nvidia() == 0);
  CHECK(d.nvidia_driver);
  CHECK(d.why_no_nvidia() == "this machine shows no NVIDIA GPU (no /dev/nvidia<N> device, no GPU in /proc/driver/nvidia/gpus)");
  d = probe_gpu_devices(machine("bare", {"dev/null"}), std::nullopt);
  CHECK(d.nvidia() == 0);
  CHECK_FALSE(d.nvidia_driver);
  CHECK(d.why_no_nvidia() ==
        "this machine shows no NVIDIA GPU (no /dev/nvidia<N> device, no NVIDIA driver: /proc/driver/nvidia absent)");
  d = probe_gpu_devices(machine("rocm", {"dev/kfd", "dev/dri/renderD128"}), std::nullopt);
  CHECK(d.rocm);
  CHECK(d.nvidia() == 0);
  // A root that is not there: nothing.
  d = probe_gpu_devices((mrtest::scratch_dir("gpu-devices") / "absent").string(), std::nullopt);
  CHECK(d.nvidia() == 0);
  CHECK_FALSE(d.rocm);
}

TEST_CASE("CUDA_VISIBLE_DEVICES: empty, -1 or NoDevFiles hide every GPU; a list is what is visible", "[gpu-devices]") {
  const std::string two = machine("two-visible", {"dev/nvidia0", "dev/nvidia1", "proc/driver/nvidia/gpus/a/",
                                                  "proc/driver/nvidia/gpus/b/"});
  for (const char* hiding : {"", "-1", "-1,0", "NoDevFiles"}) {
    const GpuDevices d = probe_gpu_devices(two, std::string(hiding));
    INFO("CUDA_VISIBLE_DEVICES='" << hiding << "'");
    CHECK(d.hidden());
    CHECK(d.visible() == 0);
    CHECK(d.nvidia() == 2);  // the machine still has them
    CHECK(d.why_no_nvidia() == "CUDA_VISIBLE_DEVICES='" + std::string(hiding) + "' hides every GPU");
  }
  CHECK(probe_gpu_devices(two, std::string("1")).visible() == 1);
  CHECK(probe_gpu_devices(two, std::string("0,1")).visible() == 2);
  CHECK(probe_gpu_devices(two, std::string("GPU-8a1b")).why_no_nvidia().empty());
}

TEST_CASE("rule dist.local-rank-gpu: a rank's device, never shared with another local rank", "[gpu-devices]") {
  using mr::util::choose_device;
  // LOCAL_RANK among the visible devices.
  CHECK(choose_device(0, 8, std::nullopt).device == 0);
  CHECK(choose_device(7, 8, std::nullopt).device == 7);
  CHECK(choose_device(7, 8, std::nullopt).refusal.empty());
  // One device visible (one GPU per process): device 0, whatever LOCAL_RANK is.
  CHECK(choose_device(5, 1, std::string("5")).device == 0);
  CHECK(choose_device(5, 1, std::string("5")).refusal.empty());
  // More local ranks than visible devices: refused with the counts and CUDA_VISIBLE_DEVICES, no device.
  const auto two = choose_device(2, 2, std::string("0,1"));
  CHECK(two.device == -1);
  CHECK(two.shared);  // rule dist.local-rank-gpu: the caller tags it (launch::device_refusal; device_plan_test)
  CHECK(two.refusal ==
        "LOCAL_RANK 2 has no GPU of its own: 2 GPUs are visible (CUDA_VISIBLE_DEVICES=0,1), so "
        "it would share GPU 0 with LOCAL_RANK 0; start at most 2 ranks on this machine (--nproc-per-node) or give "
        "each rank one GPU of its own (CUDA_VISIBLE_DEVICES per rank)");
  const auto unset = choose_device(11, 4, std::nullopt);
  CHECK(unset.device == -1);
  CHECK_THAT(unset.refusal, Catch::Contains("LOCAL_RANK 11") && Catch::Contains("4 GPUs are visible") &&
                                Catch::Contains("CUDA_VISIBLE_DEVICES unset") && Catch::Contains("share GPU 3"));
  // No device, a negative LOCAL_RANK.
  const auto none = choose_device(0, 0, std::string(""));
  CHECK(none.device == -1);
  CHECK_FALSE(none.shared);
  CHECK_THAT(none.refusal, Catch::Contains("no GPU is visible") && Catch::Contains("CUDA_VISIBLE_DEVICES="));
  CHECK(choose_device(-1, 4, std::nullopt).device == -1);
  CHECK_THAT(choose_device(-1, 4, std::nullopt).refusal, Catch::Contains("LOCAL_RANK -1 is negative"));
}
