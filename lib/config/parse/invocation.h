// From an invocation (config files + command line + target environment) to the parsed namespace:
// Megatron's parse_args(), before validate_args(). The validation that follows is config/validate/resolve.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/diagnostic.h"
#include "config/parse/config_file.h"
#include "config/namespace.h"
#include "config/parse/argparse.h"
#include "config/parse/command_line.h"
#include "config/target_env.h"

namespace mr {

struct YamlCfg;  // config/parse/yaml_cfg.h
struct Parsed;

// What the namespace of an invocation with program words (Invocation::program_cli) was merged from, kept from
// that one parse for the launcher: its warnings where the two meet, and the words it appends after the program's.
struct ProgramWords {
  Namespace own;           // the program's words alone, over the defaults
  Namespace given;         // the config files and `cli` alone, as parse_args() leaves them
  MegatronArgv appended;   // megatron_argv(given): what megatron-run appends (with append_to_program)
  std::set<std::string, std::less<>> carried;  // the dests those appended words set (none without append_to_program)
};

struct Invocation {
  std::vector<std::string> config_files;  // applied in order, before the command line
  std::vector<Token> cli;                  // Megatron flags from the command line
  // The program's own arguments (the words after it, torchrun's way: launch/program.h). When given, the namespace
  // is the one the program's argparse builds: these words read with parse_known_args, then the words megatron-run
  // appends (the config files' and `cli`'s, as config/parse/command_line.h's megatron_argv writes them), which win;
  // a value they carry keeps its config file's or argv's provenance. The words that are no Megatron flag (the
  // program's own options, its extra_args_provider's) go to Parsed::program_own. With append_to_program false
  // (--no-append-args): the program's words alone when they hold a Megatron flag, else the given arguments.
  std::vector<Token> program_cli;
  bool append_to_program = true;
  // A program is named, whose words may be none: the parse keeps Parsed::program all the same (what it appends).
  bool program_named = false;
  ConfigOptions config;
  TargetEnv env = TargetEnv::from_process();
  // A launch's own variables (RANK, WORLD_SIZE, MASTER_ADDR, ...: the launcher sets them for each rank): a config
  // file's ENV_VARS entry for one of these is not applied (Parsed::env_vars_not_applied), so validation reads the
  // value the ranks get. Unset (a dry run, check): every entry applies.
  std::function<bool(const std::string&)> launch_sets;
  std::optional<long long> world_size;     // overrides WORLD_SIZE (check --world-size)
  // What gave world_size, in words, for --explain and --provenance ("--nnodes 1 x --nproc-per-node 2"); empty:
  // "command line --world-size".
  std::string world_size_from;
  // Run by resolve() after parsing and before validation, where Megatron's parse_and_validate_args applies
  // --use-checkpoint-args (the launcher of megatron-run's own training run sets it): it may change the namespace
  // and add diagnostics; an error among them ends the resolution before validation. Not run with --yaml-cfg.
  std::function<void(Parsed&, std::vector<Diagnostic>&)> after_parse;
};

struct Parsed {
  Namespace ns;
  TargetEnv env;                       // after ENV_VARS of functional-test files
  // The ENV_VARS of the config files (a later file's value wins), as validation read them (their file:line in
  // env.var_where): what a launch exports to every rank (docs/config-files.md).
  std::map<std::string, std::string> env_vars;
  std::map<std::string, std::string> env_vars_not_applied;  // name -> file:line, per Invocation::launch_sets
  std::vector<std::string> warnings;
  std::vector<Token> argv;             // the Megatron command line this stands for (files, then CLI)
  std::vector<Token> program_own;      // the words of Invocation::program_cli that are no Megatron flag
  std::optional<ProgramWords> program;  // set when a program is named (Invocation::program_named or program_cli)
  std::shared_ptr<const YamlCfg> yaml_cfg;  // set when --yaml-cfg replaced the namespace (config/parse/yaml_cfg.h)
};

// The provenance of a variable parse_args() reads from the environment (RANK, WORLD_SIZE): Env, described as what
// gave it (TargetEnv::source_of).
Provenance env_provenance(const TargetEnv& env, const std::string& name);

// Throws UsageError (exit 2) for anything argparse would reject.
//
// argparse over the config files and the command line, the defaults Megatron reads from the environment and
// what parse_args() adds after argparse. With --yaml-cfg it stops at argparse's namespace
// (yaml_cfg_requested(ns)): Megatron checks that namespace before it loads the file (resolve(),
// config/validate/resolve.h), then apply_yaml_cfg() loads it.
Parsed parse_arguments(const Schema& schema, const Invocation& inv);

// --yaml-cfg: the YAML file replaces p.ns (config/parse/yaml_cfg.h load_yaml_cfg); sets p.yaml_cfg and returns it.
std::shared_ptr<YamlCfg> apply_yaml_cfg(Parsed& p, const ConfigOptions& opts);

// Megatron's parse_args() without its rules: parse_arguments, then apply_yaml_cfg when --yaml-cfg is set (for
// --parse-only and --format argv; resolve() also runs parse_args' --yaml-cfg rules).
Parsed parse_invocation(const Schema& schema, const Invocation& inv);

}  // namespace mr
