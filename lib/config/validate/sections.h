// The sections of the validation chain, one file per concern (lib/config/validate/*.cpp), run in order: the
// ordered table is sections.cpp, the section functions are declared by subject in section_functions.h.
#pragma once

#include <vector>

#include "config/validate/context.h"

namespace mr {

struct Section {
  const char* name;
  void (*run)(Context&);
};

// Megatron's chain: in the order validate_args() runs them (the OptimizerConfig checks last); sections.cpp.
const std::vector<Section>& validation_sections();

// The stages of validation, in the order they run; a failed rule ends validation (later stages do not run).
//   validate_args  Megatron's validate_args() and OptimizerConfig checks (validation_sections()).
//   sanity         megatron-run's own checks of values Megatron accepts but no job can run with (sanity.h);
//                  runs only once Megatron's chain has passed, so it never changes Megatron's verdict.
//   init           what Megatron would refuse at initialisation: its model construction (init.h); runs only once
//                  the stages before it passed.
// A further stage is one more entry here with its rules declared for that stage (Rule::stage); diagnostics, the
// JSON outputs and `megatron-run rules` pick it up from this list.
struct Stage {
  const char* name;         // kStageValidateArgs, kStageSanity, kStageInit (rule.h)
  const char* description;  // one line, for docs/validation.md
  std::vector<Section> sections;
};
const std::vector<Stage>& validation_stages();

}  // namespace mr
