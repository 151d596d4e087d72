// Megatron's command line, parsed with argparse's semantics (allow_abbrev=False, no positionals).
//
// Tokens carry their origin (argv index or config file:line) so that every error and every resolved value
// can point back at the word that produced it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "config/namespace.h"
#include "config/schema.h"

namespace mr {

struct Token {
  std::string text;
  Provenance origin;  // Cli "argv[3]" or Config "file.yaml:12"
};

// A usage error: exit status 2. `flags` names the options involved (for JSON diagnostics).
struct UsageError : std::runtime_error {
  UsageError(std::string msg, std::vector<std::string> flags_ = {}, std::string where_ = {}, std::string id_ = {})
      : std::runtime_error(std::move(msg)), flags(std::move(flags_)), where(std::move(where_)), id(std::move(id_)) {}
  std::vector<std::string> flags;
  std::string where;  // "file.yaml:12" when the offending word came from a file
  // A stable id for the kind of refusal ("input.not-regular-file", "input.yaml-recursive-alias", ...; see
  // docs/config-files.md); empty for the generic usage error. `check` reports it as the diagnostic's rule.
  std::string id;
  const std::string& rule() const {
    static const std::string generic = "usage";
    return id.empty() ? generic : id;
  }
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
