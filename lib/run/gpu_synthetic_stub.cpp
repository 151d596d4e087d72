// run/gpu_synthetic.h without CUDA: every call throws.
#include <stdexcept>

#include "run/gpu_synthetic.h"

namespace mr::run::gpu {

float synthetic_grads(const ParamSpec&, int64_t, uint32_t, const SampleTable&, int, bool, const GradTensor&) {
  throw std::runtime_error("no GPU: megatron-run was built without CUDA");
}

}  // namespace mr::run::gpu
