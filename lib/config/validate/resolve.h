// From an invocation to validated arguments: resolve() is parsing (config/parse/invocation.h) and Megatron's
// validate_args() chain (plus the OptimizerConfig checks and the sanity stage) over the parsed namespace.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/parse/invocation.h"
#include "config/validate/context.h"

namespace mr {

struct Outcome {
  Parsed parsed;
  std::vector<Diagnostic> diagnostics;  // warnings, and at most one error from the chain
  std::vector<std::string> stages_passed;  // the validation stages that ran to their end without an error
  bool usage_error = false;
  // Whether `stage` ran to its end without an error. Megatron's own verdict: passed(kStageValidateArgs) is
  // acceptance; an error diagnostic whose stage is kStageValidateArgs is rejection; neither (a sanity rule such as
  // sanity.integer-overflow stopped Megatron's chain) means Megatron's verdict is not known.
  bool passed(std::string_view stage) const;
  bool ok() const {
    for (const auto& d : diagnostics)
      if (d.level == Diagnostic::Level::Error) return false;
    return true;
  }
  int exit_code() const { return usage_error ? 2 : (ok() ? 0 : 1); }
};

// Runs the validation stages on `parsed` (validation_stages(): Megatron's chain in the seed's order, then the
// sanity stage); a failed rule ends validation. `passed` receives the names of the stages that passed.
void validate(Parsed& parsed, std::vector<Diagnostic>& diagnostics, std::vector<std::string>* passed = nullptr);

// Megatron's parse_args() with its rules (parse_arguments; for --yaml-cfg, parse_yaml_cfg in
// config/validate/yaml_arguments.h), then validate. UsageError propagates (exit 2).
Outcome resolve(const Schema& schema, const Invocation& inv);

// resolve() from its parse made already (parse_arguments(schema, inv)), for a caller that reads the parse first.
Outcome resolve(const Invocation& inv, Parsed parsed);

}  // namespace mr
