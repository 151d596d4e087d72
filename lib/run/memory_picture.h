// A picture of the memory plan (`megatron-run params --format svg`): one stacked bar per (tensor, pipeline)
// rank — weights, gradients, main params, optimizer state — against the device's capacity, from the same
// estimate the text output prints (estimate_memory, model.h), activations included where the estimate applies
// (Megatron's figure is the first pipeline stage's; a rank without one says so in its tooltip and the legend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/model.h"

namespace mr::run {

struct RankMemory {
  int64_t tp_rank = 0, pp_rank = 0;
  MemoryEstimate mem;
  // Whether mem.activations is this rank's (false: not estimated here, e.g. a later pipeline stage; left out).
  bool activations_shown = true;
};

// A self-contained SVG. `capacity_bytes`: the device's memory (the line the bars are drawn against);
// `capacity_label` how the user wrote it ("80GiB").
std::string memory_svg(const std::vector<RankMemory>& ranks, double capacity_bytes, const std::string& capacity_label,
                       const std::string& title, const std::string& subtitle);

}  // namespace mr::run
