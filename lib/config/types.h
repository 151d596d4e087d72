// Value converters for schema types: what argparse's `type=` callables do in Megatron, without eval.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "config/schema.h"
#include "config/value.h"

namespace mr {

// Raised when a word is not a valid value of a type; `what()` says why (argparse's "invalid int value: 'x'").
struct ConvError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Python int(word): optional sign, digits with single underscores between them, surrounding whitespace.
int64_t parse_py_int(std::string_view word);
// Python float(word): decimal/exponent forms, inf/nan spellings, underscores between digits.
double parse_py_float(std::string_view word);

// Evaluates Megatron's layer-pattern language (digits , [ ] ( ) + *), e.g. "([1]*3+[0]*1)*3", with Python's
// semantics for + and * on ints, lists and tuples. Never executes anything.
Value eval_pattern(std::string_view text);

// Converts one command-line word according to `type` (the argument's schema type).
Value convert(ArgType type, std::string_view word);

}  // namespace mr
