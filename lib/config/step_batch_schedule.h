// --step-batch-size-schedule's text, as Megatron's StepBatchsizeNumMicroBatchesCalculator reads and checks it at
// start-up (megatron/core/num_microbatches_calculator.py: _parse_schedule, _parse_numeric_value,
// _validate_schedule). Shared by the init stage (rule init.step-batch-size-schedule, before any launch) and the run
// layer's batch schedule (run/batch_schedule.h). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mr {

// A schedule Megatron's calculator refuses; what() says why, starting with the flag.
struct StepScheduleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "THRESHOLD:BS ..." (spaces or commas between entries); each number is Python's int(float(text) * multiplier)
// with an optional K/M/B/T suffix (so "1.5K" is 1500); thresholds are tokens divided (floor) by `seq_length` when
// it is given and above 0, samples otherwise; sorted by threshold (stable). Then the calculator's checks: at least
// one entry, the first threshold 0, thresholds strictly increasing, every batch size above 0. Numbers beyond
// +-9e18 are refused (Python's ints are unbounded; such a schedule never takes effect here).
std::vector<std::pair<int64_t, int64_t>> parse_step_batch_schedule(const std::string& text,
                                                                   std::optional<int64_t> seq_length);

}  // namespace mr
