// The Megatron command line that a parsed namespace stands for: what `--format argv` prints and what a
// launched training program receives after its own arguments.
//
// Built from the namespace after parsing (config files and command-line flags merged, later wins), not from
// the words as given, so that a plain `--config` file, its functional-test (MODEL_ARGS) twin and the same
// flags typed by hand all give the same words. Every argument that a config file or the command line set is
// written, in the schema's order, in the spelling Megatron's own parser reads back to the same value; defaults
// that nobody set are left to the program's parser. Validation-derived values are never written: the program
// runs Megatron's validate_args itself.
#pragma once

#include <string>
#include <vector>

#include "config/namespace.h"
#include "config/schema.h"

namespace mr {

struct Parsed;  // config/parse/invocation.h

struct MegatronArgv {
  std::vector<std::string> words;
  // Arguments whose value no command line can produce (e.g. `--seq-length: null` in a file when the default
  // is a number): "--flag (value)". A launcher refuses them; --format argv names them in an error.
  std::vector<std::string> unrepresentable;
};

MegatronArgv megatron_argv(const Schema& schema, const Namespace& parsed);

// The words for a parsed invocation: megatron_argv of its namespace; with --yaml-cfg (whose file replaces the
// namespace) the words as given, so the program reads the same YAML file. Throws UsageError naming the
// arguments no command line can carry.
std::vector<std::string> resolved_argv(const Parsed& parsed);

// The words a launcher appends after a program's own (a Parsed with ProgramWords: config/parse/invocation.h):
// resolved_argv of the config files and the command line alone, read from that parse rather than parsed again.
std::vector<std::string> appended_argv(const Parsed& parsed);

}  // namespace mr
