// The validation chain: Megatron's validate_args() sections, in the seed's order.
#include "config/validate/resolve.h"

#include <utility>
#include "config/validate/sections.h"
#include "config/validate/yaml_arguments.h"

namespace mr {

namespace {

// validate(), with the config files in the order they were applied when known (resolve() knows them): a rule that
// flags of several files break is placed at the later file's line (Context::set_config_order).
void validate_in_order(Parsed& parsed, std::vector<Diagnostic>& diagnostics, std::vector<std::string>* passed,
                       const std::vector<std::string>* config_files) {
  if (parsed.yaml_cfg) {
    // --yaml-cfg: validate_yaml's chain (Megatron's own stage; the sanity stage reads validate_args' flat
    // namespace and does not run on the YAML sections).
    // Then the model-config step (core_transformer_config_from_yaml), whose rules are of the init stage.
    const size_t before = diagnostics.size();
    validate_yaml_cfg(parsed, diagnostics);
    bool args_failed = false, init_failed = false;
    for (size_t i = before; i < diagnostics.size(); ++i)
      if (diagnostics[i].level == Diagnostic::Level::Error)
        (diagnostics[i].stage == kStageInit ? init_failed : args_failed) = true;
    if (passed && !args_failed) passed->push_back(kStageValidateArgs);
    if (passed && !args_failed && !init_failed) passed->push_back(kStageInit);
    return;
  }
  Context ctx(parsed.ns, parsed.env, diagnostics);
  if (config_files) ctx.set_config_order(*config_files);
  for (const Stage& stage : validation_stages()) {
    try {
      for (const Section& s : stage.sections) s.run(ctx);
    } catch (const RuleFailure& f) {
      diagnostics.push_back(f.diag);
      return;  // a failed rule ends validation, as Megatron's assert does
    }
    if (passed) passed->push_back(stage.name);
  }
}

}  // namespace

void validate(Parsed& parsed, std::vector<Diagnostic>& diagnostics, std::vector<std::string>* passed) {
  validate_in_order(parsed, diagnostics, passed, nullptr);
}

Outcome resolve(const Schema& schema, const Invocation& inv) { return resolve(inv, parse_arguments(schema, inv)); }

Outcome resolve(const Invocation& inv, Parsed parsed) {
  Outcome out;
  out.parsed = std::move(parsed);
  const bool yaml = yaml_cfg_requested(out.parsed.ns);
  if (inv.after_parse && !yaml) {
    inv.after_parse(out.parsed, out.diagnostics);
    if (!out.ok()) return out;
  }
  if (yaml) parse_yaml_cfg(out.parsed, inv.config);
  validate_in_order(out.parsed, out.diagnostics, &out.stages_passed, &inv.config_files);
  return out;
}

bool Outcome::passed(std::string_view stage) const {
  for (const std::string& s : stages_passed)
    if (s == stage) return true;
  return false;
}

}  // namespace mr
