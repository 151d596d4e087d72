// Parity with Megatron's own parser over the functional-test corpus (../shared/corpus/reference): the same
// decision for every file, and for accepted files every resolved value equal (and the same set of keys).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/validate/resolve.h"
#include "corpus.h"

namespace fs = std::filesystem;

namespace {

// Known, justified differences from the reference: {file, field} -> the seed line that proves ours right.
// Empty: none found so far. Deliberate differences of verdict on inputs the corpus does not hold are recorded in
// the docs: --checkpoint-activations is Megatron's exit() (status 0, no training) but our error, exit 1
// (deprecated.checkpoint-activations, docs/schema.md).
const std::map<std::pair<std::string, std::string>, std::string> kExceptions = {};

// Files Megatron accepts that megatron-run's sanity stage refuses: {file, sanity rule id}. Empty: every file the
// reference accepts passes the sanity stage too.
const std::set<std::pair<std::string, std::string>> kSanityRejects = {};

mr::Value load_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return mr::Value::parse_json(ss.str());
}
const mr::Value* field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return &v;
  return nullptr;
}

// JSON equality as Python's json.dumps would see it: bools are not numbers, tuples are lists.
bool same(const mr::Value& a, const mr::Value& b) {
  if (a.is_bool() || b.is_bool()) return a.is_bool() && b.is_bool() && a.as_bool() == b.as_bool();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() && b.is_float() && std::isnan(a.as_float()) && std::isnan(b.as_float())) return true;
    return a.as_float() == b.as_float() && (a.is_int() == b.is_int() || a.as_float() == std::floor(a.as_float()));
  }
  if (a.is_list() && b.is_list()) {
    if (a.as_list().size() != b.as_list().size()) return false;
    for (size_t i = 0; i < a.as_list().size(); ++i)
      if (!same(a.as_list()[i], b.as_list()[i])) return false;
    return true;
  }
  if (a.is_object() && b.is_object()) {
    if (a.as_object().size() != b.as_object().size()) return false;
    for (const auto& [k, v] : a.as_object()) {
      const mr::Value* w = field(b, k);
      if (!w || !same(v, *w)) return false;
    }
    return true;
  }
  return a.kind() == b.kind() && a == b;
}

}  // namespace

TEST_CASE("corpus parity: decisions and resolved values equal Megatron's", "[corpus][parity]") {
  const std::vector<fs::path> files = mrtest::corpus_files();
  REQUIRE(files.size() == 167);
  int accepted = 0, compared_fields = 0, sanity_rejected = 0;
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    INFO(name);
    mr::Value ref = load_json(fs::path(MR_DATA_DIR) / "corpus/reference" / (f.stem().string() + ".json"));
    const mr::Value& va = *field(ref, "validate_args");
    int ref_exit = field(va, "ok")->truthy() ? (field(ref, "accepted")->truthy() ? 0 : 1) : int(field(va, "exit")->as_int());

    mr::Invocation inv = mrtest::reference_invocation(f);  // as the reference was run
    // Megatron's verdict only: the validate_args stage. megatron-run's sanity stage runs after it and may refuse
    // a file Megatron accepts (counted, and listed in kSanityRejects); a sanity rule stopping Megatron's chain
    // itself (sanity.integer-overflow) leaves Megatron's verdict unknown, which no corpus file may do.
    int exit = 0;
    std::string why, sanity;
    mr::Outcome out;
    try {
      out = mr::resolve(mr::Schema::megatron(), inv);
      for (const auto& d : out.diagnostics)
        if (d.level == mr::Diagnostic::Level::Error) {
          why = d.rule + ": " + d.message;
          if (d.stage == mr::kStageSanity) sanity = d.rule;
        }
      if (out.passed(mr::kStageValidateArgs)) {
        exit = 0;
      } else {
        INFO("a sanity rule stopped Megatron's chain: " << why);
        REQUIRE(sanity.empty());
        exit = 1;
      }
    } catch (const mr::UsageError& e) {
      exit = 2;
      why = e.what();
    }
    INFO("ours: " << why);
    INFO("reference: " << (field(va, "reason") ? field(va, "reason")->py_str() : ""));
    REQUIRE(exit == ref_exit);
    if (!sanity.empty()) {
      INFO("the sanity stage refuses a file Megatron accepts (" << why << "); list it in kSanityRejects");
      CHECK(kSanityRejects.count({name, sanity}) == 1);
      ++sanity_rejected;
    }
    if (exit != 0) continue;
    ++accepted;
    const mr::Value& resolved = *field(ref, "resolved");
    const mr::Namespace& ns = out.parsed.ns;
    for (const auto& [k, v] : resolved.as_object()) {
      if (kExceptions.count({name, k})) continue;
      INFO("field " << k);
      REQUIRE(ns.has(k));
      CHECK(same(ns.get(k), v));
      ++compared_fields;
    }
    for (const auto& e : ns.entries()) {
      INFO("field " << e.dest << " is resolved by us but absent from the reference");
      CHECK(field(resolved, e.dest) != nullptr);
    }
  }
  CHECK(accepted == 125);
  CHECK(sanity_rejected == static_cast<int>(kSanityRejects.size()));
  CHECK(compared_fields > 100000);
}
