// An optimizer state (or master copy) kept below fp32 by the precision-aware optimizer (Transformer Engine's
// FusedAdam: --exp-avg-dtype, --exp-avg-sq-dtype, --main-params-dtype), to and from its fp32 values. The run's
// checkpoints hold the fp32 values (as FusedAdam's get_unscaled_state gives them) and a loaded state is stored
// the way a step leaves it, so a state survives a save and load unchanged, whatever the dtype.
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::optim {

// Stores x[0, n) as dtype d at out: F32 as it is, BF16 rounded to nearest even, F16 as x / scale rounded, with
// the scale absmax / (65504 / 2) written to *scale first (what the step does after each update: kernels.h's
// f16_state_scale). `scale` is needed for F16 only.
void encode_state(const float* x, int64_t n, DType d, void* out, float* scale);
// The fp32 values of the n elements stored as d at `in` (F16: each times *scale).
void decode_state(const void* in, int64_t n, DType d, const float* scale, float* out);
// A state survives decode_state then encode_state unchanged, its fp16 scale included: for a scale s = A / 32752
// rounded, fp32's (s * 32752) / 32752 is s again (tests/optim/state_codec_test.cpp), so a checkpoint round trip
// changes no bit of the next step.

}  // namespace mr::optim
