// The training run's optimizer step: the gradient norm and clipping (Megatron's chained optimizer for MoE), and
// the step of the optimizer table's kernel over Megatron's parameter groups. Internal to lib/run.
#pragma once

#include <cstdint>

#include "run/run_context.h"

namespace mr::run {

// The global gradient norm (L2) of this iteration's gradients, clipped to --clip-grad when it is set. MoE: the
// dense norm over the model-parallel group, the experts' over the expert model-parallel group, combined; one clip
// coefficient for both.
double clip_grad_norm(RunContext& c);

// One optimizer step (1-based `step_number`) at the schedule's current learning rate and weight decay.
void optimizer_step(RunContext& c, int64_t step_number);

}  // namespace mr::run
