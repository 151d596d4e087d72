// The dtype of Megatron's gradient buffer, and what the training run does to its gradients because of it.
//
// Megatron's DDP keeps each parameter's main_grad in fp32 when grad_reduce_in_fp32 (the derived
// --accumulate-allreduce-grads-in-fp32: on for --bf16 unless --grad-reduce-in-bf16 or a --main-grads-dtype other
// than fp32) and in the parameter's dtype otherwise: fp16 for --fp16 by default, bf16 with --grad-reduce-in-bf16.
// The gradients are accumulated and reduced in that dtype, and with --fp16 the backward pass itself runs in fp16,
// so a loss-scaled gradient beyond fp16's range is inf (the loss scaler then skips the step and lowers the scale).
//
// The run sums its synthetic gradients exactly (run/synthetic_grad.h), so that every layout holds the same bits.
// It models the buffer by one rounding of the averaged, loss-scaled gradient to the buffer's dtype, after the
// reduction (grad_element), and fp16's range by inf beyond it, whatever the buffer: an approximation, since in
// Megatron the overflow shows in the fp16 activation gradients of the backward (the weight gradients may go
// straight into an fp32 main_grad with gradient accumulation fusion), which a synthetic run does not have; the
// loss-scaled gradient standing for them behaves alike (inf, a skipped step, a lower scale). Megatron rounds at
// every accumulation and every step of the reduction, in an order that depends on the layout and NCCL's algorithm;
// the run keeps one rounding and stays layout-invariant. The values stay in fp32 storage (every bf16 and fp16 value
// is an fp32 value). Shared by the CPU loop, the CUDA kernel (run/cuda_ops.cu) and the memory estimate.
#pragma once

#include "optim/dtype.h"
#include "optim/elementwise.h"

namespace mr {
struct Args;
}

namespace mr::run {

struct GradFormat {
  optim::DType buffer = optim::DType::F32;  // Megatron's main_grad dtype
  bool f16_range = false;                   // --fp16: the backward computes in fp16; beyond its range, inf
  bool rounds() const { return buffer != optim::DType::F32 || f16_range; }
};

// Megatron's gradient buffer for these (validated) arguments: fp32 in fp32 training or with
// --accumulate-allreduce-grads-in-fp32, else the parameters' dtype.
GradFormat grad_format(const Args& args);

// One element of the reduced gradient: times `factor` (the average over the global batch and the loss scale, one
// fp32 rounding, as the fp32 path), then as the buffer holds it.
// Every candidate is computed and one picked (optim::pick), so that a loop over it vectorises.
MR_HD float grad_element(float x, float factor, GradFormat f) {
  const float y = optim::scale_element(x, factor);            // the average times the loss scale: one rounding
  const float b = optim::bf16_to_f32(optim::f32_to_bf16(y));  // bf16, nearest even
  const float h = optim::round_to_f16(y);                     // fp16, nearest even; from 65520 up inf; NaN stays
  const bool finite = h - h == 0.0f;                          // fp16's range only: a finite h keeps y's bits
  uint32_t r = optim::pick(f.f16_range && !finite, optim::f32_bits(h), optim::f32_bits(y));
  r = optim::pick(f.buffer == optim::DType::F16, optim::f32_bits(h), r);
  r = optim::pick(f.buffer == optim::DType::BF16, optim::f32_bits(b), r);
  return optim::bits_f32(r);
}

}  // namespace mr::run
