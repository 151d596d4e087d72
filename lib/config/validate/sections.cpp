#include "config/validate/sections.h"

#include "config/validate/init.h"
#include "config/validate/sanity.h"

namespace mr {

const std::vector<Section>& validation_sections() {
  static const std::vector<Section> sections = [] {
    std::vector<Section> all;
    // validate_args() in the seed's order, in five parts, then the OptimizerConfig checks.
    for (auto* part : {&sections_part_a, &sections_part_b, &sections_part_c, &sections_part_d, &sections_part_e,
                       &sections_optimizer})
      for (const Section& s : part()) all.push_back(s);
    return all;
  }();
  return sections;
}

const std::vector<Stage>& validation_stages() {
  static const std::vector<Stage> stages = {
      {kStageValidateArgs, "Megatron's validate_args() and OptimizerConfig checks, ported section by section",
       validation_sections()},
      {kStageSanity,
       "megatron-run's own checks: values Megatron accepts but no job can run with (after Megatron's chain passed)",
       sanity::sections()},
      {kStageInit,
       "what Megatron would refuse at initialisation, after validate_args passed: its model construction "
       "(TransformerConfig, the layers per pipeline stage); the process-group layout follows (init.process-groups)",
       init::sections()},
  };
  return stages;
}

}  // namespace mr
