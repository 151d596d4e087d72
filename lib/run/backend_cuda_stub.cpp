// run/backend.h's make_cuda_backend in a build without CUDA. Not reached in a run: the worker refuses
// --distributed-backend nccl first (rule dist.nccl-unavailable).
#include "launch/nccl_check.h"
#include "run/backend.h"
#include "util/rule_id.h"

namespace mr::run {

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw RunError(with_rule_id(launch::kNcclUnavailableRule.id,
                              "the CUDA backend of the training run is not in this build (megatron-run was built "
                              "without CUDA): use --distributed-backend gloo"));
}

}  // namespace mr::run
