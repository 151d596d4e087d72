// Helpers for validation tests: run the parse + validate chain on a list of Megatron words.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "config/validate/resolve.h"
#include "config/validate/sections.h"

namespace mrtest {

// A small config that passes the whole chain with WORLD_SIZE=1 (GPT, 2 layers, mock data).
inline std::vector<std::string> base_args() {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
          "--max-position-embeddings", "128", "--micro-batch-size", "2", "--global-batch-size", "8",
          "--train-iters", "10", "--lr", "0.0001", "--mock-data", "--tokenizer-type", "NullTokenizer",
          "--vocab-size", "1024"};
}

struct Run {
  mr::Outcome out;
  int exit = 0;            // 0 ok, 1 rule failed, 2 usage error
  std::string rule;        // id of the failing rule ("" when ok; "usage" for exit 2)
  std::string message;     // its message
  const mr::Value& operator[](const std::string& dest) const { return out.parsed.ns.get(dest); }
  bool has(const std::string& dest) const { return out.parsed.ns.has(dest); }
  bool warned(const std::string& rule_id) const {
    for (const auto& d : out.diagnostics)
      if (d.rule == rule_id && d.level == mr::Diagnostic::Level::Warning) return true;
    return false;
  }
};

// Fills the summary fields (exit, rule, message) of a run from its diagnostics.
inline void summarize(Run& r) {
  r.exit = r.out.exit_code();
  for (const auto& d : r.out.diagnostics)
    if (d.level == mr::Diagnostic::Level::Error) {
      r.rule = d.rule;
      r.message = d.message;
    }
}

inline mr::Invocation invocation(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                                 const mr::TargetEnv* target) {
  mr::Invocation inv;
  inv.env = target ? *target : mr::TargetEnv{};
  for (const auto& [k, v] : env) inv.env.vars[k] = v;
  inv.cli = mr::argv_tokens(args);
  return inv;
}

// Parses `args` (Megatron words) and validates. `env` is the job's environment (WORLD_SIZE, RANK, ...);
// the target hardware/versions are the documented defaults unless `target` says otherwise.
inline Run run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
               const mr::TargetEnv* target = nullptr) {
  Run r;
  try {
    r.out = mr::resolve(mr::Schema::megatron(), invocation(args, env, target));
    summarize(r);
  } catch (const mr::UsageError& e) {
    r.exit = 2;
    r.rule = "usage";
    r.message = e.what();
  }
  return r;
}

using Tweak = std::function<void(mr::Namespace&)>;

// Parses `args`, lets `tweak` edit the namespace (values no command line can produce), then runs `body` on it;
// a failed rule ends it as in the full chain.
inline Run run_body(const std::vector<std::string>& args, const std::function<void(mr::Context&)>& body,
                    const std::map<std::string, std::string>& env = {}, const mr::TargetEnv* target = nullptr,
                    const Tweak& tweak = {}) {
  Run r;
  try {
    r.out.parsed = mr::parse_invocation(mr::Schema::megatron(), invocation(args, env, target));
    if (tweak) tweak(r.out.parsed.ns);
    mr::Context ctx(r.out.parsed.ns, r.out.parsed.env, r.out.diagnostics);
    try {
      body(ctx);
    } catch (const mr::RuleFailure& f) {
      r.out.diagnostics.push_back(f.diag);
    }
    summarize(r);
  } catch (const mr::UsageError& e) {
    r.exit = 2;
    r.rule = "usage";
    r.message = e.what();
  }
  return r;
}

// The sections of the chain from `first` through `last` (by name, in the chain's order), for tests that must
// not depend on the sections after theirs (or, starting later, on those before).
inline Run run_between(const std::string& first, const std::string& last, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}, const mr::TargetEnv* target = nullptr,
                       const Tweak& tweak = {}) {
  const auto& all = mr::validation_sections();
  auto at = [&](const std::string& name) {
    for (size_t i = 0; i < all.size(); ++i)
      if (name == all[i].name) return i;
    FAIL("no section named " << name);
    return all.size();
  };
  const size_t from = at(first), to = at(last);
  return run_body(
      args,
      [&](mr::Context& ctx) {
        for (size_t i = from; i <= to; ++i) all[i].run(ctx);
      },
      env, target, tweak);
}

// The chain from its first section through `last`.
inline Run run_through(const std::string& last, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}, const mr::TargetEnv* target = nullptr,
                       const Tweak& tweak = {}) {
  return run_between(mr::validation_sections().front().name, last, args, env, target, tweak);
}

// base_args() with extra words appended (later words win, as on a command line).
inline std::vector<std::string> with(std::vector<std::string> extra) {
  auto a = base_args();
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace mrtest
