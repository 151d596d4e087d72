// The sections of the validation chain, one file per concern (lib/config/validate/*.cpp), run in order.
#pragma once

#include <vector>

#include "config/validate/context.h"

namespace mr {

struct Section {
  const char* name;
  void (*run)(Context&);
};

// In the order validate_args() runs them.
const std::vector<Section>& validation_sections();

}  // namespace mr
