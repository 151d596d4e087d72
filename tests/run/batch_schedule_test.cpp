// The global batch size of each step (run/batch_schedule.h), as Megatron's number-of-microbatches calculators give
// it: the schedule's parsing and checks, the step at a consumed-sample count, and update_train_iters.
#include <catch2/catch.hpp>

#include "run/batch_schedule.h"
#include "run/model.h"

using mr::Args;
using mr::run::BatchSchedule;
using mr::run::RunError;

namespace {

Args batch_args(int64_t micro, int64_t dp, int64_t global, std::optional<std::string> schedule = {},
                std::optional<int64_t> seq = {}, bool decrease = false) {
  Args a;
  a.micro_batch_size = micro;
  a.data_parallel_size = dp;
  a.global_batch_size = global;
  a.step_batch_size_schedule = schedule;
  a.seq_length = seq;
  a.decrease_batch_size_if_needed = decrease;
  return a;
}

std::string refusal(const Args& a) {
  try {
    (void)BatchSchedule::from(a).at(0);
  } catch (const RunError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("batch schedule: a constant global batch, and --decrease-batch-size-if-needed", "[run][batch]") {
  const BatchSchedule c = BatchSchedule::from(batch_args(2, 2, 8));
  CHECK_FALSE(c.scheduled());
  CHECK(c.at(0).global == 8);
  CHECK(c.at(1000).running == 8);
  CHECK(c.at(0).microbatches == 2);
  CHECK(c.iterations_for(44) == 5);  // whole batches
  // 7 with micro 2 x DP 1: decreased to 6 (3 micro-batches), as Megatron's ConstantNumMicroBatchesCalculator.
  const BatchSchedule d = BatchSchedule::from(batch_args(2, 1, 7, {}, {}, true));
  CHECK(d.at(0).global == 7);
  CHECK(d.at(0).running == 6);
  CHECK(d.at(0).microbatches == 3);
  CHECK_THAT(refusal(batch_args(2, 1, 7)),
             Catch::Contains("the global batch size 7 is not divisible by --micro-batch-size 2 x data-parallel size 1"));
  CHECK_THAT(refusal(batch_args(4, 2, 6, {}, {}, true)), Catch::Contains("is smaller than --micro-batch-size 4"));
}

TEST_CASE("batch schedule: --step-batch-size-schedule steps, suffixes, tokens to samples", "[run][batch]") {
  const BatchSchedule s = BatchSchedule::from(batch_args(2, 2, 4, std::string("0:8 100:16, 1K:32")));
  CHECK(s.scheduled());
  CHECK(s.steps() == std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {100, 16}, {1000, 32}});
  CHECK(s.at(0).global == 8);
  CHECK(s.at(99).global == 8);
  CHECK(s.at(100).global == 16);
  CHECK(s.at(100).microbatches == 4);
  CHECK(s.at(5000).global == 32);
  CHECK(s.largest() == 32);
  // update_train_iters: 8 until 104 (13 steps), 16 until 1000 (56 steps: 104 -> 1000), 32 to 1200 (7 steps).
  int64_t consumed = 0, its = 0;
  while (consumed < 1200) consumed += s.at(consumed).global, ++its;
  CHECK(s.iterations_for(1200) == its);
  CHECK(s.iterations_for(1200) == 13 + 56 + 7);
  CHECK(s.iterations_for(1) == 1);
  // With a sequence length the thresholds are tokens: 2048 tokens of 128 are 16 samples; "1.5K" is 1500.
  const BatchSchedule t = BatchSchedule::from(batch_args(1, 1, 1, std::string("0:4 2048:8 1.5K:12"), 128));
  CHECK(t.steps() == std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {11, 12}, {16, 8}});
}

TEST_CASE("batch schedule: what Megatron refuses at initialisation", "[run][batch]") {
  CHECK_THAT(refusal(batch_args(1, 1, 1, std::string("4:8"))), Catch::Contains("the first entry must have threshold 0"));
  CHECK_THAT(refusal(batch_args(1, 1, 1, std::string("0:8 16:16"), 128)),
             Catch::Contains("thresholds must increase strictly: '0:8' (its tokens / --seq-length 128 = 0 samples), "
                             "then '16:16' (its tokens / --seq-length 128 = 0 samples)"));
  CHECK_THAT(refusal(batch_args(1, 1, 1, std::string("0:8 x"))), Catch::Contains("invalid entry 'x'"));
  CHECK_THAT(refusal(batch_args(1, 1, 1, std::string("0:eight"))), Catch::Contains("'0:eight' is not THRESHOLD:BATCH_SIZE"));
  CHECK_THAT(refusal(batch_args(1, 1, 1, std::string("0:0"))), Catch::Contains("a batch size must be above 0"));
  CHECK_THAT(refusal(batch_args(1, 1, 1, std::string("0:8"), {}, true)),
             Catch::Contains("does not go with --decrease-batch-size-if-needed"));
  CHECK_THAT(refusal(batch_args(2, 2, 4, std::string("0:6"))), Catch::Contains("is not divisible by"));
  // peek() shows a step without Megatron's per-step checks (the log before the first step, a resumed run).
  CHECK(BatchSchedule::from(batch_args(2, 2, 4, std::string("0:6"))).peek(0).global == 6);
}
