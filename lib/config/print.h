// Renderings of a resolved namespace and of the schema.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <utility>
#include <vector>

#include "config/diagnostic.h"
#include "config/namespace.h"
#include "config/rule.h"
#include "config/schema.h"
#include "util/rule_id.h"

namespace mr {

// Megatron's _print_args table: "  name ..... value" lines sorted case-insensitively, between header/footer.
void print_megatron_table(std::ostream& os, const Namespace& ns, const std::string& title = "arguments");
// One JSON object, dest -> value, keys sorted; with `with_provenance`, each value becomes
// {"value": v, "source": "..."}.
std::string namespace_json(const Namespace& ns, bool with_provenance = false);
// The schema as a JSON list, one object per argument.
std::string schema_json(const Schema& schema);
// argparse-style --help text, grouped as Megatron's parser groups them.
void print_help(std::ostream& os, const Schema& schema, const std::string& prog);
// Shell completion scripts: config/completion.h.

// ---- messages ----------------------------------------------------------------------------------------------
// The one place megatron-run formats its messages for people: every usage error, diagnostic and log record goes
// through printable() (util/text.h), so a NUL, an escape sequence or bytes that are not UTF-8 in a value, a file
// name or a config file print as \x00, \x1b, \xff (and C1/bidi controls as \u0085, \u202e), never raw.

// The headings ("error[id]: text") come from util/rule_id.h, the one place they are formatted.
// "megatron-run: error: MESSAGE\n" (escaped); a MESSAGE "[id] text" prints as "megatron-run: error[id]: text".
void print_error(std::ostream& os, std::string_view message);
// "megatron-run: warning: MESSAGE\n" (escaped); a MESSAGE "[id] text" prints as "megatron-run: warning[id]: text".
void print_warning(std::ostream& os, std::string_view message);
// "megatron-run: internal error: MESSAGE\n" (escaped): a bug of ours, exit 3.
void print_internal_error(std::ostream& os, std::string_view message);
// "megatron-run: error[RULE]: MESSAGE\n" for an error diagnostic, "...: warning[RULE]: ..." for a warning, with the
// config file's line first when the diagnostic has one ("megatron-run: job.yaml:25: error[RULE]: ..."); the
// sanity stage's carry their stage: "error[sanity.num-layers-positive]" reads as megatron-run's own verdict.
void print_diagnostic(std::ostream& os, const Diagnostic& d);
// The text of a diagnostic for a log record or a `check` line, "[RULE] MESSAGE" (escaped when printed).
std::string diagnostic_text(const Diagnostic& d);
// A usage error (exit 2) as a diagnostic: its rule id ("usage" for the generic one), its message without the
// "FILE:12: " it starts with (that is `where`), its flags and its stage (rule.h's usage_stage). `check`'s lines and
// every JSON failure document take a usage error from here.
Diagnostic usage_diagnostic(const UsageError& e);
// A usage error on stderr, the one way every command and path (dry run, launch, check, params, topology, schedule,
// the run) prints it: one with a rule id reads as any other refusal with an id, the place first when it came from
// a file ("megatron-run: c.yaml:3: error[input.yaml-syntax]: TEXT", "megatron-run: error[input.unreadable]:
// TEXT"); the generic one, and the parse stage's (argparse's own refusals: parse.unknown-argument,
// parse.invalid-value, ...), as argparse words its own ("megatron-run: error: MESSAGE", the place left in MESSAGE).
void print_usage_error(std::ostream& os, const UsageError& e);

// ---- JSON diagnostics ----------------------------------------------------------------------------------------
// {"rule": ..., "level": "error"|"warning", "stage": "validate_args"|"sanity"|"parse", "message": ...,
//  "flags": [...], "where": "path:line[:col]"|null} (null: no place known; the key is always there).
std::string diagnostic_json(const Diagnostic& d);
// What `--format json` prints on stdout when there is no result to print (a failed rule, a usage error), so that
// stdout is one JSON document whatever happens: {"ok": false, "exit": N, "diagnostics": [...]}.
std::string failure_json(int exit, const std::vector<Diagnostic>& diagnostics);

}  // namespace mr
