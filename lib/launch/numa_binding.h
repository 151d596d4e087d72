// torchrun 2.x's --numa-binding: each worker bound to CPUs near the GPU whose index is its local rank
// (torch/numa/binding.py, AffinityMode). The CPUs come from sysfs; the GPUs' PCI addresses from the CUDA driver
// (libcuda.so.1, opened at run time: nothing here links CUDA), in CUDA's device order under the launcher's
// CUDA_VISIBLE_DEVICES, as torch.cuda.get_device_properties gives them. torchrun wraps each worker's command in
// `numactl --physcpubind=...`; megatron-run sets the same CPU affinity itself between fork and exec, so numactl
// need not be installed.
#pragma once

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mr::launch {

struct NumaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class NumaMode {
  Node,         // every allowed CPU of the GPU's NUMA node
  Socket,       // every allowed CPU of the NUMA nodes of the GPU's socket
  Exclusive,    // the node's physical cores split evenly among the GPUs on that node (whole cores, no sharing)
  CoreComplex,  // one last-level-cache domain of the node per GPU, the largest first, round robin
};
// "node", "socket", "exclusive", "core-complex"; nullopt for anything else.
std::optional<NumaMode> numa_mode_from_string(std::string_view s);
std::string_view to_string(NumaMode m);

// What the binding reads: sysfs below `sysfs_root`, the GPUs' PCI addresses ("0000:3b:00.0", lower case) in
// device order, and the CPUs the launcher may use (its affinity).
struct NumaMachine {
  std::string sysfs_root = "/";
  std::vector<std::string> gpu_pci;
  std::set<int> allowed;
};

// This machine: sysfs at "/", the CUDA driver's GPUs, sched_getaffinity. MR_NUMA_SYSFS_ROOT and
// MR_NUMA_GPU_PCI_ADDRESSES (comma-separated) replace the first two (tests; a machine whose driver cannot be
// asked). NumaError saying why when the GPUs cannot be listed (no driver, no GPU).
NumaMachine this_machine();

// The CPUs the worker that uses GPU `device_index` is bound to, as torch computes them. NumaError naming what is
// missing (a device index past the GPUs, a sysfs file, no allowed CPU, fewer physical cores than GPUs on a node).
std::set<int> numa_cpus_for_device(const NumaMachine& m, int device_index, NumaMode mode);

// sysfs's CPU list format, "0-3,8,10-11", both ways. parse_cpu_list throws NumaError for a malformed list.
std::set<int> parse_cpu_list(std::string_view s);
std::string cpu_list(const std::set<int>& cpus);

}  // namespace mr::launch
