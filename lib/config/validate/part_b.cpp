// Part B of the validation chain: see sections.h for the seed lines it covers.
#include "config/validate/part_b.h"

#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_part_b() {
  return {
      {"batch-size", &part_b::batch_size},              // seed 626-653
      {"hybrid-pattern", &part_b::hybrid_pattern},      // seed 655-812
      {"virtual-pipeline", &part_b::virtual_pipeline},  // seed 814-909
      {"torch-fsdp2", &part_b::torch_fsdp2},            // seed 911-956
  };
}

}  // namespace mr
