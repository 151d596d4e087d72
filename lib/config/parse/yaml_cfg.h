// Megatron's experimental `--yaml-cfg FILE` (megatron/training/yaml_arguments.py): the whole argument namespace
// is replaced by a YAML file's content, as nested namespaces (`language_model:`, `model_parallel:` sections), and
// validated by validate_yaml() instead of validate_args(). See docs/yaml-cfg.md.
//
// parse_invocation() (config/parse/invocation.h) calls load_yaml_cfg() once argparse's namespace exists and
// --yaml-cfg is set (Megatron's parse_args, seed arguments.py 148-187). The rules of that path (the CLI
// combinations Megatron refuses before load_yaml, the attributes parse_args then reads) and the validate_yaml
// chain are validation: config/validate/yaml_arguments.h.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostic.h"
#include "config/namespace.h"
#include "config/parse/config_file.h"
#include "config/target_env.h"

namespace mr {

// What the --yaml-cfg path carries from parsing to validation (Parsed::yaml_cfg).
struct YamlCfg {
  std::string path;                          // as given to --yaml-cfg
  std::map<std::string, std::string> where;  // "micro_batch_size" / "model_parallel.fp16" -> "file.yaml:12"
  // Rule failures of parse_args() itself (the CLI-combination ValueErrors, an attribute the MSC handling reads
  // and the file lacks), found by resolve() (config/validate/resolve.h): validate() reports them and runs no
  // chain. Parsing alone (parse_invocation) leaves this empty.
  std::vector<Diagnostic> errors;
};

// True when `ns` (argparse's namespace) asks for the --yaml-cfg path.
bool yaml_cfg_requested(const Namespace& ns);

// The --yaml-cfg argument as a path.
std::string yaml_cfg_path(const Namespace& argparse_ns);

// Megatron's parse_args() from `--yaml-cfg` on, without its rules: load_yaml (the file's content becomes the
// namespace, returned), rank/world_size from `env`, the MSC handling (disable_msc_deprecated turns enable_msc
// off). Fills cfg.path and cfg.where; appends the warnings (ignored arguments, what the file looks wrong in).
// Unreadable file, YAML syntax, unset ${VAR}: UsageError naming file:line (exit 2).
Namespace load_yaml_cfg(const Namespace& argparse_ns, const TargetEnv& env, const ConfigOptions& opts, YamlCfg& cfg,
                        std::vector<std::string>& warnings);

// load_yaml's conversion, on its own: the file's top-level mapping, nested mappings as objects, scalars typed
// as PyYAML's safe_load types them (YAML 1.1), ${VAR} expanded as in --config files. Fills `where` with the
// file:line of every key ("section.key" for nested ones; a repeated key cites the line whose value is kept).
// UsageError for what safe_load or json.dumps rejects, and for what config/parse/yaml_doc.h refuses (limits, recursive
// aliases, a second document, ...). `warnings` receives what safe_load accepts but is likely a mistake: a key
// repeated in a mapping (both lines named), a quoted value that runs over lines looking like keys.
Object load_yaml_cfg_file(const std::string& path, const ConfigOptions& opts,
                          std::map<std::string, std::string>* where = nullptr,
                          std::vector<std::string>* warnings = nullptr);

// Python's repr() of a value of the YAML namespace: mappings are SimpleNamespace objects there, so they render
// as `namespace(a=1, b='x')`; derived torch dtypes (`params_dtype`) render unquoted (`torch.bfloat16`).
std::string yaml_namespace_repr(const Value& v);

// Megatron's _print_args table for a --yaml-cfg run: validate_yaml prints it before it flattens the sections
// into the top level, so the flattened copies (and `num_experts`) are left out and sections print as
// namespace(...). Same layout as print_megatron_table.
void print_yaml_table(std::ostream& os, const Namespace& ns, const std::string& title = "arguments");

}  // namespace mr
