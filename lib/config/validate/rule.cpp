#include "config/validate/rule.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mr {

namespace {
std::vector<const Rule*>& registry() {
  static std::vector<const Rule*> r;
  return r;
}
}  // namespace

Rule::Rule(const char* id_, Level level_, const char* description_, const char* file_, int line_)
    : id(id_), level(level_), description(description_), file(file_), line(line_) {
  registry().push_back(this);
}

std::vector<const Rule*> all_rules() {
  std::vector<const Rule*> out = registry();
  std::sort(out.begin(), out.end(), [](const Rule* a, const Rule* b) { return std::strcmp(a->id, b->id) < 0; });
  return out;
}

}  // namespace mr
