// A process's CPU affinity for any number of CPUs. glibc's fixed cpu_set_t holds CPUs 0-1023 only; the kernel
// takes (and reports) masks of any size, so machines with more CPUs are read and bound in full here.
#pragma once

#include <set>
#include <vector>

namespace mr::launch {

// This process's allowed CPUs (sched_getaffinity with a mask grown until the kernel's fits); empty when the kernel
// will not say.
std::set<int> current_affinity();

// A set of CPUs as the kernel's bit mask, built before fork, applied in the child (between fork and exec).
class CpuMask {
 public:
  CpuMask() = default;
  // Negative CPUs are not CPUs and are left out.
  explicit CpuMask(const std::set<int>& cpus);
  bool empty() const { return bits_.empty(); }
  // Binds the calling process to the mask: 0, or the errno of sched_setaffinity. Async-signal-safe (no allocation).
  int apply() const noexcept;

 private:
  std::vector<unsigned long> bits_;
};

}  // namespace mr::launch
