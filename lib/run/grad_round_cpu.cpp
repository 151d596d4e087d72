// run/grad_round_cpu.h.
#include "run/grad_round_cpu.h"

#include <algorithm>
#include <vector>

#include "optim/clip_grads.h"
#include "optim/kernels.h"

namespace mr::run {

namespace {

// x[0, n) = grad_element(x, factor, F): F a constant, so that only its candidate is computed.
template <optim::DType Buffer, bool Range>
__attribute__((always_inline)) inline void round_grads(float* __restrict x, int64_t n, float factor) {
  constexpr GradFormat f{Buffer, Range};
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = grad_element(x[i], factor, f);
}

// The loop for `f`'s format, picked at load time for the CPU, as the optimizer kernels are.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void round_grads(float* x, int64_t n, float factor, GradFormat f) {
  if (f.buffer == optim::DType::BF16) return round_grads<optim::DType::BF16, false>(x, n, factor);
  if (f.buffer == optim::DType::F16) return round_grads<optim::DType::F16, true>(x, n, factor);
  round_grads<optim::DType::F32, true>(x, n, factor);  // an fp32 buffer in fp16 training: fp16's range
}

}  // namespace

void finish_grads_cpu(float* x, int64_t n, float factor, GradFormat f) {
  if (!f.rounds()) {
    optim::cpu::scale_grads(std::vector<optim::GradSlot>{{n, x, optim::DType::F32}}, factor);
    return;
  }
  constexpr int64_t kBlock = int64_t{1} << 16;
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
  for (int64_t b = 0; b < n; b += kBlock) round_grads(x + b, std::min(kBlock, n - b), factor, f);
}

}  // namespace mr::run
