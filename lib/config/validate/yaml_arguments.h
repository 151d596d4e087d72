// The validate_yaml() chain (megatron/training/yaml_arguments.py) for `--yaml-cfg` runs: its own ordered
// sections and rules (ids `yaml.*`), run by validate() instead of validate_args' chain. See docs/yaml-cfg.md.
//
// The namespace it works on is the YAML file's content, read through YamlArgs (yaml_args.h: Python's attribute
// semantics, typed reads).
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/parse/invocation.h"
#include "config/validate/context.h"
#include "config/parse/yaml_cfg.h"
#include "config/validate/yaml_args.h"

namespace mr {

// Megatron's parse_args() from --yaml-cfg on, with its rules, in its order: the CLI combinations it refuses (on
// argparse's namespace in p.ns), then apply_yaml_cfg (config/parse/invocation.h), then the attributes its MSC
// handling reads. A failed rule is recorded in p.yaml_cfg->errors (the file is not read when a combination
// fails). UsageError for the file (exit 2).
void parse_yaml_cfg(Parsed& p, const ConfigOptions& opts);

// Runs the validate_yaml chain on a --yaml-cfg namespace (after reporting parsed.yaml_cfg->errors, if any:
// then nothing else runs), then the model-config step. A failed rule ends the chain.
void validate_yaml_cfg(Parsed& parsed, std::vector<Diagnostic>& diagnostics);

struct YamlSection {
  const char* name;
  void (*run)(YamlArgs&);
};
// In the order validate_yaml() (and parse_and_validate_args around it) runs them.
const std::vector<YamlSection>& yaml_sections();
// What core_transformer_config_from_yaml() refuses when the training script builds the model from the validated
// namespace (yaml_model_config.cpp; rules yaml.model-config.*, stage "init"). validate_yaml_cfg runs them after
// yaml_sections() passed.
const std::vector<YamlSection>& yaml_model_config_sections();

}  // namespace mr
