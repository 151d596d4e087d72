#include "config/validate/sections.h"

namespace mr {

const std::vector<Section>& validation_sections() {
  static const std::vector<Section> sections = {
  };
  return sections;
}

}  // namespace mr
