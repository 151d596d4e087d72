// Part A of the validation chain: see sections.h for the seed lines it covers.
#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_part_a() {
  return {};
}

}  // namespace mr
