// Whether an already-typed value (one read from JSON, not a command-line word) is a value the parser could have
// stored for an argument: the kind its declared type converts a word to, its nargs and its choices. Used where a
// value reaches the namespace without a parser: a checkpoint's saved arguments (--use-checkpoint-args).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/value.h"

namespace mr {

// nullopt when `v` fits the argument `dest` (None always fits: it is every argument's "not set"); otherwise what
// it should be, as a phrase ("an integer", "true or false", "a list of integers", "one of 'LayerNorm',
// 'RMSNorm'"). A dest the schema does not declare (one validation derives) is checked against its typed view
// (config/args.h); a dest neither knows fits.
std::optional<std::string> arg_value_misfit(std::string_view dest, const Value& v);

}  // namespace mr
