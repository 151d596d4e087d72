// YAML 1.1 scalar typing (PyYAML's SafeLoader), for Megatron's --yaml-cfg (config/parse/yaml_cfg.h) and --config files
// (config/parse/config_file.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/value.h"

namespace mr {

// A plain YAML scalar typed with YAML 1.1's implicit resolvers as PyYAML's SafeLoader does: null, bool, int
// (decimal, 0x, 0b, leading-0 octal, sexagesimal 1:30), float (needs a '.', signed exponent), else the string.
// Throws UsageError for timestamps (safe_load makes a date, which json.dumps cannot serialise).
Value yaml11_plain_scalar(const std::string& text, const std::string& where = {});

// A scalar under an explicit standard tag (`type` "int", "float", "bool" or "null": !!int, ...) constructed as
// PyYAML's SafeConstructor does, whatever the text's implicit type: !!float 1e-4 is 0.0001 (Python's float() after
// '_' is removed, with .inf/.nan and sexagesimal forms), !!int takes 0x/0o/0b/leading-0 octal and 1:30, !!bool
// any case of true/false/yes/no/on/off, !!null any text. nullopt where PyYAML raises (!!float abc, !!int 1.5,
// !!bool maybe, an empty !!int). Throws UsageError (as yaml11_plain_scalar) for an int past 64 bits.
std::optional<Value> yaml11_tagged_scalar(std::string_view type, const std::string& text,
                                          const std::string& where = {});

}  // namespace mr
