// The validate_yaml() chain (megatron/training/yaml_arguments.py) for `--yaml-cfg` runs: its own ordered
// sections and rules (ids `yaml.*`), run by validate() instead of validate_args' chain. See docs/yaml-cfg.md.
//
// The namespace it works on is the YAML file's content: top-level keys are dests, `model_parallel` and
// `language_model` are objects (SimpleNamespace in Megatron). YamlArgs gives it Python's attribute semantics:
// reading a key the file does not define is Megatron's AttributeError (rule yaml.missing-attribute), an operand
// of the wrong type its TypeError (yaml.wrong-type), `% 0` / `// 0` its ZeroDivisionError (yaml.division-by-zero).
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/parse/invocation.h"
#include "config/validate/context.h"
#include "config/parse/yaml_cfg.h"

namespace mr {

class YamlArgs {
 public:
  YamlArgs(Context& ctx, const YamlCfg& cfg) : ctx_(ctx), cfg_(cfg) {}

  Context& ctx() { return ctx_; }
  const YamlCfg& cfg() const { return cfg_; }

  // `path` is "key" (top level) or "section.key". Python's `args.key` / `args.section.key`.
  const Value& get(std::string_view path);
  bool has(std::string_view path) const;
  // getattr(args, key, fallback) (top level only, as validate_yaml uses it).
  Value get_or(std::string_view key, const Value& fallback) const;
  // `args.key = v` / `args.section.key = v`; `why` names the yaml_arguments.py step. An unchanged value keeps
  // its provenance.
  void set(std::string_view path, Value v, std::string_view why);

  // Typed reads: the value must be an int (Python int, bool included) or a number (int or float).
  int64_t integer(std::string_view path);
  double number(std::string_view path);
  bool truthy(std::string_view path) { return get(path).truthy(); }
  bool is_none(std::string_view path) { return get(path).is_none(); }

  // Python's a % b and a // b on ints (floor semantics); b == 0 fails yaml.division-by-zero naming `what`.
  int64_t mod(int64_t a, int64_t b, const std::string& what);
  int64_t floordiv(int64_t a, int64_t b, const std::string& what);

  // Rule failures and warnings naming YAML keys (`paths`); `where` is the file:line of the first one known.
  [[noreturn]] void fail(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths);
  void require(bool ok, const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths) {
    if (!ok) fail(rule, message, paths);
  }
  [[noreturn]] void wrong_type(std::string_view path, const std::string& expected);

  // Nested keys validate_yaml derived ("model_parallel.params_dtype" -> why).
  const std::map<std::string, std::string>& derived() const { return derived_; }

 private:
  const Value* find(std::string_view path) const;
  Context& ctx_;
  const YamlCfg& cfg_;
  std::map<std::string, std::string> derived_;
};

// Megatron's parse_args() from --yaml-cfg on, with its rules, in its order: the CLI combinations it refuses (on
// argparse's namespace in p.ns), then apply_yaml_cfg (config/parse/invocation.h), then the attributes its MSC
// handling reads. A failed rule is recorded in p.yaml_cfg->errors (the file is not read when a combination
// fails). UsageError for the file (exit 2).
void parse_yaml_cfg(Parsed& p, const ConfigOptions& opts);

// Runs the validate_yaml chain on a --yaml-cfg namespace (after reporting parsed.yaml_cfg->errors, if any:
// then nothing else runs). A failed rule ends the chain.
void validate_yaml_cfg(Parsed& parsed, std::vector<Diagnostic>& diagnostics);

struct YamlSection {
  const char* name;
  void (*run)(YamlArgs&);
};
// In the order validate_yaml() (and parse_and_validate_args around it) runs them.
const std::vector<YamlSection>& yaml_sections();

}  // namespace mr
