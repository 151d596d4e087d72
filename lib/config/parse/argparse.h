// Megatron's command line, parsed with argparse's semantics (allow_abbrev=False, no positionals).
//
// Tokens carry their origin (argv index or config file:line) so that every error and every resolved value
// can point back at the word that produced it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostic.h"
#include "config/namespace.h"
#include "config/rule.h"
#include "config/schema.h"

namespace mr {

// A deprecated flag of Megatron's given (the parser's warning, "FLAG is deprecated: ..."; its default id where the
// warning carries none: apps/megatron-run/cli.cpp's parse_warning).
extern const Rule kDeprecatedFlagRule;
// The parser's refusals (exit 2, argparse's words kept; stage "parse", so that stderr keeps argparse's
// `megatron-run: error: TEXT` while `check` and the JSON documents carry the id): an argument it does not know
// (a word of a command line or MODEL_ARGS, a plain-layout file's key), a value its type or choices refuse, a
// flag without the value(s) it takes.
extern const Rule kUnknownArgumentRule;
extern const Rule kInvalidValueRule;
extern const Rule kMissingValueRule;
// A word for a `type=bool` argument (--onnx-safe) that spells a false value (False, false, 0, no, off, None):
// Megatron's type is Python's bool(), which makes any non-empty word True (a warning, id parse.bool-type-word).
extern const Rule kBoolTypeWordRule;

// The parse.bool-type-word warning ("[parse.bool-type-word] FILE:12: ..." for a file's word) when `word`, given to
// `arg` as `option`, is a false-looking word for a type=bool argument; "" otherwise.
std::string bool_type_word_warning(const Arg& arg, const std::string& option, const std::string& word,
                                   const Provenance& origin);

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
// unrecognized arguments (all of them listed, with the closest known flags suggested). With `unrecognized`,
// argparse's parse_known_args (Megatron's parse_args with ignore_unknown_args): the words it would refuse as
// unrecognized go there, in order, and are no error; a bad value of a known flag still is.
ParseReport parse_tokens(const Schema& schema, const std::vector<Token>& tokens, Namespace& ns,
                         std::vector<Token>* unrecognized = nullptr);

// argparse's mutually exclusive groups (mutually_exclusive_groups(), schema.h) across sources: throws UsageError
// input.mutually-exclusive when two members of a group were given by the user (config files and the command line;
// parse_tokens refuses two within one list of words as argparse does, at the second). The later of the two in the
// argv Megatron gets is named first, as argparse does: `config_files` (in their order, a file's words by line)
// before the command line.
void check_mutually_exclusive(const Schema& schema, const Namespace& ns,
                              const std::vector<std::string>& config_files = {});

// Whether argparse reads `word`, when it is no option string the parser knows, as an option rather than a value:
// it starts with '-', is more than "-", is no negative number ('^-\d+$|^-\d*\.\d+$'; Megatron's parser has no
// option that looks like one) and holds no blank. Such a word is never the value of the option before it, which
// is then refused as "argument --X: expected one argument" (megatron-run's own options follow the same reading).
bool argparse_reads_as_option(std::string_view word);

// Tokens from a plain argv (origin "argv[i]", counted from `first_index`).
std::vector<Token> argv_tokens(const std::vector<std::string>& args, int first_index = 1);

// Applies one already-typed value to an argument, as a config-file mapping does (`num_layers: 12`).
// The value is checked against the argument's type, nargs and choices; `key` is the spelling used.
void assign_value(const Arg& arg, const std::string& key, const Value& v, const Provenance& origin, Namespace& ns);

}  // namespace mr
