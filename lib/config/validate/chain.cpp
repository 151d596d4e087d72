// The validation chain: Megatron's validate_args() sections, in the seed's order.
#include "config/validate.h"
#include "config/validate/sections.h"
#include "config/validate/yaml_chain.h"

namespace mr {

void validate(Parsed& parsed, std::vector<Diagnostic>& diagnostics) {
  if (parsed.yaml_cfg) return validate_yaml_cfg(parsed, diagnostics);  // --yaml-cfg: validate_yaml's chain
  Context ctx(parsed.ns, parsed.env, diagnostics);
  try {
    for (const Section& s : validation_sections()) s.run(ctx);
  } catch (const RuleFailure& f) {
    diagnostics.push_back(f.diag);
  }
}

Outcome resolve(const Schema& schema, const Invocation& inv) {
  Outcome out;
  out.parsed = parse_invocation(schema, inv);
  validate(out.parsed, out.diagnostics);
  return out;
}

}  // namespace mr
