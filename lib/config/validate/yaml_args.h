// The typed reader of a `--yaml-cfg` namespace (the validate_yaml chain's view of it, yaml_arguments.h).
//
// The namespace is the YAML file's content: top-level keys are dests, `model_parallel` and `language_model` are
// objects (SimpleNamespace in Megatron). YamlArgs gives it Python's attribute semantics: reading a key the file
// does not define is Megatron's AttributeError (rule yaml.missing-attribute), an operand of the wrong type its
// TypeError (yaml.wrong-type), `% 0` / `// 0` its ZeroDivisionError (yaml.division-by-zero). Failures name the
// YAML keys and the file:line they come from.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "config/parse/yaml_cfg.h"
#include "config/validate/context.h"

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

  // Python's a % b and a // b on ints (floor semantics); b == 0 fails yaml.division-by-zero naming `what` (the divisor),
  // placed at the line of the first of `paths` the file has (none given: `what`, a key path).
  int64_t mod(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> paths = {});
  int64_t floordiv(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> paths = {});

  // Rule failures and warnings naming YAML keys (`paths`); `where` is the file:line of the first one known.
  [[noreturn]] void fail(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths);
  // A warning rule's diagnostic, placed like fail()'s: at the line of the first of `paths` the file has, else the file.
  void warn(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths);
  void require(bool ok, const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths) {
    if (!ok) fail(rule, message, paths);
  }
  [[noreturn]] void wrong_type(std::string_view path, const std::string& expected);
  // Fails yaml.missing-attribute unless `section` (model_parallel, language_model) is a section; what Megatron's
  // vars(args.<section>) raises.
  void require_section(std::string_view section);

  // Nested keys validate_yaml derived ("model_parallel.params_dtype" -> why).
  const std::map<std::string, std::string>& derived() const { return derived_; }

 private:
  const Value* find(std::string_view path) const;
  // Sets a diagnostic's flags to `paths` and its place (fail, warn).
  void place(Diagnostic& d, std::initializer_list<std::string_view> paths) const;
  Context& ctx_;
  const YamlCfg& cfg_;
  std::map<std::string, std::string> derived_;
};

}  // namespace mr
