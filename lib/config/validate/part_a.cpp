// Part A of the validation chain: see sections.h for the seed lines it covers.
#include "config/validate/part_a_sections.h"
#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_part_a() {
  // In seed order (arguments.py validate_args 419-625).
  return {
      {"ckpt-conversion-prep", &part_a::ckpt_conversion_prep},    // seed 421-436
      {"heterogeneous-config", &part_a::heterogeneous_config},    // seed 438-439 (195-267)
      {"use-dist-ckpt", &part_a::use_dist_ckpt},                  // seed 441
      {"model-parallel-sizes", &part_a::model_parallel_sizes},    // seed 443-522
      {"deprecated-flags", &part_a::deprecated_flags},            // seed 524-575
      {"cuda-graph-normalize", &part_a::cuda_graph_normalize},    // seed 577-588 (286-325)
      {"input-defaults", &part_a::input_defaults},                // seed 590-625
  };
}

}  // namespace mr
