// The CUDA backend's host arithmetic (run/device_plan.h).
#include "run/device_plan.h"

#include <algorithm>
#include <cstdio>

#include "optim/launch_geometry.h"
#include "run/model.h"
#include "run/run_support.h"
#include "util/byte_size.h"
#include "launch/nccl_check.h"
#include "util/gpu_devices.h"
#include "util/rule_id.h"

namespace mr::run {

int device_for_local_rank(int local_rank, int visible, const std::optional<std::string>& cuda_visible_devices) {
  const util::DeviceChoice c = util::choose_device(local_rank, visible, cuda_visible_devices);
  if (!c.refusal.empty()) throw RunError(launch::device_refusal(c, "the CUDA backend"));
  return c.device;
}

double device_reserve_bytes(double total_bytes) { return std::max(kGiB, 0.05 * total_bytes); }

std::string device_memory_refusal(const BufferBytes& need, double free_bytes, double total_bytes, int64_t numel,
                                  int device, const std::string& device_name) {
  const double reserve = device_reserve_bytes(total_bytes);
  const double usable = std::max(0.0, free_bytes - reserve);
  if (need.total() <= usable) return {};
  return with_rule_id(kDeviceMemoryRule.id, "the training run needs " + format_gib(need.total()) + " of device memory on GPU " + std::to_string(device) +
         " (" + device_name + ") for " + std::to_string(numel) + " parameters (params " + format_gib(need.model) +
         ", gradients " + format_gib(need.grad + need.grad_shard) + ", main params " + format_gib(need.main) +
         ", optimizer state " + format_gib(need.state) + ", targets " + format_gib(need.target) +
         (need.work > 0 ? ", the optimizer step's scratch " + format_gib(need.work) : std::string()) + "), but " +
         format_gib(free_bytes) + " of its " + format_gib(total_bytes) + " are free and " + format_gib(reserve) +
         " stay reserved for CUDA, cuBLAS and NCCL: use a smaller model (--num-layers, --hidden-size), more ranks "
         "(--tensor/--pipeline-model-parallel-size, --use-distributed-optimizer) or --dry-run");
}

size_t reduction_blocks(int64_t n) { return optim::geom::grid_for(n); }

Fixed sum_partials(const std::vector<U128>& partials) {
  U128 total;
  for (const U128& p : partials) total.add(p);
  return to_fixed(total);
}

std::vector<std::pair<size_t, size_t>> byte_chunks(size_t bytes, size_t chunk) {
  std::vector<std::pair<size_t, size_t>> out;
  if (chunk == 0) chunk = 1;
  for (size_t b = 0; b < bytes; b += chunk) out.emplace_back(b, std::min(bytes, b + chunk));
  return out;
}

}  // namespace mr::run
