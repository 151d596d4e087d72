// The backend of a run, chosen once (run/backend.h).
#include <stdexcept>

#include "run/backend.h"

namespace mr::run {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Grads: return "forward-backward (synthetic gradients)";
    case Phase::GradsReduce: return "grads-reduce";
    case Phase::UnscaleCheck: return "optimizer-unscale-and-check-inf";
    case Phase::ClipNorm: return "optimizer-clip-main-grad";
    case Phase::Step: return "optimizer-inner-step";
    case Phase::ParamsGather: return "params-all-gather";
  }
  return "?";
}

BackendKind backend_kind(arg::DistributedBackend distributed_backend) {
  switch (distributed_backend) {
    case arg::DistributedBackend::nccl: return BackendKind::Cuda;
    case arg::DistributedBackend::gloo: return BackendKind::Cpu;
  }
  throw RunError("unknown --distributed-backend (gloo or nccl)");
}

std::unique_ptr<Backend> make_backend(const distributed::Runtime& rt) {
  if (backend_kind(rt.backend()) == BackendKind::Cuda) return make_cuda_backend(rt.options().launch.local_rank);
  return make_cpu_backend();
}

}  // namespace mr::run
