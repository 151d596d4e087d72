// The validation chain's checks of batch size: global, micro and eval batch sizes.
//
// For every rule a config that triggers it next to a neighbour that passes it, and derived values worked out
// by hand from the seed (../shared/spec/arguments.py). Most cases run a stretch of the chain (validate_support.h)
// so that a later section cannot mask what is tested; a few run one section on a namespace no command line
// can produce, or the whole chain.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/pipeline_layout.h"
#include "config/validate/section_functions.h"
#include "validate_support.h"

using namespace mrtest;

// ---------------------------------------------------------------------------------------------------------------
// Batch sizes (seed 626-653)

TEST_CASE("batch-size: micro batch size required and positive", "[validate-batch-size]") {
  auto r = mrtest::run(without("--micro-batch-size"), kWorld1);  // seed arguments.py:627
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.micro-batch-size-required");

  r = mrtest::run(mrtest::with({"--micro-batch-size", "0"}), kWorld1);  // seed arguments.py:628
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.micro-batch-size-positive");
  r = mrtest::run(mrtest::with({"--micro-batch-size", "-1"}), kWorld1);
  CHECK(r.rule == "batch-size.micro-batch-size-positive");

  r = mrtest::run(mrtest::with({"--micro-batch-size", "1"}), kWorld1);
  CHECK(r.exit == 0);
  r = mrtest::run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
}

TEST_CASE("batch-size: --step-batch-size-schedule excludes an explicit --global-batch-size", "[validate-batch-size]") {
  // seed arguments.py:632
  auto r = mrtest::run(mrtest::with({"--step-batch-size-schedule", "0:8"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.step-schedule-with-global-batch-size");

  r = mrtest::run(without("--global-batch-size", {"--step-batch-size-schedule", "0:8"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK(r["global_batch_size"].as_int() == 2);  // still derived from the micro batch size
}

TEST_CASE("batch-size: global batch size must be positive", "[validate-batch-size]") {
  // seed arguments.py:639
  auto r = mrtest::run(mrtest::with({"--global-batch-size", "0"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.global-batch-size-positive");
  r = mrtest::run(mrtest::with({"--global-batch-size", "-8"}), kWorld1);
  CHECK(r.rule == "batch-size.global-batch-size-positive");

  r = mrtest::run(mrtest::with({"--global-batch-size", "2"}), kWorld1);
  CHECK(r.exit == 0);
}

TEST_CASE("batch-size: eval global batch size divisible by eval micro batch x batch-parallel size",
          "[validate-batch-size]") {
  // seed arguments.py:647
  auto r = mrtest::run(mrtest::with({"--eval-global-batch-size", "3"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  // A zero divisor (Python's ZeroDivisionError) fails too.
  r = mrtest::run(mrtest::with({"--eval-micro-batch-size", "0"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  // The default eval global batch size (8) is not a multiple of 3 x 1; the message says where 8 came from.
  r = mrtest::run(mrtest::with({"--eval-micro-batch-size", "3"}), kWorld1);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  CHECK_THAT(r.message, Catch::Contains("--eval-global-batch-size (8, not given: the global batch size) must be "
                                        "divisible by --eval-micro-batch-size (3) x batch-parallel size (1); "
                                        "--eval-global-batch-size was not given, so it is the global batch size "
                                        "(--global-batch-size): make the global batch size a multiple of 3, or give "
                                        "an --eval-global-batch-size that is one"));
  // Three ranks: the global batch size 8 does not split into 2 x 3. Megatron's order is kept (validate_args'
  // eval check first), and the hint points at the global batch size, where the fix is.
  r = mrtest::run(mrtest::with({}), {{"WORLD_SIZE", "3"}});
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  CHECK_THAT(r.message, Catch::Contains("(8, not given: the global batch size) must be divisible by "
                                        "--eval-micro-batch-size (2, not given: --micro-batch-size) x batch-parallel "
                                        "size (3)"));
  CHECK_THAT(r.message, Catch::Contains("make the global batch size a multiple of 6 (--micro-batch-size x the "
                                        "batch-parallel size), or give an --eval-global-batch-size that is one"));
  // Following only the second half of that hint moves the failure to the training batch (init stage).
  r = mrtest::run(mrtest::with({"--eval-global-batch-size", "6"}), {{"WORLD_SIZE", "3"}});
  CHECK(r.rule == "init.global-batch-size-divisible");
  // A given --eval-global-batch-size gets no hint about the global batch size.
  r = mrtest::run(mrtest::with({"--eval-global-batch-size", "3"}), kWorld1);
  CHECK_THAT(r.message, !Catch::Contains("--global-batch-size"));
  // batch_parallel_size 4 (WORLD_SIZE 8, TP 2): 8 % (4 x 4) != 0.
  r = mrtest::run(mrtest::with({"--tensor-model-parallel-size", "2", "--eval-micro-batch-size", "4"}),
                  kWorld8OneConnection);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");

  r = mrtest::run(mrtest::with({"--eval-global-batch-size", "4"}), kWorld1);
  CHECK(r.exit == 0);
  r = mrtest::run(mrtest::with({"--tensor-model-parallel-size", "2", "--eval-micro-batch-size", "1"}),
                  kWorld8OneConnection);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("batch-size: derived global and eval batch sizes", "[validate-batch-size]") {
  struct Case {
    Args args;
    Env env;
    int64_t gbs, egbs, embs;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:636 global = micro x batch_parallel_size; bps = 1 (WORLD_SIZE 1)
      {without("--global-batch-size"), kWorld1, 2, 2, 2},
      // bps = 8 / (TP 2 x PP 1 x CP 1) = 4 -> 2 x 4 = 8
      {without("--global-batch-size", {"--tensor-model-parallel-size", "2"}), kWorld8OneConnection, 8, 8, 2},
      // bps = 8 / (TP 1 x PP 2 x CP 1) = 4 -> 2 x 4 = 8
      {without("--global-batch-size", {"--pipeline-model-parallel-size", "2"}), kWorld8OneConnection, 8, 8, 2},
      // bps = 8 / (1 x 1 x CP 2) = 4 -> 8
      {without("--global-batch-size", {"--context-parallel-size", "2"}), kWorld8OneConnection, 8, 8, 2},
      // bps = 8 -> 3 x 8 = 24
      {without("--global-batch-size", {"--micro-batch-size", "3"}), Env{{"WORLD_SIZE", "8"}}, 24, 24, 3},
      // explicit --global-batch-size is kept; seed arguments.py:642-645 eval sizes default to the training ones
      {mrtest::base_args(), kWorld1, 8, 8, 2},
      // explicit eval sizes are kept
      {mrtest::with({"--eval-global-batch-size", "4", "--eval-micro-batch-size", "1"}), kWorld1, 8, 4, 1},
      {mrtest::with({"--eval-micro-batch-size", "4"}), kWorld1, 8, 8, 4},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    auto r = mrtest::run(cases[i].args, cases[i].env);
    CHECK_BATCH_OR_LAYOUT_PASSES(r);
    CHECK(r["global_batch_size"].as_int() == cases[i].gbs);
    CHECK(r["eval_global_batch_size"].as_int() == cases[i].egbs);
    CHECK(r["eval_micro_batch_size"].as_int() == cases[i].embs);
  }
}
