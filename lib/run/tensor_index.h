// Where an element of a tensor-parallel shard sits in the whole, unsplit tensor: the index every layout-invariant
// value of the run is keyed by (initial values, targets, the synthetic gradient, the checksum). One function for
// the CPU and the CUDA kernels (MR_HD). Internal to lib/run.
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::run {

// A shard's shape as the index needs it: split_dim -1 (replicated), 0 or 1; 1-D or 2-D.
struct ShardIndex {
  int split_dim = -1;
  int ndim = 1;
  int64_t shape0 = 0, shape1 = 1;  // this rank's shard
  int64_t full1 = 1;               // the whole tensor's second dimension
  int64_t tp_rank = 0;
};

MR_HD int64_t whole_index(const ShardIndex& s, int64_t local) {
  if (s.split_dim < 0) return local;                                  // replicated: the same index
  if (s.ndim == 1) return s.tp_rank * s.shape0 + local;               // 1-D: shards back to back
  const int64_t r = local / s.shape1, c = local % s.shape1;           // row and column in the shard
  if (s.split_dim == 0) return (s.tp_rank * s.shape0 + r) * s.full1 + c;  // rows split: shift the row
  return r * s.full1 + s.tp_rank * s.shape1 + c;                      // columns split: shift the column
}

}  // namespace mr::run
