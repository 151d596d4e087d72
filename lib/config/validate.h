// Megatron's validate_args() chain (plus OptimizerConfig checks) over a parsed namespace.
#pragma once

#include <vector>

#include "config/resolve.h"
#include "config/validate/context.h"

namespace mr {

struct Outcome {
  Parsed parsed;
  std::vector<Diagnostic> diagnostics;  // warnings, and at most one error from the chain
  bool usage_error = false;
  bool ok() const {
    for (const auto& d : diagnostics)
      if (d.level == Diagnostic::Level::Error) return false;
    return true;
  }
  int exit_code() const { return usage_error ? 2 : (ok() ? 0 : 1); }
};

// Runs the validation chain on `parsed`, in the seed's order; a failed rule ends it.
void validate(Parsed& parsed, std::vector<Diagnostic>& diagnostics);

// parse_invocation + validate. UsageError propagates (exit 2).
Outcome resolve(const Schema& schema, const Invocation& inv);

}  // namespace mr
