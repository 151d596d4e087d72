// run/cuda_ops.h without CUDA: no device is visible, every other call throws.
#include <stdexcept>

#include "run/cuda_ops.h"

namespace mr::run::cuda {

namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("no GPU: megatron-run was built without CUDA"); }
}  // namespace

int visible_devices() { return 0; }
void set_device(int) { no_cuda(); }
std::string device_name(int) { no_cuda(); }
void memory_info(double*, double*) { no_cuda(); }
void* allocate(size_t) { no_cuda(); }
void release(void*) noexcept {}
void to_device(void*, const void*, size_t) { no_cuda(); }
void to_host(void*, const void*, size_t) { no_cuda(); }
void synchronize() { no_cuda(); }
void* staging(size_t) { no_cuda(); }
Fixed sum_squares(const float*, int64_t, double) { no_cuda(); }
Fixed sum_squares_model(const void*, optim::DType, int64_t, int64_t, double) { no_cuda(); }
Fixed sum_squares_model_minus_target(const void*, optim::DType, const float*, int64_t, int64_t, double) { no_cuda(); }
double max_abs(const float*, int64_t) { no_cuda(); }
float max_abs_model(const void*, optim::DType, int64_t, int64_t) { no_cuda(); }
void scale(float*, int64_t, float) { no_cuda(); }
void finish_grads(float*, int64_t, float, GradFormat) { no_cuda(); }
int64_t count_zeros(const float*, int64_t) { no_cuda(); }
uint64_t checksum_part(const void*, optim::DType, int64_t, int64_t, uint64_t, const ShardIndex&) { no_cuda(); }
void row_max_bits(const RowPiece&, uint32_t*) { no_cuda(); }
void row_sum_squares(const RowPiece&, const double*, Fixed*) { no_cuda(); }
void scale_rows(const RowPiece&, const float*) { no_cuda(); }
void* event_create() { no_cuda(); }
void event_record(void*) { no_cuda(); }
double event_elapsed_ms(void*, void*) { no_cuda(); }
void event_destroy(void*) noexcept {}

}  // namespace mr::run::cuda
