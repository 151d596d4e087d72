// The CPU step dispatch of the elementwise kernels: one `Kernel` of the optimizer table (optim/optimizer_table.h)
// to its cpu::<name>_step (optim/kernels.h). In mr_optim, which links LibTorch: optimizer_table.h itself stays
// constexpr and torch-free, so that mr_run_model can read the table without being able to call this.
#pragma once

#include <span>

#include "optim/optimizer_table.h"

namespace mr {
struct OptimizerConfig;  // config/optimizer_config.h
}

namespace mr::optim {

struct TensorSlot;  // optim/kernels.h
struct GroupHyper;

namespace cpu {
// The elementwise step of `kernel` (elementwise_kernels.def: Adam, SGD, Lion) with the kernel options
// OptimizerConfig gives (optim/config.h). Muon's and SOAP's matrices need their own steps (muon.h, soap.h); Kernel::Muon, Soap and None
// throw std::logic_error.
void elementwise_step(Kernel kernel, std::span<const TensorSlot> slots, std::span<const GroupHyper> groups,
                      const OptimizerConfig& cfg);
}  // namespace cpu

}  // namespace mr::optim
