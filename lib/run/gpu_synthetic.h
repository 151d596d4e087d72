// The synthetic gradient on a CUDA device (run/gpu_synthetic.cu): the same element function as the CPU loop
// (run/synthetic_grad.h, MR_HD), so the device makes bit for bit the gradient the CPU makes. No CUDA header is
// needed to use this; without CUDA every call throws (run/gpu_synthetic_stub.cpp).
#pragma once

#include "run/synthetic_grad.h"

namespace mr::run::gpu {

// synthetic_grads with device pointers in `t` (model, target, grad); returns the max |p - target|.
float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples, int bits,
                      bool zero, const GradTensor& t);

}  // namespace mr::run::gpu
