// The CPU backend's loop over run/grad_format.h's grad_element: the reduced gradient times the average and loss
// scale, as Megatron's gradient buffer holds it. fp32 goes through the optimizer library's vectorised scale (the
// same single rounding); the rounding formats through a loop specialised per format and compiled for AVX-512,
// AVX2 and plain x86-64. OpenMP teams of optim::cpu::threads(). Internal to lib/run (and its benchmark).
#pragma once

#include <cstdint>

#include "run/grad_format.h"

namespace mr::run {

void finish_grads_cpu(float* x, int64_t n, float factor, GradFormat f);

}  // namespace mr::run
