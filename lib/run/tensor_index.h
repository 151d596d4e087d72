// Where an element of a tensor-parallel shard sits in the whole, unsplit tensor: the index every layout-invariant
// value of the run is keyed by (initial values, targets, the synthetic gradient, the checksum). One function for
// the CPU and the CUDA kernels (MR_HD). Internal to lib/run.
#pragma once

#include <cstdint>

#include "optim/dtype.h"

namespace mr::run {

// A shard's shape as the index needs it: split_dim -1 (replicated), 0 or 1; 1-D, or rows x the rest (the
// dimensions after the first fold into one; only 2-D tensors split along dimension 1).
inline constexpr int kMaxSplitParts = 7;  // the gated delta net 2's in_proj: q, k, v, z, f, b, w
struct ShardIndex {
  int split_dim = -1;
  int ndim = 1;                    // 1, or 2 for rows x the rest
  int64_t shape0 = 0, shape1 = 1;  // this rank's shard
  int64_t full1 = 1;               // the whole tensor's second dimension (the rest, folded)
  int64_t tp_rank = 0, tp_size = 1;
  int nparts = 0;                          // > 0: rows split part by part (ParamSpec::split_parts)
  int64_t part_rows[kMaxSplitParts] = {};  // this rank's rows of each part
};

MR_HD int64_t whole_index(const ShardIndex& s, int64_t local) {
  if (s.split_dim < 0) return local;                                  // replicated: the same index
  if (s.nparts > 0) {                                                 // rows split part by part:
    const int64_t r = local / s.shape1, c = local % s.shape1;         // row and column in the shard
    int64_t in_part = r, whole_row = 0;                               // the row within its part; the part's start
    for (int k = 0; k < s.nparts; ++k) {
      if (in_part < s.part_rows[k]) return (whole_row + s.tp_rank * s.part_rows[k] + in_part) * s.shape1 + c;
      in_part -= s.part_rows[k];                                      // past this part's rows here
      whole_row += s.part_rows[k] * s.tp_size;                        // and past the whole part
    }
    return -1;                                                        // (not a row of the shard)
  }
  if (s.ndim == 1) return s.tp_rank * s.shape0 + local;               // 1-D: shards back to back
  const int64_t r = local / s.shape1, c = local % s.shape1;           // row and column in the shard
  if (s.split_dim == 0) return (s.tp_rank * s.shape0 + r) * s.full1 + c;  // rows split: shift the row
  return r * s.full1 + s.tp_rank * s.shape1 + c;                      // columns split: shift the column
}

}  // namespace mr::run
