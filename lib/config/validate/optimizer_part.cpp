// The OptimizerConfig checks, run after validate_args (see sections.h).
#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_optimizer() {
  return {};
}

}  // namespace mr
