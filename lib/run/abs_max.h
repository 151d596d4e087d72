// The max |x| of a buffer as float bits, shared by the CPU loops and the CUDA kernels (run/synthetic_grad.cpp,
// run/gpu_synthetic.cu, run/cuda_ops.cu, run/backend_cpu.cpp). With the sign cleared, a float's bits order as
// unsigned integers: finite < inf < NaN. So a NaN anywhere is the max and survives every order of the reduction
// (a float max drops it), and the loss, the NaN check and the parameter norm see it on both devices alike.
// Internal to lib/run.
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::run {

MR_HD uint32_t abs_bits(float x) { return optim::f32_bits(x) & 0x7fffffffu; }  // |x| as bits (NaN above inf)
MR_HD uint32_t max_bits(uint32_t a, uint32_t b) { return a > b ? a : b; }      // the larger |x| (NaN wins)
MR_HD float abs_of_bits(uint32_t u) { return optim::bits_f32(u); }             // back to |x| (NaN stays NaN)

}  // namespace mr::run
