// The global batch size of each step (run/batch_schedule.h).
#include "run/batch_schedule.h"

#include <algorithm>

#include "config/step_batch_schedule.h"
#include "run/model.h"

namespace mr::run {

BatchSchedule BatchSchedule::from(const Args& args) {
  BatchSchedule b;
  b.micro_ = std::max<int64_t>(1, args.micro_batch_size);
  b.dp_ = std::max<int64_t>(1, args.data_parallel_size) * std::max<int64_t>(1, args.gtp_weight_remat_size);
  b.decrease_ = args.decrease_batch_size_if_needed;
  if (args.step_batch_size_schedule) {
    if (b.decrease_)
      throw RunError("--step-batch-size-schedule does not go with --decrease-batch-size-if-needed (Megatron refuses "
                     "both at initialisation)");
    b.from_schedule_ = true;
    try {  // the init stage refused such a schedule before launch (init.step-batch-size-schedule)
      b.steps_ = parse_step_batch_schedule(*args.step_batch_size_schedule, args.seq_length);
    } catch (const StepScheduleError& e) {
      throw RunError(e.what());
    }
    return b;
  }
  b.steps_ = {{0, args.global_batch_size}};
  return b;
}

BatchSchedule::Step BatchSchedule::peek(int64_t consumed) const {
  int64_t global = steps_.front().second;
  for (const auto& [threshold, bs] : steps_) {
    if (consumed < threshold) break;
    global = bs;
  }
  const int64_t unit = micro_ * dp_;
  Step s;
  s.global = global;
  s.running = decrease_ ? global - global % unit : global;
  s.microbatches = s.running / unit;
  return s;
}

BatchSchedule::Step BatchSchedule::at(int64_t consumed) const {
  const Step s = peek(consumed);
  const int64_t global = s.global, unit = micro_ * dp_;
  if (!decrease_ && global % unit != 0)
    throw RunError("the global batch size " + std::to_string(global) + (scheduled() ? " (--step-batch-size-schedule)" : "") +
                   " is not divisible by --micro-batch-size " + std::to_string(micro_) + " x data-parallel size " +
                   std::to_string(dp_) + " (Megatron's consistency check)");
  if (s.microbatches < 1)
    throw RunError("the global batch size " + std::to_string(global) + " is smaller than --micro-batch-size " +
                   std::to_string(micro_) + " x data-parallel size " + std::to_string(dp_));
  return s;
}

int64_t BatchSchedule::iterations_for(int64_t train_samples) const {
  if (!from_schedule_) return train_samples / steps_.front().second;
  // Megatron: while consumed < train_samples: consumed += the current global batch size (no consistency check).
  int64_t consumed = 0, iterations = 0;
  for (size_t k = 0; k < steps_.size() && consumed < train_samples; ++k) {
    const int64_t bs = steps_[k].second;
    const int64_t until = k + 1 < steps_.size() ? std::min(steps_[k + 1].first, train_samples) : train_samples;
    if (consumed >= until) continue;
    const int64_t n = (until - consumed + bs - 1) / bs;  // steps of this size until the next threshold is reached
    consumed += n * bs;
    iterations += n;
  }
  return iterations;
}

int64_t BatchSchedule::largest() const {
  int64_t m = 0;
  for (const auto& [t, bs] : steps_) m = std::max(m, bs);
  return m;
}

}  // namespace mr::run
