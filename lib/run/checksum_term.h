// The mixing of the run's layout-free keys (splitmix64) and one element's term of the layout-free model checksum,
// shared by the CPU backend and the CUDA reduction (run/cuda_ops.cu): MR_HD, the same bits on both. Internal.
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::run {

// splitmix64's finaliser.
MR_HD uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The checksum term of the element at index `whole` of the unsplit tensor, holding the model bits `bits` (fp32
// bits, or the 16 bits of a bf16/fp16 value): terms are summed mod 2^64, so any order gives the same sum.
MR_HD uint64_t checksum_term(uint64_t key, int64_t whole, uint32_t bits) {
  return mix64(mix64(key ^ static_cast<uint64_t>(whole)) ^ bits);
}

}  // namespace mr::run
