// Rule-hit accounting (config/validate/rule.h): every rule counts how often its failing branch fired, and
// MR_RULE_HITS_FILE collects the ids at process exit for the `rules_all_tested` test.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/optimizer_config.h"
#include "config/validate/context.h"
#include "config/rule.h"
#include "support.h"

namespace {

const mr::Rule& rule(const std::string& id) {
  for (const mr::Rule* r : mr::all_rules())
    if (id == r->id) return *r;
  FAIL("no rule " << id);
  throw std::logic_error("unreachable");
}

// Two rules for the Context tests (test-only ids; they are not linked into megatron-run, so `megatron-run
// rules` and docs/validation.md do not list them).
MR_RULE(kTestError, "test.rule-hits-error", "Test-only error rule.");
MR_WARNING(kTestWarning, "test.rule-hits-warning", "Test-only warning rule.");

struct Ctx {
  mr::Namespace ns;
  mr::TargetEnv env;
  std::vector<mr::Diagnostic> diags;
  mr::Context ctx{ns, env, diags};
};

}  // namespace

TEST_CASE("rule hits: require/fail/warn count the failing branch once", "[rule-hits]") {
  Ctx c;
  const auto e0 = kTestError.hit_count();
  const auto w0 = kTestWarning.hit_count();

  c.ctx.require(true, kTestError, "passes");
  CHECK(kTestError.hit_count() == e0);

  CHECK_THROWS_AS(c.ctx.require(false, kTestError, "fails"), mr::RuleFailure);
  CHECK(kTestError.hit_count() == e0 + 1);
  CHECK_THROWS_AS(c.ctx.fail(kTestError, "fails"), mr::RuleFailure);
  CHECK(kTestError.hit_count() == e0 + 2);

  c.ctx.warn(kTestWarning, "warns", {"not_a_megatron_dest"});
  CHECK(kTestWarning.hit_count() == w0 + 1);
  REQUIRE(c.diags.size() == 1);
  CHECK(c.diags[0].rule == "test.rule-hits-warning");
  CHECK(c.diags[0].level == mr::Diagnostic::Level::Warning);
  // A dest the schema does not know is shown as its flag spelling.
  CHECK(c.diags[0].flags == std::vector<std::string>{"--not-a-megatron-dest"});

  // The *_counted forms report a hit counted elsewhere.
  CHECK_THROWS_AS(c.ctx.fail_counted(kTestError, "reported"), mr::RuleFailure);
  c.ctx.warn_counted(kTestWarning, "reported");
  CHECK(kTestError.hit_count() == e0 + 2);
  CHECK(kTestWarning.hit_count() == w0 + 1);
  CHECK(c.diags.size() == 2);
}

TEST_CASE("rule hits: a chain rule counts once per failing run, a passing run counts nothing", "[rule-hits]") {
  const mr::Rule& r = rule("batch-size.micro-batch-size-positive");
  const auto n0 = r.hit_count();
  CHECK(mrtest::run(mrtest::with({"--micro-batch-size", "0"}), {{"WORLD_SIZE", "1"}}).rule == r.id);
  CHECK(r.hit_count() == n0 + 1);
  CHECK(mrtest::run(mrtest::base_args(), {{"WORLD_SIZE", "1"}}).exit == 0);
  CHECK(r.hit_count() == n0 + 1);
}

TEST_CASE("rule hits: OptimizerConfig checks count once, directly or through the chain", "[rule-hits]") {
  const mr::Rule& min_lr = rule("optimizer.min-lr-above-lr");
  const mr::Rule& dist_muon = rule("optimizer.dist-muon-deprecated");

  // Through the chain: optimizer_config.cpp counts, optimizer_config_checks.cpp reports without counting again.
  auto n0 = min_lr.hit_count();
  CHECK(mrtest::run(mrtest::with({"--min-lr", "0.001"}), {{"WORLD_SIZE", "1"}}).rule == min_lr.id);
  CHECK(min_lr.hit_count() == n0 + 1);
  auto w0 = dist_muon.hit_count();
  CHECK(mrtest::run(mrtest::with({"--optimizer", "dist_muon"}), {{"WORLD_SIZE", "1"}}).warned(dist_muon.id));
  CHECK(dist_muon.hit_count() == w0 + 1);

  // Directly: a raised check counts; a warning counts even when the caller collects none.
  mr::OptimizerConfig cfg;
  cfg.lr = 1e-4;
  cfg.min_lr = 1e-3;
  n0 = min_lr.hit_count();
  CHECK_THROWS_AS(cfg.validate(), mr::OptimizerConfigError);
  CHECK(min_lr.hit_count() == n0 + 1);
  mr::OptimizerConfig muon;
  muon.optimizer = "dist_muon";
  w0 = dist_muon.hit_count();
  muon.validate();
  CHECK(dist_muon.hit_count() == w0 + 1);
}

TEST_CASE("rule hits: MR_RULE_HITS_FILE collects the fired ids at exit, appending", "[rule-hits]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mr-rule-hits-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path hits = dir / "hits.txt";
  const std::string cmd = std::string("cd '") + dir.string() + "' && MR_RULE_HITS_FILE='" + hits.string() +
                          "' WORLD_SIZE=1 " + MR_BINARY +
                          " --dry-run --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128"
                          " --max-position-embeddings 128 --micro-batch-size 0 --train-iters 10 --lr 0.0001"
                          " --mock-data --tokenizer-type NullTokenizer --vocab-size 1024 >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 1);
  st = std::system(cmd.c_str());  // a second process appends
  REQUIRE(WIFEXITED(st));

  std::ifstream in(hits);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  CHECK(std::count(lines.begin(), lines.end(), "batch-size.micro-batch-size-positive 1") == 2);

  // Without the variable nothing is written.
  const std::string quiet = "cd '" + dir.string() + "' && unset MR_RULE_HITS_FILE; " + MR_BINARY +
                            " --dry-run --micro-batch-size 0 >/dev/null 2>&1";
  st = std::system(quiet.c_str());
  REQUIRE(WIFEXITED(st));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}
