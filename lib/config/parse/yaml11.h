// YAML 1.1 scalar typing (PyYAML's SafeLoader), for Megatron's --yaml-cfg (config/parse/yaml_cfg.h) and --config files
// (config/parse/config_file.h).
#pragma once

#include <string>

#include "config/value.h"

namespace mr {

// A plain YAML scalar typed with YAML 1.1's implicit resolvers as PyYAML's SafeLoader does: null, bool, int
// (decimal, 0x, 0b, leading-0 octal, sexagesimal 1:30), float (needs a '.', signed exponent), else the string.
// Throws UsageError for timestamps (safe_load makes a date, which json.dumps cannot serialise).
Value yaml11_plain_scalar(const std::string& text, const std::string& where = {});

}  // namespace mr
