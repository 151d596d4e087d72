// Helpers for the init-stage tests (init_*_test.cpp): a table of cases, each a rule of the init stage that fires
// on `bad` next to a neighbour `good` that passes every stage.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "support.h"

namespace mrtest {

struct InitCase {
  const char* rule;
  std::vector<std::string> bad;   // appended to base_args(): the rule fires
  std::vector<std::string> good;  // the neighbour: passes the whole chain, init stage included
  std::map<std::string, std::string> env = {};  // WORLD_SIZE (1 unless given) and other variables
  const char* fragment = "";      // in the message
};

inline std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += w + " ";
  return s;
}

// Runs each case: `bad` fails its rule in the init stage, after Megatron's own chain and the sanity stage passed;
// `good` passes everything. Returns the rules the table exercises.
inline std::set<std::string> check_init_cases(const std::vector<InitCase>& cases) {
  std::set<std::string> seen;
  for (const InitCase& c : cases) {
    seen.insert(c.rule);
    std::map<std::string, std::string> env = {{"WORLD_SIZE", "1"}};
    for (const auto& [k, v] : c.env) env[k] = v;
    INFO(c.rule << " with " << joined(c.bad));
    Run bad = run(with(c.bad), env);
    INFO("got " << bad.rule << ": " << bad.message);
    CHECK(bad.exit == 1);
    CHECK(bad.rule == c.rule);
    CHECK(bad.message.rfind("Megatron would fail at initialisation (", 0) == 0);
    CHECK(bad.message.find(c.fragment) != std::string::npos);
    // Megatron's validate_args verdict is acceptance; the init stage alone refuses.
    CHECK(bad.out.passed(mr::kStageValidateArgs));
    CHECK(bad.out.passed(mr::kStageSanity));
    CHECK_FALSE(bad.out.passed(mr::kStageInit));
    for (const auto& d : bad.out.diagnostics)
      if (d.level == mr::Diagnostic::Level::Error) CHECK(d.stage == mr::kStageInit);

    INFO("neighbour " << joined(c.good));
    Run good = run(with(c.good), env);
    INFO("neighbour got " << good.rule << ": " << good.message);
    CHECK(good.exit == 0);
    CHECK(good.out.passed(mr::kStageInit));
  }
  return seen;
}

// The init rules declared in `file` (a path suffix such as "validate/init_moe.cpp").
inline std::set<std::string> init_rules_of(const std::string& file) {
  std::set<std::string> ids;
  for (const mr::Rule* r : mr::all_rules()) {
    const std::string f = r->file;
    if (std::string(r->stage) == mr::kStageInit && f.size() >= file.size() &&
        f.compare(f.size() - file.size(), file.size(), file) == 0)
      ids.insert(r->id);
  }
  return ids;
}

// A file's table: every case passes check_init_cases, and every init rule declared in `file` has a case.
inline void check_init_table(const std::vector<InitCase>& cases, const std::string& file) {
  const std::set<std::string> seen = check_init_cases(cases);
  for (const std::string& id : init_rules_of(file)) {
    INFO(id << " has no case");
    CHECK(seen.count(id) == 1);
  }
}

}  // namespace mrtest
