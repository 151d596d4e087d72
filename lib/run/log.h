// The training run's log lines, in Megatron's layout: the parameter count per (tensor, pipeline) rank, the start
// line, an iteration line every --log-interval iterations and the final summary (on the last rank). Internal.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "run/run_context.h"
#include "run/train.h"

namespace mr::run {

struct Window {  // the iterations since the last iteration line
  double elapsed_ms = 0;
  int64_t iterations = 0, skipped = 0;
};

void log_start(const RunContext& c, std::ostream& log, const std::string& prefix);
void log_iteration(const RunContext& c, std::ostream& log, const std::string& prefix, int64_t it, int64_t consumed,
                   const Window& w, double loss, bool found_inf, double grad_norm);
void log_finished(const RunContext& c, std::ostream& log, const std::string& prefix, const TrainResult& res);

}  // namespace mr::run
