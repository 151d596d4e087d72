// The init stage on the functional-test corpus (../shared/corpus): at the world size the reference was produced
// for (8), no corpus file trips a rule of model construction (init.*). Megatron's CI ran these configs, so a
// rule that refused one would most likely be a check applied to a model or code path it does not belong to.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/validate/resolve.h"
#include "corpus.h"

namespace fs = std::filesystem;

namespace {

// Corpus files that an init rule refuses at world size 8, with the reason Megatron really fails: {file, rule}.
// Empty: none.
const std::map<std::string, std::string> kInitRejects = {};

}  // namespace

TEST_CASE("init stage: no corpus file trips a model-construction rule at world size 8", "[corpus][init]") {
  const std::vector<fs::path> files = mrtest::corpus_files();
  REQUIRE(files.size() == 167);
  int reached = 0;
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    INFO(name);
    mr::Invocation inv = mrtest::reference_invocation(f);  // as the reference was run
    mr::Outcome out;
    try {
      out = mr::resolve(mr::Schema::megatron(), inv);
    } catch (const mr::UsageError&) {
      continue;  // a flag the seed no longer has: refused before validation
    }
    if (!out.passed(mr::kStageSanity)) continue;
    ++reached;
    for (const auto& d : out.diagnostics)
      if (d.level == mr::Diagnostic::Level::Error && d.stage == mr::kStageInit) {
        INFO(d.rule << ": " << d.message);
        CHECK(kInitRejects.count(name) == 1);
        CHECK((kInitRejects.count(name) == 0 || kInitRejects.at(name) == d.rule));
      }
  }
  // The files Megatron's chain accepts all reach the init stage (the parity test pins that number).
  CHECK(reached >= 120);
}
