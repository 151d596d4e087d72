// From an invocation (config files + command line + target environment) to the parsed namespace:
// Megatron's parse_args(), before validate_args().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config_file.h"
#include "config/namespace.h"
#include "config/parse.h"
#include "config/target_env.h"

namespace mr {

struct YamlCfg;  // config/yaml_cfg.h

struct Invocation {
  std::vector<std::string> config_files;  // applied in order, before the command line
  std::vector<Token> cli;                  // Megatron flags from the command line
  ConfigOptions config;
  TargetEnv env = TargetEnv::from_process();
  std::optional<long long> world_size;     // overrides WORLD_SIZE (check --world-size)
};

struct Parsed {
  Namespace ns;
  TargetEnv env;                       // after ENV_VARS of functional-test files
  std::vector<std::string> warnings;
  std::vector<Token> argv;             // the Megatron command line this stands for (files, then CLI)
  std::shared_ptr<const YamlCfg> yaml_cfg;  // set when --yaml-cfg replaced the namespace (config/yaml_cfg.h)
};

// Throws UsageError (exit 2) for anything argparse would reject.
Parsed parse_invocation(const Schema& schema, const Invocation& inv);

}  // namespace mr
