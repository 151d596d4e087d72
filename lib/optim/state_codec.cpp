// Low-precision optimizer states to and from fp32 (optim/state_codec.h).
#include "optim/state_codec.h"

#include <algorithm>
#include <cmath>

#include "optim/kernels.h"

namespace mr::optim {

void encode_state(const float* x, int64_t n, DType d, void* out, float* scale) {
  switch (d) {
    case DType::F32:
      std::copy(x, x + n, static_cast<float*>(out));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(out)[i] = f32_to_bf16(x[i]);
      return;
    case DType::F16:
    case DType::E4M3: {
      float absmax = 0.0f;  // the largest magnitude (a NaN is skipped by max, as in the step)
      for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(x[i]));
      const StateScale sc = state_scale(d, absmax);
      if (d == DType::F16)
        for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(out)[i] = f32_to_f16(x[i] * sc.enc);
      else
        for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(out)[i] = f32_to_e4m3(x[i] * sc.enc);
      *scale = sc.dec;
      return;
    }
  }
}

void decode_state(const void* in, int64_t n, DType d, const float* scale, float* out) {
  switch (d) {
    case DType::F32:
      std::copy(static_cast<const float*>(in), static_cast<const float*>(in) + n, out);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(static_cast<const uint16_t*>(in)[i]);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(static_cast<const uint16_t*>(in)[i]) * *scale;
      return;
    case DType::E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(static_cast<const uint8_t*>(in)[i]) * *scale;
      return;
  }
}

}  // namespace mr::optim
