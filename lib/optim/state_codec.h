// An optimizer state (or master copy) kept below fp32 by the precision-aware optimizer (Transformer Engine's
// FusedAdam: --exp-avg-dtype, --exp-avg-sq-dtype, --main-params-dtype), to and from its fp32 values. The run's
// checkpoints hold the fp32 values (as FusedAdam's get_unscaled_state gives them) and a loaded state is stored
// the way a step leaves it (FusedAdam's set_scaled_state), so a state survives a save and load unchanged, but for
// an fp8 state's scale (below).
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::optim {

// Stores x[0, n) as dtype d at out: F32 as it is, BF16 rounded to nearest even, F16 and E4M3 (fp8) scaled: each
// x * enc rounded, where {enc, dec} = state_scale(d, absmax of x) (dtype.h; what the step does after each update),
// and dec written to *scale. `scale` is needed for F16 and E4M3 only.
void encode_state(const float* x, int64_t n, DType d, void* out, float* scale);
// The fp32 values of the n elements stored as d at `in` (F16, E4M3: each times *scale).
void decode_state(const void* in, int64_t n, DType d, const float* scale, float* out);
// An fp32, bf16 or fp16 state survives decode_state then encode_state unchanged, its fp16 scale included: for a scale
// s = A / 32752 rounded, fp32's (s * 32752) / 32752 is s again (tests/optim/state_codec_test.cpp), so a checkpoint
// round trip changes no bit of the next step. An fp8 state keeps every stored byte, but its scale 1 / (1 / s) comes
// back one or two ulps off for about one tensor in ninety, as with Transformer Engine's own get_unscaled_state and
// set_scaled_state (tests/optim/state_codec_test.cpp): a resumed fp8 run is within that of an uninterrupted one.

}  // namespace mr::optim
