// The index arithmetic of the optimizer kernels, as host functions (internal to lib/optim): the multi-tensor
// work list (chunks of a tensor list), which elements a thread of a block touches, grid sizes, the metadata
// layout uploaded before a step, the Newton-Schulz grids, the QKV part copies and the alignment a buffer needs.
// The CUDA files (gpu_*.cu) compute every index through these functions, the CPU work list (work_list.h) uses
// the same chunking, and tests/optim/launch_geometry_test.cpp checks them on the CPU: every element covered once,
// tails, odd sizes (1, 3, 65537), grid limits. No CUDA header is needed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/dtype.h"

#if defined(__CUDACC__)
#define MR_GEOM __host__ __device__ inline
#else
#define MR_GEOM inline
#endif

namespace mr::optim::geom {

// ---- constants -----------------------------------------------------------------------------------------------

constexpr int kThreads = 256;        // threads per block of the multi-tensor and grid-stride kernels
constexpr int kIlp = 4;              // elements per thread in flight (multi-tensor kernels)
constexpr int64_t kGpuChunk = 16384; // elements per block of the GPU multi-tensor kernels (one work item)
constexpr int64_t kMaxGridX = 2147483647;  // CUDA's limit on gridDim.x
constexpr int64_t kMaxGridYZ = 65535;      // ... on gridDim.y and gridDim.z
constexpr int64_t kMaxGridStride = 65535;  // blocks of a grid-stride launch (enough to fill any GPU)
constexpr size_t kMetaAlign = 256;         // alignment of each region of an uploaded metadata area
constexpr int kTile = 32;                  // Newton-Schulz transpose tiles: 32 x 32 elements
constexpr int kTileRows = 8;               //   ... worked by 32 x 8 threads
constexpr int kNormThreads = 128;          // threads per block of the small per-matrix / per-slot kernels
constexpr int64_t kMaxSumsqBlocks = 1024;  // blocks per matrix of the Newton-Schulz sum of squares

// ---- the multi-tensor work list ------------------------------------------------------------------------------

struct WorkItem {
  int32_t slot;         // index into the slot list
  int64_t begin, len;   // elements [begin, begin + len) of that slot
};

// Every tensor of the list cut into chunks of `chunk` elements, in order, the last chunk of a tensor shorter
// (empty tensors give none). `numel(slot)` returns a slot's element count. Throws std::length_error past
// int32 slots.
template <class Slots, class Numel>
std::vector<WorkItem> chunk_list(const Slots& slots, Numel numel, int64_t chunk) {
  if (slots.size() > static_cast<size_t>(INT32_MAX)) throw std::length_error("more than 2^31 - 1 tensors in one step");
  std::vector<WorkItem> w;
  for (size_t s = 0; s < slots.size(); ++s) {
    const int64_t n = numel(slots[s]);
    for (int64_t b = 0; b < n; b += chunk) w.push_back({static_cast<int32_t>(s), b, std::min(chunk, n - b)});
  }
  return w;
}

// The blocks of a launch with one block per work item (gridDim.x), refused past CUDA's limit.
inline unsigned blocks_for_work(size_t items) {
  if (static_cast<int64_t>(items) > kMaxGridX)
    throw std::length_error("the work list has " + std::to_string(items) + " chunks, more blocks than one launch takes");
  return static_cast<unsigned>(items);
}

// ---- which elements a thread touches ----------------------------------------------------------------------------

// A multi-tensor block walks its item in rounds of kThreads * kIlp elements; in round r, lane u of thread t
// handles element begin + r * kThreads * kIlp + u * kThreads + t (consecutive threads, consecutive elements:
// coalesced). Elements at or past begin + len are skipped (the tail of the last round).
MR_GEOM int64_t ilp_rounds(int64_t len) { return (len + int64_t{kThreads} * kIlp - 1) / (int64_t{kThreads} * kIlp); }
MR_GEOM int64_t ilp_index(int64_t begin, int64_t round, int thread, int lane) {
  return begin + round * (int64_t{kThreads} * kIlp) + int64_t{lane} * kThreads + thread;
}

// A block-strided walk (unscale_and_check): thread t handles begin + t, begin + t + kThreads, ... below begin + len.
MR_GEOM int64_t block_stride_first(int64_t begin, int thread) { return begin + thread; }
MR_GEOM int64_t block_stride_step() { return kThreads; }

// A grid-stride launch over n elements: ceil(n / kThreads) blocks of kThreads threads, at least 1 and at most
// kMaxGridStride (the loop then strides by the whole grid).
MR_GEOM unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > kMaxGridStride ? kMaxGridStride : b);
}
MR_GEOM int64_t grid_stride_first(unsigned block, unsigned threads, unsigned thread) {
  return int64_t{block} * threads + thread;
}
MR_GEOM int64_t grid_stride_step(unsigned blocks, unsigned threads) { return int64_t{blocks} * threads; }

// One thread per item of a small list (slots, matrices): ceil(n / kNormThreads) blocks, at least 1.
MR_GEOM unsigned blocks_per_item(int64_t n) {
  const int64_t b = (n + kNormThreads - 1) / kNormThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

// ---- metadata uploaded before a step ---------------------------------------------------------------------------

MR_GEOM size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// The elementwise step: slots | per-group constants | work list | absmax (3 words per slot), each region
// starting on a kMetaAlign boundary, in one upload.
struct StepMeta {
  size_t consts, work, amax, total;
};
inline StepMeta step_meta(size_t slots, size_t slot_bytes, size_t groups, size_t const_bytes, size_t items) {
  StepMeta m;
  m.consts = align_up(slots * slot_bytes, kMetaAlign);
  m.work = m.consts + align_up(groups * const_bytes, kMetaAlign);
  m.amax = m.work + align_up(items * sizeof(WorkItem), kMetaAlign);
  m.total = m.amax + align_up(slots * 3 * sizeof(unsigned), kMetaAlign);
  return m;
}

// unscale_and_check: slots | work list | one double partial sum per item | the found-inf flag.
struct UnscaleMeta {
  size_t work, partial, flag, total;
};
inline UnscaleMeta unscale_meta(size_t slots, size_t slot_bytes, size_t items) {
  UnscaleMeta m;
  m.work = align_up(slots * slot_bytes, kMetaAlign);
  m.partial = m.work + align_up(items * sizeof(WorkItem), kMetaAlign);
  m.flag = m.partial + align_up(items * sizeof(double), kMetaAlign);
  m.total = m.flag + kMetaAlign;
  return m;
}

// ---- alignment -----------------------------------------------------------------------------------------------

// A buffer the kernels read as elements of `t` must start on a multiple of its element size (a bf16/fp16 buffer
// on 2 bytes, fp32 on 4); a misaligned pointer would fault on the device ("misaligned address").
inline bool aligned_for(const void* p, DType t) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(dtype_size(t)) == 0;
}

// ---- Newton-Schulz --------------------------------------------------------------------------------------------

struct Grid {
  unsigned x = 1, y = 1, z = 1;
};

// The batch of one strided-batched NS call rides on gridDim.y / gridDim.z: at most kMaxGridYZ matrices.
inline void check_ns_batch(int64_t batch) {
  if (batch < 1 || batch > kMaxGridYZ)
    throw std::length_error("Newton-Schulz batch of " + std::to_string(batch) + " matrices (1 to 65535 per call)");
}
// Sum of squares of each matrix (mn elements): blocks per matrix, then the grid (blocks, batch).
inline int64_t sumsq_blocks(int64_t mn) {
  return std::clamp<int64_t>((mn + kThreads - 1) / kThreads, 1, kMaxSumsqBlocks);
}
inline Grid sumsq_grid(int64_t mn, int64_t batch) {
  check_ns_batch(batch);
  return {static_cast<unsigned>(sumsq_blocks(mn)), static_cast<unsigned>(batch), 1};
}
// Thread t of block (bx, by) of matrix b sums elements bx * kThreads + t, then every blocks * kThreads further.
MR_GEOM int64_t sumsq_first(unsigned block, unsigned thread) { return int64_t{block} * kThreads + thread; }
MR_GEOM int64_t sumsq_step(int64_t blocks) { return blocks * kThreads; }
// The 32 x 32 tiles of a rows x cols source matrix, per matrix of the batch (blockIdx.z).
inline Grid tile_grid(int64_t rows, int64_t cols, int64_t batch) {
  check_ns_batch(batch);
  const int64_t gx = (cols + kTile - 1) / kTile, gy = (rows + kTile - 1) / kTile;
  if (gx > kMaxGridX || gy > kMaxGridYZ) throw std::length_error("matrix too large for the Newton-Schulz tiles");
  return {static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(batch)};
}

// The first row (column) of the tile of block index `block` along y (x).
MR_GEOM int64_t tile_origin(unsigned block) { return int64_t{block} * kTile; }

// Muon's QKV split: the rows of one part (s rows of every query group's `total`, starting at row `off` of the
// group) gathered into a contiguous (groups * s) x cols matrix, as one 2-D copy: `rows` rows of `width` bytes,
// `pitch` bytes apart in the fused matrix, from element `src_offset` on.
struct PartCopy {
  size_t width, pitch, rows;
  int64_t src_offset;
};
inline PartCopy qkv_part_copy(int64_t cols, int64_t total, int64_t s, int64_t off, int64_t groups) {
  return {static_cast<size_t>(s * cols) * sizeof(float), static_cast<size_t>(total * cols) * sizeof(float),
          static_cast<size_t>(groups), off * cols};
}

// Muon's duplicated TP mode with shards split along columns (partition_dim 1): rank r's rows x cols shard is the
// column block [r*cols, (r+1)*cols) of the full rows x (world*cols) matrix, and the all-gather leaves the shards
// one after another. One 2-D copy moves shard r between the two: `rows` rows of `width` bytes, `full_pitch`
// bytes apart from element `full_offset` of the full matrix, `shard_pitch` bytes apart from element
// `shard_offset` of the gathered shards.
struct ColumnBlockCopy {
  size_t width, rows, full_pitch, shard_pitch;
  int64_t full_offset, shard_offset;
};
inline ColumnBlockCopy column_block_copy(int64_t rows, int64_t cols, int64_t world, int64_t r) {
  return {static_cast<size_t>(cols) * sizeof(float), static_cast<size_t>(rows),
          static_cast<size_t>(world * cols) * sizeof(float), static_cast<size_t>(cols) * sizeof(float), r * cols,
          r * rows * cols};
}

}  // namespace mr::optim::geom

#undef MR_GEOM
