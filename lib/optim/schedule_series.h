// The learning rate and weight decay of a whole run, point by point (`megatron-run schedule`): ParamScheduler's
// own values (schedule.h) at chosen iterations (iteration-based runs, --train-iters) or consumed-sample counts
// (sample-based runs, --train-samples), with the phase each point is in. Torch-free.
//
// A point at iteration i is the scheduler after i iterations (each consuming the running global batch size: see
// ScheduleRun::batches): the value Megatron logs at iteration i (training_log reads the learning rate after the
// scheduler's step) and uses for iteration i + 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/args.h"
#include "optim/schedule.h"

namespace mr::optim {

enum class SchedulePhase { Warmup, Constant, Stable, Decay, Anneal, Floor };
std::string_view to_string(SchedulePhase p);  // "warmup", "constant", "stable", "decay", "anneal", "floor"

// The phase of the learning rate at `samples` (as lr_at decides it).
SchedulePhase phase_at(const ScheduleConfig& c, int64_t samples);

struct SchedulePoint {
  int64_t step = 0;     // the x axis: iterations, or samples for a sample-based run
  int64_t samples = 0;  // consumed samples
  double lr = 0, weight_decay = 0;
  std::optional<double> decoupled_lr;  // the embedding and output layers' group, with --decoupled-lr
  SchedulePhase phase = SchedulePhase::Warmup;
};

// Where a phase begins, on the x axis.
struct ScheduleMark {
  int64_t step = 0;
  std::string what;  // "warmup ends", "decay ends (--lr-decay-iters)", ...
};

// The samples each iteration consumes, as Megatron steps its scheduler (increment = micro-batches x micro-batch
// size x data-parallel size: the running global batch size): (consumed samples from which it holds, samples per
// iteration), thresholds increasing from 0, sizes above 0.
using BatchPieces = std::vector<std::pair<int64_t, int64_t>>;

struct ScheduleRun {
  ScheduleConfig config;
  bool sample_based = false;   // --train-samples: the x axis counts samples
  int64_t global_batch_size = 1;  // the first iteration's samples (batches.front().second)
  BatchPieces batches;            // {{0, global_batch_size}} for a constant batch
  int64_t end = 0;             // the last step of the run (--train-iters or --train-samples)
  std::vector<ScheduleMark> marks;  // phase boundaries inside [0, end], in order

  // From resolved arguments (ScheduleConfig::from_args; std::invalid_argument naming the flags). `batches`: the
  // running batch sizes (run/batch_schedule.h gives them: a --step-batch-size-schedule, or --global-batch-size
  // rounded down by --decrease-batch-size-if-needed); empty: --global-batch-size throughout.
  static ScheduleRun from_args(const Args& args, BatchPieces batches = {});
  const char* unit() const { return sample_based ? "samples" : "iteration"; }
  int64_t samples_at(int64_t step) const;  // throws std::overflow_error beyond 64 bits
  // The last step whose consumed samples are at most `samples` (a phase boundary on the x axis).
  int64_t step_at(double samples) const;
  bool constant_batch() const { return batches.size() <= 1; }

  // The values at each step (any order; each must be >= 0).
  std::vector<SchedulePoint> at(const std::vector<int64_t>& steps) const;
};

// The most rows `megatron-run schedule` prints (--every 1 over a long run would be millions).
inline constexpr int64_t kMaxScheduleRows = 1000000;

// Steps to evaluate: `count` + 1 evenly spaced from 0 to `end`, plus the marks and the steps either side of
// each (so the picture's corners are exact), sorted, without repeats.
std::vector<int64_t> even_steps(const ScheduleRun& run, int64_t count);
// 0, k, 2k, ... up to `end` (and `end` itself).
std::vector<int64_t> every_steps(const ScheduleRun& run, int64_t k);

}  // namespace mr::optim
