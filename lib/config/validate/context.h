// What a validation section works with: the namespace being resolved, the target environment and the
// diagnostics collected so far. A failed check throws RuleFailure, which ends the chain (as Megatron's
// assert does); warnings are recorded and the chain goes on.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "config/diagnostic.h"
#include "config/namespace.h"
#include "config/target_env.h"
#include "config/rule.h"

namespace mr {

class Context {
 public:
  Context(Namespace& args, const TargetEnv& env, std::vector<Diagnostic>& diags)
      : args_(args), env_(env), diags_(diags) {}

  // The config files in the order they were applied (later ones override earlier ones): a rule broken by flags of
  // several files is placed at the flag of the file applied last.
  void set_config_order(std::vector<std::string> files) { config_order_ = std::move(files); }

  Namespace& args() { return args_; }
  const TargetEnv& env() const { return env_; }

  // Reading arguments (throw std::out_of_range naming the dest if it does not exist).
  const Value& operator[](std::string_view dest) const { return args_.get(dest); }
  bool has(std::string_view dest) const { return args_.has(dest); }
  bool is_none(std::string_view dest) const { return args_.get(dest).is_none(); }
  bool on(std::string_view dest) const { return args_.get(dest).truthy(); }  // Python truthiness
  int64_t i(std::string_view dest) const { return args_.get(dest).as_int(); }
  double f(std::string_view dest) const { return args_.get(dest).as_float(); }
  const std::string& s(std::string_view dest) const { return args_.get(dest).as_str(); }

  // Writing derived values; `why` names the seed section or rule.
  void set(std::string_view dest, Value v, std::string_view why = {}) { args_.derive(dest, std::move(v), why); }
  void erase(std::string_view dest) { args_.erase(dest); }
  // Sets `dest` for the deprecated flag `alias` (which the caller then erases): the value keeps the flag's name, so
  // what reads the namespace later can speak of the flag the user wrote.
  void translate(std::string_view dest, Value v, std::string_view why, std::string_view alias) {
    args_.set(dest, std::move(v), {Provenance::Kind::Derived, std::string(why), std::string(alias)});
  }

  // Fails `rule` with `message` unless `ok`; `dests` are the arguments involved (shown as flags).
  void require(bool ok, const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests = {});
  [[noreturn]] void fail(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests = {});
  void warn(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests = {});
  // fail/warn/a failed require count a hit on the rule (see rule.h). These two report a check whose failing
  // branch ran, and was counted, elsewhere (the OptimizerConfig checks, see optimizer_config_checks.cpp).
  [[noreturn]] void fail_counted(const Rule& rule, const std::string& message,
                                 std::initializer_list<std::string_view> dests = {});
  void warn_counted(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests = {});
  // The diagnostics so far (a warning's place is set after warn() by a caller that knows it: YamlArgs::warn).
  std::vector<Diagnostic>& diagnostics() { return diags_; }

  // Sizes the chain computes from the user's: Python's ints never overflow, ours are 64 bits. A result that does
  // not fit fails the sanity rule sanity.integer-overflow (megatron-run's verdict, not Megatron's), naming
  // `what` ("--micro-batch-size x the data-parallel size") and the arguments involved.
  int64_t mul(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> dests = {});
  int64_t add(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> dests = {});
  [[noreturn]] void overflow(const std::string& what, std::initializer_list<std::string_view> dests = {});

  // Target-environment gates (Megatron's is_te_min_version & co.; pre-release suffixes are ignored).
  bool te_min(const std::string& v) const { return compare_versions(env_.te_version, v) >= 0; }
  bool torch_min(const std::string& v) const { return compare_versions(env_.torch_version, v) >= 0; }
  bool flashinfer_min(const std::string& v) const { return compare_versions(env_.flashinfer_version, v) >= 0; }
  int arch_major() const { return env_.arch_major(); }  // get_device_arch_version()
  std::optional<std::string> env_var(const std::string& name) const { return env_.var(name); }

  // "--flag-name" for a dest (the first option string that writes it).
  static std::string flag(std::string_view dest);

 private:
  Diagnostic make(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests) const;
  Namespace& args_;
  const TargetEnv& env_;
  std::vector<Diagnostic>& diags_;
  std::vector<std::string> config_order_;
};

}  // namespace mr
