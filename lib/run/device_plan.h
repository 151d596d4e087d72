// The host-side arithmetic of the CUDA backend (run/backend_cuda.cpp), as plain functions so that the CPU tests
// check it (tests/run/device_plan_test.cpp): which device a rank takes, whether the buffers fit in the device's
// free memory (rule run.device-memory), the blocks of the reductions and how their partial sums combine, the
// chunks a device buffer is hashed in on the host. No CUDA header needed. Internal to lib/run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "run/buffers.h"
#include "run/fixed_point.h"

namespace mr::run {

// The device of a rank: LOCAL_RANK among the `visible` devices (CUDA_VISIBLE_DEVICES as torchrun or a scheduler
// leaves it: all of the machine's GPUs, one per local rank; or one GPU per process, then device 0), chosen by
// util::choose_device as the NCCL communicators choose it. RunError with its refusal when there is none, or when
// more than one is visible and LOCAL_RANK is not below their count [dist.local-rank-gpu].
int device_for_local_rank(int local_rank, int visible, const std::optional<std::string>& cuda_visible_devices);

// What the device must hold besides the buffers: the CUDA context, cuBLAS' workspace, NCCL's buffers, the
// kernels' scratch areas. 1 GiB, or 5% of the device, whichever is larger.
double device_reserve_bytes(double total_bytes);

// Rule run.device-memory: the buffers (FlatBuffers::bytes) against the device's free memory (cudaMemGetInfo)
// less device_reserve_bytes. Empty when they fit; otherwise the refusal, naming the sizes and the ways out.
std::string device_memory_refusal(const BufferBytes& need, double free_bytes, double total_bytes, int64_t numel,
                                  int device, const std::string& device_name);

// The reductions over n elements: one U128 partial per block (optim::geom::grid_for(n) blocks), summed here.
size_t reduction_blocks(int64_t n);
Fixed sum_partials(const std::vector<U128>& partials);

// [begin, end) chunks of at most `chunk` bytes covering [0, bytes): the staging of a device buffer's FNV-1a on
// the host (the hash is sequential).
std::vector<std::pair<size_t, size_t>> byte_chunks(size_t bytes, size_t chunk);

}  // namespace mr::run
