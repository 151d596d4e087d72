// The synthetic gradient of the training run, built so that the gradient of a global batch does not depend on
// how the batch and the model are split (data-parallel ranks, micro-batches, tensor/pipeline/expert ranks, the
// distributed optimizer): every layout ends with the same bits. Internal to lib/run.
//
// Each sample s of the global batch contributes, to each element e of each parameter (e: the element's index
// in the whole, unsplit tensor; the parameter by its layout-independent key),
//
//     g_s(e) = q(e) * c_s(e) / 8,      q(e) = round(p(e) - target(e)) to `m` significant bits,
//     c_s(e) = 8 + sum_{j<4} alpha_j(e) * beta_j(s),  alpha_j in {-1, 0, +1},  beta_j in {-2, -1, +1, +2},
//
// alpha keyed by (seed, iteration, parameter, element), beta by (seed, iteration, global sample index): the
// gradient of 0.5 * (p - target)^2 with a multiplicative per-sample noise of up to +-100%. Because alpha does not
// depend on the sample and beta not on the element, a rank's sum over its samples is
// q(e) * (8 * n + sum_j alpha_j(e) * B_j) with n and B_j = sum over its samples of beta_j: O(1) per element
// whatever the batch. And because q has m <= 20 - ceil(log2(global batch)) significant bits and
// 0 <= c_s <= 16, every partial sum over any subset of the global batch is an integer multiple of q's last bit
// below 2^24 of them: exact in fp32, in any order, under any reduction tree. The run sums as Megatron does
// (over the local micro-batches, then over the data-parallel group) and divides by 8 * global batch once at the
// end (the average), so 1 rank and 64 ranks hold the same bits.
//
// Which samples a rank sums: the dense parameters the samples of its data-parallel rank, as Megatron's
// pretraining sampler deals them (micro-batch m, rank r: [consumed + m*mbs*dp + r*mbs, +mbs)); routed experts
// (no real routing here) an even, contiguous split of the global batch over the expert data-parallel group.
// The tied output copy of the word embeddings on the last pipeline stage contributes zero, so the embedding
// group's sum equals the first stage's gradient, as on one stage.
#pragma once

#include <cstdint>

#include "optim/dtype.h"
#include "run/model.h"

namespace mr::run {

// The per-sample coefficients of one rank: n samples and B_j = their sum of beta_j.
struct SampleStats {
  int64_t n = 0;
  int64_t beta_sum[4] = {0, 0, 0, 0};
  void add(uint64_t sample_key);  // one sample's beta_j from its key (run/synthetic_grad.cpp)
};

// The key of global sample `sample` at `iteration`.
uint64_t sample_key(uint64_t seed, int64_t iteration, int64_t sample);

// The samples a data-parallel rank holds at an iteration (Megatron's MegatronPretrainingSampler order).
SampleStats dense_samples(uint64_t seed, int64_t iteration, int64_t consumed, int64_t global_batch,
                          int64_t micro_batch, int64_t dp_size, int64_t dp_rank);
// The samples a member of the expert data-parallel group sums for its routed experts.
SampleStats expert_samples(uint64_t seed, int64_t iteration, int64_t consumed, int64_t global_batch,
                           int64_t edp_size, int64_t edp_rank);

// m, the significant bits of q: the most for which 16 * global_batch * 2^m <= 2^24 (at least 1; beyond a
// global batch of 2^19 the sums are no longer exact, see docs/run.md).
int quantize_bits(int64_t global_batch);

// The element functions below are shared by the CPU loop (run/synthetic_grad.cpp) and the CUDA kernel
// (run/gpu_synthetic.cu): MR_HD, bit for bit the same values.

// x rounded to `bits` significant bits (round half away from zero on the magnitude); 0 for |x| < 2^-100 (so
// that no partial sum is subnormal); inf and NaN as they are. Branch-free (the loop vectorises).
MR_HD float quantize(float x, int bits) {
  const uint32_t u = optim::f32_bits(x);
  const uint32_t exponent = (u >> 23) & 0xffu;
  const uint32_t drop = 24u - static_cast<uint32_t>(bits);          // mantissa bits below the kept ones (4..23)
  const uint32_t half = (1u << drop) >> 1;                          // half of the last kept bit
  uint32_t y = (u + half) & ~((1u << drop) - 1u);                   // round; a carry may bump the exponent: fine
  y = exponent < 127u - 100u ? (u & 0x80000000u) : y;               // tiny and subnormal: (signed) zero
  y = exponent == 0xffu ? u : y;                                    // inf, NaN: left to the inf/NaN check
  return optim::bits_f32(y);
}

// The 8 key bits of element `gi` of a parameter whose key at this iteration is `key`: a 32-bit mix (murmur3's
// finaliser) of the key and both halves of the index.
MR_HD uint32_t element_bits_split(uint32_t key_high, uint32_t gi_low) {  // key_high: key ^ high(gi) * c
  uint32_t h = key_high ^ (gi_low * 0x9e3779b1u);
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h & 0xffu;
}
MR_HD uint32_t high_key(uint32_t key, uint64_t gi) { return key ^ (static_cast<uint32_t>(gi >> 32) * 0x85ebca77u); }
MR_HD uint32_t element_bits(uint32_t key, uint64_t gi) {
  return element_bits_split(high_key(key, gi), static_cast<uint32_t>(gi));
}

// alpha_j of an element from its 8 key bits: two bits each, bit 0 nonzero, bit 1 the sign: 0, +1 or -1.
MR_HD int alpha(uint32_t bits8, int j) {
  const int two = static_cast<int>((bits8 >> (2 * j)) & 3u);
  return (two & 1) * (1 - (two & 2));
}

// A rank's sum over its samples of c_s(e), sum_s (8 + sum_j alpha_j(e) beta_j(s)) = 8 n + sum_j alpha_j(e) B_j:
// an integer in [0, 16 n], exact as a float (32-bit integers: global batches below 2^26, checked by the run).
struct SampleTable {
  int32_t n8 = 0;        // 8 n
  int32_t beta[4] = {};  // B_j
  explicit SampleTable(const SampleStats& s) : n8(static_cast<int32_t>(8 * s.n)) {
    for (int j = 0; j < 4; ++j) beta[j] = static_cast<int32_t>(s.beta_sum[j]);
  }
  // For the element's 8 key bits, branch-free: + or - B_j where alpha_j is nonzero.
  MR_HD int32_t sum(uint32_t bits8) const {
    int32_t acc = n8;
    for (int j = 0; j < 4; ++j) {
      const uint32_t two = bits8 >> (2 * j);
      const int32_t nonzero = -static_cast<int32_t>(two & 1u);         // all ones where alpha_j != 0
      const int32_t minus = -static_cast<int32_t>((two >> 1) & 1u);    // all ones where alpha_j = -1
      acc += ((beta[j] ^ minus) - minus) & nonzero;                     // alpha_j * B_j
    }
    return acc;
  }
};

// The rank's sum over its samples of g_s(e), times 8: q * (8 n + sum_j alpha_j B_j) < 2^24 units of q's last
// bit: exact in fp32.
MR_HD float local_grad_sum(float q, uint32_t bits8, const SampleTable& t) {
  return q * static_cast<float>(t.sum(bits8));
}

// One parameter's part of the gradient on this rank: grad[i] = local_grad_sum(quantize(p - target),
// element_bits(key, index in the whole tensor), samples) for its n local elements (zero: the tied output copy, all zeros), in OpenMP
// teams. `key` is the parameter's key at this iteration; returns the max |p - target| (for the loss;
// NaN when any is NaN, run/abs_max.h).
struct GradTensor {
  const void* model = nullptr;  // this rank's shard, in the training dtype
  optim::DType dtype = optim::DType::F32;
  const float* target = nullptr;
  float* grad = nullptr;
  int64_t n = 0;
};
float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples, int bits,
                      bool zero, const GradTensor& t);

}  // namespace mr::run
