// The CPU kernels' unit of parallel work (internal to lib/optim): a list of tensors cut into chunks of kChunk
// elements (the last one of a tensor shorter), shared by OpenMP threads with a static schedule so that each
// thread walks contiguous memory. Any slot type with a `numel` member.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace mr::optim::cpu::detail {

constexpr int64_t kChunk = int64_t{1} << 16;

struct Work {
  int32_t slot;  // index into the slot list
  int64_t begin, len;
};

template <class Slot>
std::vector<Work> work_list(std::span<const Slot> slots) {
  std::vector<Work> w;
  for (size_t s = 0; s < slots.size(); ++s)
    for (int64_t b = 0; b < slots[s].numel; b += kChunk)
      w.push_back({static_cast<int32_t>(s), b, std::min(kChunk, slots[s].numel - b)});
  return w;
}

}  // namespace mr::optim::cpu::detail
