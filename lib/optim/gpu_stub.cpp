// mr::optim::gpu without CUDA: the queries answer "no GPU", everything else throws.
#include <stdexcept>

#include "optim/gpu.h"

namespace mr::optim::gpu {
namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("no GPU: megatron-run was built without CUDA"); }
}  // namespace

bool built_with_cuda() { return false; }
int device_count() { return 0; }
std::string describe() { return "no GPU (built without CUDA)"; }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) no_cuda();
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  ptr_ = o.ptr_;
  bytes_ = o.bytes_;
  o.ptr_ = nullptr;
  o.bytes_ = 0;
  return *this;
}
void DeviceBuffer::upload(const void*, size_t, size_t) { no_cuda(); }
void DeviceBuffer::download(void*, size_t, size_t) const { no_cuda(); }
void DeviceBuffer::fill_zero() { no_cuda(); }
void synchronize() { no_cuda(); }
double time_best(int, const std::function<void()>&) { no_cuda(); }
void memcpy_d2d(void*, const void*, size_t) { no_cuda(); }
#define MR_ELEMENTWISE_KERNEL(Name, name)                                                          \
  void name##_step(std::span<const TensorSlot>, std::span<const GroupHyper>, const Name##Options&, \
                   const StepControl&) {                                                           \
    no_cuda();                                                                                     \
  }
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
UnscaleResult unscale_and_check(std::span<const GradSlot>, float, bool) { no_cuda(); }
void newton_schulz(const float*, float*, int64_t, int64_t, const NsOptions&) { no_cuda(); }
void newton_schulz_batched(const float*, float*, int64_t, int64_t, int64_t, const NsOptions&) { no_cuda(); }
void muon_step(std::span<const MuonParam>, std::span<const GroupHyper>, const MuonOptions&, TpGroup*) { no_cuda(); }
void soap_step(std::span<const SoapParam>, std::span<const GroupHyper>, const SoapOptions&) { no_cuda(); }
void gemm(int64_t, int64_t, int64_t, const void*, const void*, void*, MatmulPrecision) { no_cuda(); }

}  // namespace mr::optim::gpu
