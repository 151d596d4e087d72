// A process's CPU affinity for any number of CPUs (launch/cpu_affinity.h).
#include "launch/cpu_affinity.h"

#include <sched.h>

#include <cerrno>
#include <climits>

namespace mr::launch {

namespace {
constexpr size_t kWordBits = sizeof(unsigned long) * CHAR_BIT;
constexpr size_t kMaxWords = (size_t{1} << 22) / kWordBits;  // 4 Mi CPUs: past any kernel's NR_CPUS
}  // namespace

std::set<int> current_affinity() {
  std::set<int> out;
  // The kernel refuses (EINVAL) a mask smaller than its own CPU count: grow until it fits.
  for (size_t words = 1024 / kWordBits; words <= kMaxWords; words *= 2) {
    std::vector<unsigned long> bits(words, 0);
    if (sched_getaffinity(0, words * sizeof(unsigned long), reinterpret_cast<cpu_set_t*>(bits.data())) != 0) {
      if (errno == EINVAL) continue;
      return out;
    }
    for (size_t w = 0; w < words; ++w)
      for (size_t b = 0; b < kWordBits; ++b)
        if (bits[w] >> b & 1UL) out.insert(static_cast<int>(w * kWordBits + b));
    return out;
  }
  return out;
}

CpuMask::CpuMask(const std::set<int>& cpus) {
  for (int c : cpus) {
    if (c < 0) continue;
    const size_t w = static_cast<size_t>(c) / kWordBits;
    if (w >= bits_.size()) bits_.resize(w + 1, 0);
    bits_[w] |= 1UL << (static_cast<size_t>(c) % kWordBits);
  }
}

int CpuMask::apply() const noexcept {
  if (bits_.empty()) return EINVAL;
  if (sched_setaffinity(0, bits_.size() * sizeof(unsigned long), reinterpret_cast<const cpu_set_t*>(bits_.data())) != 0)
    return errno;
  return 0;
}

}  // namespace mr::launch
