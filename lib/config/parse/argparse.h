// Megatron's command line, parsed with argparse's semantics (allow_abbrev=False, no positionals).
//
// Tokens carry their origin (argv index or config file:line) so that every error and every resolved value
// can point back at the word that produced it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "config/diagnostic.h"
#include "config/namespace.h"
#include "config/schema.h"

namespace mr {

struct Token {
  std::string text;
  Provenance origin;  // Cli "argv[3]" or Config "file.yaml:12"
};

// Builds a namespace holding every dest's default (argparse's starting point).
Namespace default_namespace(const Schema& schema);

struct ParseReport {
  std::vector<std::string> warnings;  // e.g. deprecated flags used
};

// Applies `tokens` on top of `ns` with argparse's rules. Throws UsageError on the first bad word, or on
// unrecognized arguments (all of them listed, with the closest known flags suggested).
ParseReport parse_tokens(const Schema& schema, const std::vector<Token>& tokens, Namespace& ns);

// Tokens from a plain argv (origin "argv[i]", counted from `first_index`).
std::vector<Token> argv_tokens(const std::vector<std::string>& args, int first_index = 1);

// Applies one already-typed value to an argument, as a config-file mapping does (`num_layers: 12`).
// The value is checked against the argument's type, nargs and choices; `key` is the spelling used.
void assign_value(const Arg& arg, const std::string& key, const Value& v, const Provenance& origin, Namespace& ns);

}  // namespace mr
