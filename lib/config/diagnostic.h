// What goes wrong, as the layers above report it: a usage error (argparse would refuse the command line or a
// file: exit status 2), a diagnostic of a validation rule (config/rule.h; an error exits 1, a warning is
// printed), and the exception that carries a failed rule out of a check.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace mr {

void record_rule_hit(const char* id) noexcept;  // config/rule.h

// `msg` with each NUL byte written as the text \x00 (as printable() escapes it): what() is a C string, and a NUL
// echoed from a file (a YAML key "a\0b") would cut the message there, its end (the reason, a did-you-mean) lost.
std::string without_nul(std::string msg);  // config/rule.cpp

// A usage error: exit status 2. `flags` names the options involved (for JSON diagnostics).
struct UsageError : std::runtime_error {
  UsageError(std::string msg, std::vector<std::string> flags_ = {}, std::string where_ = {}, std::string id_ = {})
      : std::runtime_error(without_nul(std::move(msg))), flags(std::move(flags_)), where(std::move(where_)),
        id(std::move(id_)) {
    record_rule_hit(id.c_str());  // the input stage's rules (config/input_rules.cpp) count their hits
  }
  std::vector<std::string> flags;
  std::string where;  // "file.yaml:12" when the offending word came from a file
  // A stable id for the kind of refusal ("input.not-regular-file", "input.yaml-recursive-alias", ...; see
  // "parse.unknown-argument", ...; see docs/config-files.md); empty for a usage error of megatron-run's own command
  // line that has none ("usage": docs/config-files.md). `check` reports it as the diagnostic's rule.
  std::string id;
  const std::string& rule() const {
    static const std::string generic = "usage";  // a rule too (config/rule.cpp), so `rules usage` explains it
    return id.empty() ? generic : id;
  }
};

// A message without the "file:line: " it starts with, for the layouts that give that place on its own (check's
// lines, the JSON diagnostics' `where`); a usage error from a file names its place first in what().
inline std::string without_where(const std::string& message, const std::string& where) {
  if (where.empty() || message.size() < where.size() + 2 || message.compare(0, where.size(), where) != 0 ||
      message.compare(where.size(), 2, ": ") != 0)
    return message;
  return message.substr(where.size() + 2);
}

struct Diagnostic {
  enum class Level { Error, Warning };
  Level level = Level::Error;
  std::string rule;                // rule id, or "usage" for a usage error without one
  std::string message;
  std::vector<std::string> flags;  // the flags involved, e.g. {"--num-layers", "--pipeline-model-parallel-size"}
  std::string where;               // file:line of the first flag involved, when known
  std::string stage;               // the rule's stage: kStageValidateArgs, kStageSanity (rule.h); kStageParse for
                                   // usage errors
};

struct RuleFailure : std::exception {
  explicit RuleFailure(Diagnostic d) : diag(std::move(d)) {}
  const char* what() const noexcept override { return diag.message.c_str(); }
  Diagnostic diag;
};

}  // namespace mr
