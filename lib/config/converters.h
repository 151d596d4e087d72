// Value converters for schema types: what argparse's `type=` callables do in Megatron, without eval.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
// semantics for + and * on ints, lists and tuples. Never executes anything. Bounded where Python is not (every
// pattern-typed flag: --moe-layer-freq, --window-attn-skip-freq, --linear-attention-freq, --no-rope-freq,
// --csa-compress-ratios): the expression is at most kMaxPatternChars characters, its result holds at most
// kMaxPatternValues values (counting every nested element and list: [1, [2, 3]] holds 5), evaluating it builds
// at most kMaxPatternWork values in all, integers stay within 64 bits and nesting within 64 levels; ConvError
// (a usage error naming the flag) otherwise. Time is linear in the text plus the values built.
inline constexpr size_t kMaxPatternChars = 100000;
inline constexpr uint64_t kMaxPatternValues = 1000000;
inline constexpr uint64_t kMaxPatternWork = 4 * kMaxPatternValues;
Value eval_pattern(std::string_view text);

// The words an argument of type SignalEnum takes (--exit-signal): the names of Python's signal.Signals members on
// Linux, aliases included (SIGIOT, SIGPOLL), as Megatron's `Signals[name]` looks them up; never a number.
std::vector<std::string> signal_names();
// CudaGraphModule's member names ("attn", "mlp", ...), as --cuda-graph-modules takes them besides the full scopes.
std::vector<std::string> cuda_graph_module_names();
// The full scopes --cuda-graph-modules takes as they are ("full", "full_iteration", "full_iteration_inference").
std::vector<std::string> cuda_graph_full_scopes();

// Converts one command-line word according to `type` (the argument's schema type).
Value convert(ArgType type, std::string_view word);

}  // namespace mr
