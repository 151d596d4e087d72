// The synthetic gradient's per-sample coefficients (run/synthetic_grad.h).
#include "run/synthetic_grad.h"

#include <algorithm>
#include <cmath>

#include "optim/kernels.h"
#include "run/abs_max.h"
#include "run/buffers.h"

namespace mr::run {

void SampleStats::add(uint64_t key) {
  static constexpr int64_t kBeta[4] = {-2, -1, 1, 2};  // two bits of the key each: mean 0
  ++n;
  for (int j = 0; j < 4; ++j) beta_sum[j] += kBeta[(key >> (2 * j)) & 3u];
}

uint64_t sample_key(uint64_t seed, int64_t iteration, int64_t sample) {
  return mix64(mix64(seed ^ 0x5a17e5ull) ^ mix64(static_cast<uint64_t>(iteration)) ^
               mix64(static_cast<uint64_t>(sample) * 0x9e3779b97f4a7c15ull));
}

SampleStats dense_samples(uint64_t seed, int64_t iteration, int64_t consumed, int64_t global_batch,
                          int64_t micro_batch, int64_t dp_size, int64_t dp_rank) {
  SampleStats s;
  const int64_t per_step = std::max<int64_t>(1, micro_batch) * dp_size;  // one micro-batch on every DP rank
  const int64_t mbs = std::max<int64_t>(1, micro_batch);
  for (int64_t m = 0; m * per_step < global_batch; ++m)
    for (int64_t j = 0; j < mbs; ++j) {
      const int64_t in_batch = m * per_step + dp_rank * mbs + j;
      if (in_batch < global_batch) s.add(sample_key(seed, iteration, consumed + in_batch));
    }
  return s;
}

SampleStats expert_samples(uint64_t seed, int64_t iteration, int64_t consumed, int64_t global_batch,
                           int64_t edp_size, int64_t edp_rank) {
  SampleStats s;
  const int64_t begin = global_batch * edp_rank / edp_size, end = global_batch * (edp_rank + 1) / edp_size;
  for (int64_t i = begin; i < end; ++i) s.add(sample_key(seed, iteration, consumed + i));
  return s;
}

int quantize_bits(int64_t global_batch) {
  int log2_batch = 0;
  while ((int64_t{1} << log2_batch) < global_batch && log2_batch < 62) ++log2_batch;  // ceil(log2)
  return std::clamp(20 - log2_batch, 1, 20);
}

namespace {

// Elements [begin, begin + len) of the shard, whose indices in the whole tensor are gi0, gi0 + 1, ...
template <optim::DType D>
__attribute__((always_inline)) inline uint32_t run_of(const GradTensor& t, int64_t begin, int64_t len, uint64_t gi0,
                                                   uint32_t key, const SampleTable& samples, int bits, bool zero) {
  const void* model = t.model;  // locals: the stores into grad cannot change them (the loop vectorises)
  const float* __restrict target = t.target + begin;
  float* __restrict grad = t.grad + begin;
  const SampleTable table = samples;  // a local copy: its fields stay in registers
  const float keep = zero ? 0.0f : 1.0f;  // the tied output copy: zeros
  const uint32_t key_high = high_key(key, gi0), low0 = static_cast<uint32_t>(gi0);  // the caller keeps high(gi) fixed
  uint32_t m = 0;  // max |p - target| as bits (run/abs_max.h: a NaN is the max)
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < len; ++j) {
    const float d = optim::load_element(model, D, begin + j) - target[j];                          // p - target
    const uint32_t bits8 = element_bits_split(key_high, low0 + static_cast<uint32_t>(j));  // alpha's key bits
    grad[j] = keep * (quantize(d, bits) * static_cast<float>(table.sum(bits8)));        // 8 x my samples' sum
    m = max_bits(m, abs_bits(d));                                                       // for the loss's max
  }
  return m;
}

// The loop above for the run's dtype, compiled for AVX-512, AVX2 and plain x86-64 (picked at load time, as the
// optimizer kernels are).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
uint32_t grads_of_run(const GradTensor& t, int64_t begin, int64_t len, uint64_t gi0, uint32_t key,
                   const SampleTable& samples, int bits, bool zero) {
  // Split where the index's high 32 bits change (at most once in a run), so that the loop works in 32 bits.
  const uint64_t to_wrap = (uint64_t{1} << 32) - (gi0 & 0xffffffffull);
  if (static_cast<uint64_t>(len) > to_wrap) {
    const int64_t first = static_cast<int64_t>(to_wrap);
    return max_bits(grads_of_run(t, begin, first, gi0, key, samples, bits, zero),
                    grads_of_run(t, begin + first, len - first, gi0 + to_wrap, key, samples, bits, zero));
  }
  switch (t.dtype) {
    case optim::DType::F32: return run_of<optim::DType::F32>(t, begin, len, gi0, key, samples, bits, zero);
    case optim::DType::BF16: return run_of<optim::DType::BF16>(t, begin, len, gi0, key, samples, bits, zero);
    case optim::DType::F16: return run_of<optim::DType::F16>(t, begin, len, gi0, key, samples, bits, zero);
    case optim::DType::E4M3: break;  // a state's dtype, never the model's (buffer_dtypes)
  }
  return 0;
}

}  // namespace

float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples, int bits,
                      bool zero, const GradTensor& t) {
  // Runs of elements contiguous in the whole tensor: a row of a 2-D TP shard, else blocks of 4096.
  // (Rows also where TP splits the rows part by part, ParamSpec::split_parts.)
  const int64_t row = shard_index(p, tp_rank).shape1;
  const bool rows = p.split_dim >= 0 && (p.shape.size() == 2 || p.split_parts.size() > 1);
  const int64_t len = rows ? std::max<int64_t>(1, row) : 4096, runs = (t.n + len - 1) / len;
  uint32_t m = 0;  // as bits (run/abs_max.h)
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads()) reduction(max : m)
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t begin = r * len, n = std::min(len, t.n - begin);
    const uint64_t gi0 = static_cast<uint64_t>(global_index(p, tp_rank, begin));  // index in the whole tensor
    m = max_bits(m, grads_of_run(t, begin, n, gi0, key, samples, bits, zero));
  }
  return abs_of_bits(m);
}

}  // namespace mr::run
