// The CUDA calls and kernels of the training run's CUDA backend (run/backend_cuda.cpp): device selection and
// memory, copies, the device halves of the exact statistics (per-element fixed-point squares summed per block in
// 128 bits, run/fixed_point.h; the combination on the host, run/device_plan.h), max |x|, scaling, zero counts,
// the checksum terms (run/checksum_term.h) and CUDA-event timing. Everything runs on the legacy default stream,
// in order; functions that return a value synchronise. No CUDA header needed to use this; without CUDA every call
// throws (run/cuda_ops_stub.cpp). Internal to lib/run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "optim/dtype.h"
#include "run/fixed_point.h"
#include "run/grad_format.h"
#include "run/row_rescale.h"
#include "run/tensor_index.h"

namespace mr::run::cuda {

// Devices visible to this process (0 without a driver or device; never throws).
int visible_devices();
// cudaSetDevice(device) on this thread; the device's name.
void set_device(int device);
std::string device_name(int device);
// cudaMemGetInfo of the current device.
void memory_info(double* free_bytes, double* total_bytes);

// Device memory (zeroed), released by release(); copies; a full synchronisation.
void* allocate(size_t bytes);
void release(void* p) noexcept;
void to_device(void* dst, const void* src, size_t bytes);
void to_host(void* dst, const void* src, size_t bytes);
void synchronize();
// A device area of at least `bytes` kept for the process (the host collectives' staging, run/host_collectives.h).
void* staging(size_t bytes);

// Exact statistics (run/exact_stats.h) at scale = 2^E: the sum of fixed_square_bits over an fp32 buffer
// x[0, n), over model elements [begin, end) (dtype d), over model - target on [begin, end); max |x| and
// max |model| over [begin, end), NaN when any element is NaN (run/abs_max.h, as the CPU loops).
Fixed sum_squares(const float* x, int64_t n, double scale);
Fixed sum_squares_model(const void* model, optim::DType d, int64_t begin, int64_t end, double scale);
Fixed sum_squares_model_minus_target(const void* model, optim::DType d, const float* target, int64_t begin,
                                     int64_t end, double scale);
double max_abs(const float* x, int64_t n);
float max_abs_model(const void* model, optim::DType d, int64_t begin, int64_t end);

// x[0, n) *= factor (fp32, one rounding: optim::cpu::scale_grads' arithmetic).
void scale(float* x, int64_t n, float factor);
// x[0, n) = grad_element(x, factor, f) (run/grad_format.h).
void finish_grads(float* x, int64_t n, float factor, GradFormat f);
// Elements equal to zero (+0 or -0) in x[0, n).
int64_t count_zeros(const float* x, int64_t n);
// The model checksum part of one parameter (Backend::model_checksum_part): sum over i in [0, n) of
// checksum_term(key, whole_index(where, i), bits of model element base + i), mod 2^64.
uint64_t checksum_part(const void* model, optim::DType d, int64_t base, int64_t n, uint64_t key, const ShardIndex& where);

// --embedding-min-norm's row passes over one piece (run/row_rescale.h; arrays indexed from the piece's first row,
// p.rows() of them, on the host): each row's max |x| as bits max-ed into out, each row's exact sum of squares at
// its scale added into out, each element times its row's factor (1: untouched).
void row_max_bits(const RowPiece& p, uint32_t* out);
void row_sum_squares(const RowPiece& p, const double* scale, Fixed* out);
void scale_rows(const RowPiece& p, const float* factor);

// CUDA events on the default stream: create, record, the milliseconds between two recorded events (waits for
// the later one), destroy.
void* event_create();
void event_record(void* e);
double event_elapsed_ms(void* from, void* to);
void event_destroy(void* e) noexcept;

}  // namespace mr::run::cuda
