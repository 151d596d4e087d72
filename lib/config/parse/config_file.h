// `--config FILE`: YAML (or JSON) files of arguments, in two layouts.
//
// Plain layout: a mapping of arguments to values, keyed by flag (`--num-layers: 12`) or dest
// (`num_layers: 12`); `true`/`false` for switches, sequences for nargs, null for None.
// Functional-test layout (Megatron CI's model_config.yaml): `MODEL_ARGS` becomes a command line with the CI
// launcher's rules (true -> bare switch; "[a b]" -> several words; anything else -> one word) and `ENV_VARS`
// becomes the environment validation sees.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/parse/argparse.h"

namespace mr {

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env_lookup();

struct ConfigOptions {
  EnvLookup env = process_env_lookup();
  bool allow_unset_env = false;  // leave ${VAR} literal instead of failing
};

struct ConfigResult {
  bool functional_test_layout = false;
  std::map<std::string, std::string> env_vars;   // ENV_VARS of a functional-test file
  std::map<std::string, std::string> env_where;  // "file.yaml:12" of each ENV_VARS entry
  ParseReport report;
  std::vector<Token> argv;  // the command line a functional-test file stands for
};

// Loads one config file and applies it on top of `ns`. Errors (unreadable or non-regular file, past a limit of
// config/limits.h, YAML syntax, recursive alias, second document, unknown key, key repeated in the plain layout,
// unsupported tag, bad value, unset ${VAR}) are UsageErrors naming file:line (config/parse/yaml_doc.h lists the
// input.* ids). Warnings (a key repeated in the functional-test layout, a quoted value running over lines that
// look like keys) go to the result's report.
// The refusals of a --config file that stat tells (read_file.h's check_input_file: missing, not a regular file,
// too large), without reading it: `check` skips a file that fails here before building its namespace.
void check_config_file(const std::string& path);

ConfigResult apply_config_file(const Schema& schema, const std::string& path, Namespace& ns,
                               const ConfigOptions& opts = {});

// Expands ${VAR} in `text` (a bare $VAR is left as written); `where` names the place for the error message.
std::string expand_env(const std::string& text, const ConfigOptions& opts, const std::string& where);

}  // namespace mr
