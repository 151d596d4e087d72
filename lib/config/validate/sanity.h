// megatron-run's own checks (stage "sanity", rule ids `sanity.*`): values Megatron's validate_args() accepts but
// that no job can run with — no layers, negative sizes, a NaN learning rate, Adam betas outside [0, 1), a world
// size or rank that cannot exist. They run after Megatron's chain has passed (validation_stages(), sections.h),
// so Megatron's own verdict is never pre-empted and stays comparable with the reference; a diagnostic of theirs
// carries stage "sanity". sanity.integer-overflow is the one sanity rule that fires inside Megatron's chain: a
// size the chain computes (Context::mul/add) that does not fit in 64 bits, where Python would carry on.
#pragma once

#include <vector>

#include "config/rule.h"
#include "config/validate/sections.h"

namespace mr::sanity {

// The rule Context::mul/add fail with.
const Rule& integer_overflow_rule();

// The sections of the sanity stage, in order.
std::vector<Section> sections();

// Limits the sanity stage enforces (also quoted in messages).
inline constexpr int64_t kMaxWorldSize = 2147483647;  // torch.distributed ranks are C ints

}  // namespace mr::sanity
