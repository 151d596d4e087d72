// --step-batch-size-schedule's text (config/step_batch_schedule.h): the numbers as Python's int(float(x) * k)
// reads them, tokens to samples with Python's floor division, the order, and the calculator's checks.
#include <catch2/catch.hpp>

#include "config/step_batch_schedule.h"

using mr::parse_step_batch_schedule;
using Steps = std::vector<std::pair<int64_t, int64_t>>;

TEST_CASE("step batch schedule: numbers, suffixes, tokens to samples, order", "[step-schedule]") {
  CHECK(parse_step_batch_schedule("0:8 100:16, 1K:32", std::nullopt) == Steps{{0, 8}, {100, 16}, {1000, 32}});
  // Python's float(): underscores between digits, exponents, a fraction truncated toward zero by int().
  CHECK(parse_step_batch_schedule("0:8 1_000:16 2.9e3:24 7.99k:4", std::nullopt) ==
        Steps{{0, 8}, {1000, 16}, {2900, 24}, {7990, 4}});
  // Tokens / --seq-length, sorted: "1.5K" tokens is 11 samples of 128, before 2048 tokens (16 samples).
  CHECK(parse_step_batch_schedule("0:4 2048:8 1.5K:12", 128) == Steps{{0, 4}, {11, 12}, {16, 8}});
  // Floor division of a negative threshold (-1 // 128 == -1): then it is the first entry, not 0.
  CHECK_THROWS_WITH(parse_step_batch_schedule("-1:4 0:8", 128),
                    Catch::Contains("the first entry must have threshold 0, not '-1:4' (its tokens / --seq-length 128 = -1 samples)"));
  // A --seq-length of 0 or none: thresholds are samples.
  CHECK(parse_step_batch_schedule("0:4 100:8", 0) == Steps{{0, 4}, {100, 8}});
}

TEST_CASE("step batch schedule: what the calculator refuses", "[step-schedule]") {
  CHECK_THROWS_WITH(parse_step_batch_schedule("", std::nullopt), Catch::Contains("the schedule has no entry"));
  CHECK_THROWS_WITH(parse_step_batch_schedule("0:8 8", std::nullopt), Catch::Contains("invalid entry '8'"));
  CHECK_THROWS_WITH(parse_step_batch_schedule("0:8 0x10:16", std::nullopt), Catch::Contains("'0x10:16' is not"));
  CHECK_THROWS_WITH(parse_step_batch_schedule("0:8 5:nan", std::nullopt), Catch::Contains("'5:nan' has a number that is not finite"));
  CHECK_THROWS_WITH(parse_step_batch_schedule("0:8 1e19:16", std::nullopt), Catch::Contains("beyond 9e18"));
  CHECK_THROWS_WITH(parse_step_batch_schedule("0:8 5:8 5:16", std::nullopt),
                    Catch::Contains("thresholds must increase strictly: '5:8' (5 samples), then '5:16' (5 samples)"));
  CHECK_THROWS_WITH(parse_step_batch_schedule("0:-8", std::nullopt), Catch::Contains("above 0, not -8 ('0:-8')"));
}
