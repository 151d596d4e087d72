// A picture of the memory plan (`megatron-run params --format svg`): one stacked bar per (tensor, pipeline)
// rank — weights, gradients, main params, optimizer state — against the device's capacity, from the same
// estimate the text output prints (estimate_memory, model.h). Activations are not in the estimate yet; the
// picture says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/model.h"

namespace mr::run {

struct RankMemory {
  int64_t tp_rank = 0, pp_rank = 0;
  MemoryEstimate mem;
};

// A self-contained SVG. `capacity_bytes`: the device's memory (the line the bars are drawn against);
// `capacity_label` how the user wrote it ("80GiB").
std::string memory_svg(const std::vector<RankMemory>& ranks, double capacity_bytes, const std::string& capacity_label,
                       const std::string& title, const std::string& subtitle);

}  // namespace mr::run
