// The global batch size of each step, as Megatron's number-of-microbatches calculators give it
// (megatron/core/num_microbatches_calculator.py): constant (--global-batch-size, with
// --decrease-batch-size-if-needed rounded down to a multiple of micro-batch x data-parallel size), or the
// piecewise --step-batch-size-schedule ("THRESHOLD:BS ...", thresholds in tokens when --seq-length is known,
// converted to samples; K/M/B/T suffixes). --rampup-batch-size is deprecated and ignored, as by Megatron.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/args.h"

namespace mr::run {

class BatchSchedule {
 public:
  // From the resolved arguments. Throws RunError (run/model.h) for a schedule Megatron refuses at initialisation
  // (a malformed entry, a first threshold other than 0, thresholds not increasing, a batch size not above 0,
  // a schedule with --decrease-batch-size-if-needed), naming the flag.
  static BatchSchedule from(const Args& args);

  // One step that starts after `consumed` samples: the schedule's global batch size, the samples it consumes
  // (Megatron's running global batch size: the global one, or rounded down with --decrease-batch-size-if-needed)
  // and its micro-batches per data-parallel rank.
  struct Step {
    int64_t global = 0, running = 0, microbatches = 0;
  };
  // Throws RunError when the global batch size is not a multiple of micro-batch x data-parallel size (Megatron's
  // consistency check) or is smaller than it.
  Step at(int64_t consumed) const;
  // The same without the checks (what the log and the set-up show before the first step).
  Step peek(int64_t consumed) const;

  // Megatron's update_train_iters for sample-based training: whole constant batches, or the steps a schedule
  // takes to reach `train_samples`.
  int64_t iterations_for(int64_t train_samples) const;

  bool scheduled() const { return from_schedule_; }
  // The largest global batch size of the schedule (the constant one otherwise).
  int64_t largest() const;
  // (threshold in samples, global batch size), thresholds increasing from 0.
  const std::vector<std::pair<int64_t, int64_t>>& steps() const { return steps_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> steps_;
  int64_t micro_ = 1, dp_ = 1;
  bool decrease_ = false, from_schedule_ = false;
};

}  // namespace mr::run
