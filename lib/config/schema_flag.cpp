// Schema::flag_for_dest: the one dest-to-flag mapping of messages (validation, the worker input, the schedule).
#include "config/schema.h"

namespace mr {

std::string Schema::flag_for_dest(std::string_view dest) const {
  for (const Arg* a : find_dest(dest))  // declaration order: the first action's first option string
    if (!a->flags.empty()) return a->flags.front();
  std::string f = "--" + std::string(dest);
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

}  // namespace mr
