// Megatron's experimental `--yaml-cfg FILE` (megatron/training/yaml_arguments.py): the whole argument namespace
// is replaced by a YAML file's content, as nested namespaces (`language_model:`, `model_parallel:` sections), and
// validated by validate_yaml() instead of validate_args(). See docs/yaml-cfg.md.
//
// parse_invocation() calls apply_yaml_cfg() once argparse's namespace exists and --yaml-cfg is set (Megatron's
// parse_args, seed arguments.py 148-187); validate() then runs the validate_yaml chain
// (config/validate/yaml_chain.h) instead of validate_args'.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_file.h"
#include "config/resolve.h"
#include "config/validate/context.h"

namespace mr {

// What the --yaml-cfg path carries from parsing to validation (Parsed::yaml_cfg).
struct YamlCfg {
  std::string path;                          // as given to --yaml-cfg
  std::map<std::string, std::string> where;  // "micro_batch_size" / "model_parallel.fp16" -> "file.yaml:12"
  // Rule failures of parse_args() itself (the CLI-combination ValueErrors, an attribute the MSC handling reads
  // and the file lacks): validate() reports them and runs no chain.
  std::vector<Diagnostic> errors;
};

// True when `ns` (argparse's namespace) asks for the --yaml-cfg path.
bool yaml_cfg_requested(const Namespace& ns);

// Megatron's parse_args() from `--yaml-cfg` on: the CLI-combination rules (on p.ns as parsed), load_yaml
// (p.ns becomes the file's content), rank/world_size from the environment, the MSC handling. Sets p.yaml_cfg.
// Unreadable file, YAML syntax, unset ${VAR}: UsageError naming file:line (exit 2).
void apply_yaml_cfg(Parsed& p, const ConfigOptions& opts);

// load_yaml's conversion, on its own: the file's top-level mapping, nested mappings as objects, scalars typed
// as PyYAML's safe_load types them (YAML 1.1), ${VAR} expanded as in --config files. Fills `where` with the
// file:line of every key ("section.key" for nested ones; a repeated key cites the line whose value is kept).
// UsageError for what safe_load or json.dumps rejects, and for what config/yaml_doc.h refuses (limits, recursive
// aliases, a second document, ...). `warnings` receives what safe_load accepts but is likely a mistake: a key
// repeated in a mapping (both lines named), a quoted value that runs over lines looking like keys.
Object load_yaml_cfg_file(const std::string& path, const ConfigOptions& opts,
                          std::map<std::string, std::string>* where = nullptr,
                          std::vector<std::string>* warnings = nullptr);

// A plain YAML scalar typed with YAML 1.1's implicit resolvers as PyYAML's SafeLoader does: null, bool, int
// (decimal, 0x, 0b, leading-0 octal, sexagesimal 1:30), float (needs a '.', signed exponent), else the string.
// Throws UsageError for timestamps (safe_load makes a date, which json.dumps cannot serialise).
Value yaml11_plain_scalar(const std::string& text, const std::string& where = {});

// Python's repr() of a value of the YAML namespace: mappings are SimpleNamespace objects there, so they render
// as `namespace(a=1, b='x')`; derived torch dtypes (`params_dtype`) render unquoted (`torch.bfloat16`).
std::string yaml_namespace_repr(const Value& v);

// Megatron's _print_args table for a --yaml-cfg run: validate_yaml prints it before it flattens the sections
// into the top level, so the flattened copies (and `num_experts`) are left out and sections print as
// namespace(...). Same layout as print_megatron_table.
void print_yaml_table(std::ostream& os, const Namespace& ns, const std::string& title = "arguments");

}  // namespace mr
