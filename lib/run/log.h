// The training run's log lines, in Megatron's layout: the parameter count per (tensor, pipeline) rank, the start
// line, an iteration line every --log-interval iterations and the final summary (on the last rank). Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "run/run_context.h"
#include "run/train.h"

namespace mr::run {

struct Window {  // the iterations since the last iteration line that reset it (Megatron's should_reset)
  double elapsed_ms = 0;
  PhaseTimes phase_ms{};  // the time of each phase over the window (--timing-log-level)
  int64_t iterations = 0, skipped = 0;
  int64_t nan = 0;  // Megatron's "nan iterations": skipped ones whose loss was NaN or inf
  // The losses of the iterations that were not skipped (Megatron's total_loss_dict and advanced iterations): the
  // line shows their average, as training_log does.
  double loss_sum = 0;
  int64_t advanced = 0;
  // The next window, as Megatron's training_log leaves it: after the run's first iteration (logged to show the
  // start-up cost) nothing is reset, after any other logged iteration everything is.
  Window next(bool first_of_run) const { return first_of_run ? *this : Window{}; }
};

void log_start(const RunContext& c, std::ostream& log, const std::string& prefix);
// What an iteration line reports besides the window's figures: the grad norm, whether it shows a loss, and with
// --log-num-zeros-in-grad / --log-params-norm Megatron's "num zeros" and "params norm" fields.
struct StepReport {
  double grad_norm = 0;
  // Some iteration of this run was not skipped (an optimizer step ran): until then Megatron's total_loss_dict has
  // no loss key and its line no loss field; after, a window whose iterations were all skipped shows a loss of 0.
  bool run_kept_one = false;
  int64_t skipped_samples = 0;  // Megatron's skipped_train_samples (--iterations-to-skip): shown when not 0
  std::optional<int64_t> zeros;
  std::optional<double> params_norm;
};
// Megatron's iteration line (training_log), printed after the run's first iteration and every --log-interval
// iterations: its timestamp, the window's average loss, the loss scale (1.0 without a scaler), the grad norm unless
// the iteration was skipped.
void log_iteration(const RunContext& c, std::ostream& log, const std::string& prefix, int64_t it, int64_t consumed,
                   const Window& w, bool found_inf, const StepReport& step);
// With --timing-log-level 1 and up, after each iteration line: the time of each phase of an iteration
// (run/backend.h's Phase, Megatron's timer names) on the last rank, averaged over the window.
void log_timers(const RunContext& c, std::ostream& log, const std::string& prefix, const PhaseTimes& ms,
                int64_t iterations);
void log_finished(const RunContext& c, std::ostream& log, const std::string& prefix, const TrainResult& res);

}  // namespace mr::run
