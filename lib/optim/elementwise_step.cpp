// The CPU step dispatch of the elementwise kernels (elementwise_step.h).
#include "optim/elementwise_step.h"

#include <stdexcept>

#include "optim/config.h"
#include "optim/kernels.h"

namespace mr::optim::cpu {

void elementwise_step(Kernel kernel, std::span<const TensorSlot> slots, std::span<const GroupHyper> groups,
                      const OptimizerConfig& cfg) {
  switch (kernel) {
#define MR_ELEMENTWISE_KERNEL(Name, name)                                    \
  case Kernel::Name: return name##_step(slots, groups, name##_options(cfg));
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
    case Kernel::Muon: throw std::logic_error("elementwise_step: Muon's matrices take muon_step (optim/muon.h)");
    case Kernel::Soap: throw std::logic_error("elementwise_step: SOAP's matrices take soap_step (optim/soap.h)");
    case Kernel::None: break;
  }
  throw std::logic_error("elementwise_step: no kernel for this optimizer");
}

}  // namespace mr::optim::cpu
