// The thin LibTorch adapter: TensorSlot / MuonParam / GradSlot views of at::Tensors (CPU or CUDA, contiguous).
// The only LibTorch-facing part of mr_optim; the kernels never see a tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include "optim/kernels.h"
#include "optim/muon.h"

namespace mr::optim {

// F32, BF16 or F16; uint8 is E4M3 (an fp8 optimizer state's bytes, as Transformer Engine's FusedAdam takes
// torch.uint8 for fp8); throws std::invalid_argument for other dtypes.
DType dtype_of(const at::Tensor& t);

// The tensors of one parameter; undefined tensors are absent buffers. Scales are 1-element fp32 tensors: what a stored
// value is multiplied by when read (fp16: FusedAdam's _scales entry; fp8: the Float8Tensor's _scale_inv, which may
// differ from _scales by an ulp or two: dtype.h's state_scale).
struct TensorState {
  at::Tensor param, grad, master, master_scale, remainder;  // remainder: int16 / uint16 (TE stores int16)
  at::Tensor exp_avg, exp_avg_scale, exp_avg_sq, exp_avg_sq_scale;
  int32_t group = 0;
};

// Checks that every defined tensor is contiguous, has param's numel and lives on param's device.
TensorSlot make_slot(const TensorState& t);
GradSlot make_grad_slot(const at::Tensor& grad);
// A 2-D fp32 param with its grad and momentum buffer.
MuonParam make_muon_param(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& momentum,
                          int32_t group = 0);

}  // namespace mr::optim
