// A picture of a run's schedule (`megatron-run schedule --format svg`): the learning rate (and the embedding
// and output layers' with --decoupled-lr) over the run, the weight decay below it, the phases shaded and their
// boundaries marked. Drawn from the same points the CSV prints (schedule_series.h).
#pragma once

#include <string>
#include <vector>

#include "optim/schedule_series.h"

namespace mr::optim {

// A self-contained SVG of `points` (sorted by step).
std::string schedule_svg(const ScheduleRun& run, const std::vector<SchedulePoint>& points, const std::string& title);

}  // namespace mr::optim
