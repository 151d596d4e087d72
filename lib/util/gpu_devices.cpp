// The GPU probe (gpu_devices.h): directory listings and existence checks only.
#include "util/gpu_devices.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <system_error>


namespace mr::util {

namespace fs = std::filesystem;

namespace {

// "nvidia0", "nvidia12": a GPU's device node (not nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-caps).
bool gpu_node_name(const std::string& name) {
  if (name.size() <= 6 || name.compare(0, 6, "nvidia") != 0) return false;
  for (size_t i = 6; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

}  // namespace

bool GpuDevices::hidden() const {
  if (!cuda_visible_devices) return false;
  const std::string& v = *cuda_visible_devices;
  return v.empty() || v.rfind("-1", 0) == 0 || v == "NoDevFiles";
}

int GpuDevices::visible() const {
  if (hidden()) return 0;
  if (cuda_visible_devices) {
    int n = 1;
    for (char c : *cuda_visible_devices) n += c == ',';
    return n;
  }
  return nvidia();
}

std::string GpuDevices::why_no_nvidia() const {
  if (hidden()) return "CUDA_VISIBLE_DEVICES='" + *cuda_visible_devices + "' hides every GPU";
  if (nvidia() > 0) return "";
  return std::string("this machine shows no NVIDIA GPU (no /dev/nvidia<N> device, ") +
         (nvidia_driver ? "no GPU in /proc/driver/nvidia/gpus)" : "no NVIDIA driver: /proc/driver/nvidia absent)");
}

GpuDevices probe_gpu_devices(const std::string& root, const std::optional<std::string>& cuda_visible_devices) {
  GpuDevices d;
  d.cuda_visible_devices = cuda_visible_devices;
  const fs::path r = root.empty() ? fs::path("/") : fs::path(root);
  std::error_code ec;
  for (fs::directory_iterator it(r / "dev", ec), end; !ec && it != end; it.increment(ec))
    if (gpu_node_name(it->path().filename().string())) ++d.nvidia_nodes;
  ec.clear();
  const fs::path gpus = r / "proc/driver/nvidia/gpus";
  for (fs::directory_iterator it(gpus, ec), end; !ec && it != end; it.increment(ec)) ++d.nvidia_driver_gpus;
  d.nvidia_driver = fs::exists(gpus, ec) || fs::exists(r / "dev/nvidiactl", ec);
  d.rocm = fs::exists(r / "dev/kfd", ec);
  return d;
}

DeviceChoice choose_device(int local_rank, int visible, const std::optional<std::string>& cuda_visible_devices) {
  const std::string env = cuda_visible_devices ? "CUDA_VISIBLE_DEVICES=" + *cuda_visible_devices
                                               : std::string("CUDA_VISIBLE_DEVICES unset");
  DeviceChoice c;
  if (visible <= 0) {
    c.refusal = "no GPU is visible to CUDA (" + env + "; the driver)";
  } else if (local_rank < 0) {
    c.refusal = "LOCAL_RANK " + std::to_string(local_rank) + " is negative";
  } else if (visible == 1) {
    c.device = 0;
  } else if (local_rank >= visible) {
    const std::string lr = std::to_string(local_rank), n = std::to_string(visible),
                      shared = std::to_string(local_rank % visible);
    c.shared = true;
    c.refusal = "LOCAL_RANK " + lr + " has no GPU of its own: " + n + " GPUs are visible (" + env +
                "), so it would share GPU " + shared + " with LOCAL_RANK " + shared + "; start at most " + n +
                " ranks on this machine (--nproc-per-node) or give each rank one GPU of its own (CUDA_VISIBLE_DEVICES "
                "per rank)";
  } else {
    c.device = local_rank;
  }
  return c;
}

std::optional<std::string> cuda_visible_devices_env() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible ? std::optional<std::string>(visible) : std::nullopt;
}

GpuDevices machine_gpu_devices() {
  const char* root = std::getenv("MR_DEVICE_ROOT");
  return probe_gpu_devices(root && *root ? root : "/", cuda_visible_devices_env());
}

}  // namespace mr::util
