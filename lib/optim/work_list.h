// The CPU kernels' unit of parallel work (internal to lib/optim): a list of tensors cut into chunks of kChunk
// elements (the last one of a tensor shorter), shared by OpenMP threads with a static schedule so that each
// thread walks contiguous memory. Any slot type with a `numel` member. The chunking is the GPU kernels' own
// (launch_geometry.h), with a larger chunk.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optim/launch_geometry.h"

namespace mr::optim::cpu::detail {

constexpr int64_t kChunk = int64_t{1} << 16;

using Work = geom::WorkItem;

template <class Slot>
std::vector<Work> work_list(std::span<const Slot> slots) {
  return geom::chunk_list(slots, [](const Slot& s) { return s.numel; }, kChunk);
}

}  // namespace mr::optim::cpu::detail
