// The rules of Megatron's parse_args() on the --yaml-cfg path (seed arguments.py 148-187): the command-line
// arguments the YAML would silently replace, which Megatron refuses before load_yaml reads the file, and the
// attributes its MSC handling reads from the YAML namespace. Loading the file is parsing
// (config/parse/yaml_cfg.h); resolve() (config/validate/resolve.cpp) runs the three steps in Megatron's order.
#include <string>
#include <vector>

#include "config/parse/yaml_cfg.h"
#include "config/schema.h"
#include "config/validate/yaml_arguments.h"

namespace mr {

namespace {

MR_RULE(kCliTritonAutotune, "yaml.cli-triton-autotune",
        "--yaml-cfg cannot be combined with Triton autotune arguments (--triton-autotune-*) that differ from their "
        "defaults; set them in the YAML file instead.");
MR_RULE(kCliWideResidual, "yaml.cli-wide-residual",
        "--yaml-cfg cannot be combined with --wide-residual: the YAML model configuration replaces the command-line "
        "model arguments.");

// Lists and tuples compare element-wise with each other (the dataclass normalises what argparse stores).
bool same_config_value(const Value& a, const Value& b) {
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same_config_value(x[i], y[i])) return false;
    return true;
  }
  return a == b;
}

// seed 149-160: the CLI arguments the YAML would silently replace and Megatron refuses instead.
void cli_combination(Context& ctx) {
  // _default_config_from_args(AutotunePolicy, args, prefix='triton_autotune') != AutotunePolicy(): the policy's
  // fields are the triton_autotune_* dests, whose argparse defaults are the dataclass defaults.
  std::vector<std::string> changed;
  for (const Arg& a : Schema::megatron().args())
    if (std::string_view(a.dest()).rfind("triton_autotune_", 0) == 0 && ctx.has(a.dest()) &&
        !same_config_value(ctx[a.dest()], a.def))
      changed.push_back(a.dest());
  if (!changed.empty()) {
    std::string list;
    for (const auto& d : changed) list += (list.empty() ? "" : ", ") + Context::flag(d);
    try {
      ctx.fail(kCliTritonAutotune,
               "Triton autotune CLI arguments cannot be combined with --yaml-cfg; set triton_autotune in the YAML "
               "configuration instead (given: " + list + ")",
               {changed.front(), "yaml_cfg"});
    } catch (RuleFailure& f) {
      f.diag.flags.clear();
      for (const auto& d : changed) f.diag.flags.push_back(Context::flag(d));
      f.diag.flags.push_back("--yaml-cfg");
      throw;
    }
  }
  // _wide_residual_config_from_args(args) is not None: --wide-residual N was given.
  ctx.require(ctx.is_none("wide_residual_num_streams"), kCliWideResidual,
              "Wide-residual CLI arguments cannot be combined with --yaml-cfg because YAML model configuration "
              "replaces argparse model arguments (given: --wide-residual " +
                  ctx["wide_residual_num_streams"].py_str() + ")",
              {"wide_residual_num_streams", "yaml_cfg"});
}

}  // namespace

void parse_yaml_cfg(Parsed& p, const ConfigOptions& opts) {
  // seed 148-160: the combinations Megatron refuses, checked on the namespace argparse produced.
  {
    std::vector<Diagnostic> none;
    Context cli(p.ns, p.env, none);
    try {
      cli_combination(cli);
    } catch (const RuleFailure& f) {
      auto cfg = std::make_shared<YamlCfg>();
      cfg->path = yaml_cfg_path(p.ns);
      cfg->errors.push_back(f.diag);
      p.yaml_cfg = cfg;
      return;
    }
  }
  // seed 163-187: load_yaml and the rest of parse_args.
  std::shared_ptr<YamlCfg> cfg = apply_yaml_cfg(p, opts);
  // seed 170-187: the MSC handling reads args.disable_msc_deprecated and args.enable_msc, which a YAML namespace
  // has only when the file defines them (else Megatron's AttributeError: yaml.missing-attribute).
  std::vector<Diagnostic> diags;
  Context ctx(p.ns, p.env, diags);
  YamlArgs y(ctx, *cfg);
  try {
    (void)y.truthy("disable_msc_deprecated");
    (void)y.truthy("enable_msc");
  } catch (const RuleFailure& f) {
    cfg->errors.push_back(f.diag);
  }
}

}  // namespace mr
