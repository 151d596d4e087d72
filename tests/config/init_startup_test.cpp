// The init stage's start-up checks (lib/config/validate/init_startup.cpp): the number-of-microbatches calculator,
// the exit signal handler and the seed, each next to a neighbour that passes.
#include "init_support.h"

namespace {

using mrtest::InitCase;

const std::vector<InitCase> kCases = {
    // Three ranks (the reviewer's case): 8 is not 2 x 3 x k; the eval batch size is given so that validate_args'
    // eval check passes. The neighbour's 12 is.
    {"init.global-batch-size-divisible", {"--eval-global-batch-size", "6"}, {"--global-batch-size", "12"},
     {{"WORLD_SIZE", "3"}},
     "(the number-of-microbatches calculator): the global batch size 8 (--global-batch-size) is not divisible by "
     "--micro-batch-size 2 x data-parallel size 3 = 6; use a --global-batch-size that is a multiple of 6 (6 or 12)"},
    // One rank, micro batch 3; --decrease-batch-size-if-needed rounds 8 down to 6 instead.
    {"init.global-batch-size-divisible", {"--micro-batch-size", "3", "--eval-micro-batch-size", "2"},
     {"--micro-batch-size", "3", "--eval-micro-batch-size", "2", "--decrease-batch-size-if-needed"}, {},
     "or give --decrease-batch-size-if-needed"},
    // Rounding 8 down to a multiple of 16 leaves no micro batch; 8 x 1 still holds one.
    {"init.global-batch-size-one-micro-batch",
     {"--micro-batch-size", "16", "--eval-micro-batch-size", "1", "--decrease-batch-size-if-needed"},
     {"--micro-batch-size", "8", "--eval-micro-batch-size", "1", "--decrease-batch-size-if-needed"}, {},
     "which leaves no micro batch; use a --global-batch-size of at least 16"},
    {"init.exit-signal-catchable", {"--exit-signal-handler", "--exit-signal", "SIGKILL"},
     {"--exit-signal-handler", "--exit-signal", "SIGUSR1"}, {}, "--exit-signal SIGKILL, which no process can catch"},
    {"init.exit-signal-catchable", {"--exit-signal-handler", "--exit-signal", "SIGSTOP"},
     {"--exit-signal", "SIGSTOP"}, {}, "--exit-signal SIGSTOP"},  // without the handler the signal is not used
    {"init.seed-positive", {"--seed", "0"}, {"--seed", "1"}, {}, "--seed 0 is not a positive integer"},
    {"init.seed-positive", {"--seed", "-1"}, {"--seed", "4294967295"}, {}, "(\"Seed (-1) should be a positive integer.\")"},
};

// --step-batch-size-schedule excludes an explicit --global-batch-size (validate_args), which base_args() gives,
// so this rule's case builds its own command line.
const char* const kScheduleRule = "init.step-batch-size-schedule-no-decrease";
const char* const kScheduleEntries = "init.step-batch-size-schedule";

std::vector<std::string> schedule_args(bool decrease, const std::string& schedule = "0:8 1K:16") {
  std::vector<std::string> a;
  const std::vector<std::string> base = mrtest::base_args();
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] == "--global-batch-size") {
      ++i;
      continue;
    }
    a.push_back(base[i]);
  }
  a.insert(a.end(), {"--step-batch-size-schedule", schedule});
  if (decrease) a.push_back("--decrease-batch-size-if-needed");
  return a;
}

}  // namespace

TEST_CASE("init stage, start-up: each rule fires next to a neighbour that passes", "[init]") {
  std::set<std::string> seen = mrtest::check_init_cases(kCases);
  seen.insert(kScheduleRule);  // the next test cases
  seen.insert(kScheduleEntries);
  for (const std::string& id : mrtest::init_rules_of("validate/init_startup.cpp")) {
    INFO(id << " has no case");
    CHECK(seen.count(id) == 1);
  }
}

TEST_CASE("init stage, start-up: a step batch-size schedule with --decrease-batch-size-if-needed", "[init]") {
  const std::map<std::string, std::string> env = {{"WORLD_SIZE", "1"}};
  mrtest::Run bad = mrtest::run(schedule_args(true), env);
  INFO(bad.rule << ": " << bad.message);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == kScheduleRule);
  CHECK(bad.out.passed(mr::kStageValidateArgs));
  CHECK_THAT(bad.message, Catch::Contains("--step-batch-size-schedule cannot be combined with "
                                          "--decrease-batch-size-if-needed"));
  mrtest::Run good = mrtest::run(schedule_args(false), env);
  INFO(good.rule << ": " << good.message);
  CHECK(good.exit == 0);
  CHECK(good.out.passed(mr::kStageInit));
}

TEST_CASE("init stage, start-up: a step batch-size schedule's entries, as the step calculator reads them", "[init]") {
  const std::map<std::string, std::string> env = {{"WORLD_SIZE", "1"}};
  // Each refused before launch (Megatron: _parse_schedule / _validate_schedule in set_global_variables), with the
  // entry named; --seq-length makes thresholds tokens.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"0:8 1K", "invalid entry '1K'; expected THRESHOLD:BATCH_SIZE"},
      {"0:8 1K:sixteen", "'1K:sixteen' is not THRESHOLD:BATCH_SIZE with numbers"},
      {"0:8 0x10:16", "'0x10:16' is not THRESHOLD:BATCH_SIZE"},  // Python's float() takes no hex
      {"0:8 1e400:16", "'1e400:16' has a number that is not finite"},
      {"1K:8", "the first entry must have threshold 0, not '1K:8' (its tokens / --seq-length "},
      {"0:8 1:16", "thresholds must increase strictly: '0:8' (its tokens / --seq-length "},
      {"0:8 1M:0", "a batch size must be above 0, not 0 ('1M:0')"},
      {" , ", "the schedule has no entry"},
  };
  for (const auto& [schedule, message] : bad) {
    mrtest::Run r = mrtest::run(schedule_args(false, schedule), env);
    INFO(schedule << " -> " << r.rule << ": " << r.message);
    CHECK(r.exit == 1);
    CHECK(r.rule == kScheduleEntries);
    CHECK(r.out.passed(mr::kStageValidateArgs));
    CHECK_THAT(r.message, Catch::Contains("(the step batch size calculator): --step-batch-size-schedule: " + message));
  }
  // Commas, K/M/B/T suffixes, fractions and Python's underscores read as Megatron reads them; the entries' batch
  // sizes are not checked against micro batch x DP at start-up (only the step in use is, by Megatron's update()).
  for (const std::string good : {"0:8, 1_000K:16", "0:8 1.5B:24 2T:7", "100M:16 0:8"}) {
    mrtest::Run r = mrtest::run(schedule_args(false, good), env);
    INFO(good << " -> " << r.rule << ": " << r.message);
    CHECK(r.exit == 0);
    CHECK(r.out.passed(mr::kStageInit));
  }
}
