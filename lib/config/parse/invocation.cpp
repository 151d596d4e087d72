#include "config/parse/invocation.h"

#include "config/parse/command_line.h"

#include "config/converters.h"
#include "config/parse/yaml_cfg.h"

namespace mr {

namespace {

// Where an appended word's value came from, until it gets the given argument's own provenance back.
constexpr const char* kAppendedWord = "appended to the program's arguments";

// What parse_args() derives from the flags after argparse (not from the environment).
void derive_after_argparse(Namespace& ns) {
  ns.derive("_is_global_batch_size_explicitly_specified", Value(!ns["global_batch_size"].is_none()), "parse_args");
  // --disable-msc's warning comes from its schema entry (.deprecated), where the flag is parsed.
  if (ns["disable_msc_deprecated"].truthy()) ns.derive("enable_msc", Value(false), "parse_args (--disable-msc)");
}

// The given arguments (`p`: the config files and the command line) for a named program: as parse_args() leaves
// them, and the words megatron-run appends after the program's (megatron_argv writes them).
ProgramWords& keep_given(const Schema& schema, Parsed& p) {
  ProgramWords& words = p.program.emplace();
  words.own = default_namespace(schema);
  words.given = p.ns;
  if (!yaml_cfg_requested(words.given)) {
    derive_after_argparse(words.given);
  }
  words.appended = megatron_argv(schema, words.given);
  return words;
}

// The namespace the program's argparse builds (Invocation::program_cli): its own words, then the words megatron-run
// appends (keep_given's: a value equal to the default is not written, so a config file's `fp16: false` does not
// undo the program's --fp16). A value the appended words carry keeps the provenance it has among the given
// arguments (a config file's line). With nothing appended (append_to_program false), the program's words alone,
// when they hold a Megatron flag; else the given arguments stay (a program that reads its config its own way).
void apply_program_words(const Schema& schema, const Invocation& inv, Parsed& p) {
  ProgramWords& words = keep_given(schema, p);
  Namespace ns = default_namespace(schema);
  std::vector<Token> own;
  ParseReport r = parse_tokens(schema, inv.program_cli, ns, &own);
  p.program_own = own;
  words.own = ns;
  if (!inv.append_to_program) {
    if (own.size() == inv.program_cli.size()) return;  // no Megatron flag among them
  } else {
    std::vector<Token> appended;
    for (const std::string& w : words.appended.words)
      appended.push_back(Token{w, Provenance{Provenance::Kind::Cli, kAppendedWord}});
    parse_tokens(schema, appended, ns);
    for (const Arg& a : schema.args())
      if (ns.provenance(a.dest()).where == kAppendedWord) {
        words.carried.insert(a.dest());
        ns.set(a.dest(), ns[a.dest()], p.ns.provenance(a.dest()));
      }
  }
  p.ns = std::move(ns);
  p.warnings.insert(p.warnings.end(), r.warnings.begin(), r.warnings.end());
}

}  // namespace

Provenance env_provenance(const TargetEnv& env, const std::string& name) {
  Provenance p{Provenance::Kind::Env, name};
  p.source = env.source_of(name);
  return p;
}

Parsed parse_arguments(const Schema& schema, const Invocation& inv) {
  Parsed p;
  p.ns = default_namespace(schema);
  p.env = inv.env;
  for (const std::string& file : inv.config_files) {
    ConfigResult r = apply_config_file(schema, file, p.ns, inv.config);
    for (const auto& [k, v] : r.env_vars) {
      const std::string& where = r.env_where.at(k);
      if (inv.launch_sets && inv.launch_sets(k)) {
        p.env_vars_not_applied[k] = where;
        continue;
      }
      p.env.vars[k] = v;
      p.env.var_where[k] = where;
      p.env_vars[k] = v;
      p.env_vars_not_applied.erase(k);
    }
    p.warnings.insert(p.warnings.end(), r.report.warnings.begin(), r.report.warnings.end());
    p.argv.insert(p.argv.end(), r.argv.begin(), r.argv.end());
  }
  ParseReport r = parse_tokens(schema, inv.cli, p.ns);
  p.warnings.insert(p.warnings.end(), r.warnings.begin(), r.warnings.end());
  p.argv.insert(p.argv.end(), inv.cli.begin(), inv.cli.end());
  if (!inv.program_cli.empty()) apply_program_words(schema, inv, p);
  else if (inv.program_named) keep_given(schema, p);
  check_mutually_exclusive(schema, p.ns, inv.config_files);  // across config files and the command line
  if (inv.world_size) {
    p.env.vars["WORLD_SIZE"] = std::to_string(*inv.world_size);
    p.env.var_where.erase("WORLD_SIZE");
    p.env.var_source["WORLD_SIZE"] = inv.world_size_from.empty() ? "command line --world-size" : inv.world_size_from;
  }

  Namespace& ns = p.ns;
  // Defaults Megatron reads from the environment when it builds the parser (e.g. --inprocess-active-world-size
  // defaults to WORLD_SIZE).
  for (const Arg& a : schema.args()) {
    if (!*a.spec->env_default || ns.provenance(a.dest()).kind != Provenance::Kind::Default) continue;
    if (auto v = p.env.var(a.spec->env_default)) {
      try {
        Provenance from{Provenance::Kind::Env, a.spec->env_default};
        if (p.env.var_source.count(a.spec->env_default)) from.source = p.env.source_of(a.spec->env_default);
        ns.set(a.dest(), convert(a.spec->type, *v), from);
      } catch (const ConvError& e) {
        auto w = p.env.var_where.find(a.spec->env_default);
        std::string at = w == p.env.var_where.end() ? std::string() : w->second;
        // input.env-not-integer, as for RANK (TargetEnv::int_var): placed at the ENV_VARS line that set it, else
        // named by the variable (not blamed on a config file).
        throw UsageError((at.empty() ? "" : at + ": ") + "environment variable " + std::string(a.spec->env_default) +
                             " (default of " + a.flags.front() + "): " + e.what(),
                         {a.flags.front()}, at.empty() ? std::string(a.spec->env_default) : at,
                         "input.env-not-integer");
      }
    }
  }

  // Megatron's experimental --yaml-cfg: the YAML file will replace the namespace (apply_yaml_cfg).
  if (yaml_cfg_requested(ns)) return p;

  // What parse_args() adds after argparse.
  ns.set("rank", Value(p.env.int_var("RANK", 0)), env_provenance(p.env, "RANK"));
  ns.set("world_size", Value(p.env.int_var("WORLD_SIZE", 1)), env_provenance(p.env, "WORLD_SIZE"));
  derive_after_argparse(ns);
  return p;
}

std::shared_ptr<YamlCfg> apply_yaml_cfg(Parsed& p, const ConfigOptions& opts) {
  auto cfg = std::make_shared<YamlCfg>();
  p.ns = load_yaml_cfg(p.ns, p.env, opts, *cfg, p.warnings);
  p.yaml_cfg = cfg;
  return cfg;
}

Parsed parse_invocation(const Schema& schema, const Invocation& inv) {
  Parsed p = parse_arguments(schema, inv);
  if (yaml_cfg_requested(p.ns)) apply_yaml_cfg(p, inv.config);
  return p;
}

}  // namespace mr
