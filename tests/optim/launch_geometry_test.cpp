// The CUDA kernels' index arithmetic (optim/launch_geometry.h) checked on the CPU: the kernels compute every
// index through these functions, so a covered-once walk here is a covered-once walk on the device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <numeric>
#include <vector>

#include "optim/launch_geometry.h"
#include "optim/work_list.h"

namespace geom = mr::optim::geom;
using mr::optim::DType;

namespace {

const std::vector<int64_t> kOdd = {1, 3, 255, 256, 257, 1023, 1024, 1025, 16383, 16384, 16385, 65537, 131075};

struct S {
  int64_t numel;
};

// How many times each element of [0, n) is visited by the walk `visit(f)` (f(i) per element).
template <class Walk>
std::vector<int> coverage(int64_t n, Walk walk) {
  std::vector<int> hits(static_cast<size_t>(n), 0);
  walk([&](int64_t i) {
    REQUIRE(i >= 0);
    REQUIRE(i < n);
    ++hits[static_cast<size_t>(i)];
  });
  return hits;
}
bool once(const std::vector<int>& h) {
  return std::all_of(h.begin(), h.end(), [](int x) { return x == 1; });
}

}  // namespace

TEST_CASE("chunk list: every element of every tensor in exactly one chunk, tails shorter", "[optim][geometry]") {
  std::vector<S> slots;
  for (int64_t n : kOdd) slots.push_back({n});
  slots.push_back({0});  // empty tensors get no chunk
  slots.push_back({7});
  for (int64_t chunk : {geom::kGpuChunk, mr::optim::cpu::detail::kChunk}) {
    const auto w = geom::chunk_list(slots, [](const S& s) { return s.numel; }, chunk);
    std::vector<int64_t> covered(slots.size(), 0);
    int32_t last = -1;
    for (const auto& it : w) {
      REQUIRE(it.slot >= last);  // in slot order
      last = it.slot;
      REQUIRE(it.len >= 1);
      REQUIRE(it.len <= chunk);
      REQUIRE(it.begin % chunk == 0);  // chunk starts: byte offsets stay multiples of chunk * element size
      REQUIRE(it.begin == covered[static_cast<size_t>(it.slot)]);  // contiguous, no gap, no overlap
      covered[static_cast<size_t>(it.slot)] += it.len;
    }
    for (size_t s = 0; s < slots.size(); ++s) CHECK(covered[s] == slots[s].numel);
  }
  // The GPU's 16 Ki chunks: 65537 = 4 full chunks + a tail of 1; sizes 1 and 3 are one short chunk each.
  const auto w = geom::chunk_list(std::vector<S>{{65537}, {1}, {3}}, [](const S& s) { return s.numel; }, geom::kGpuChunk);
  REQUIRE(w.size() == 7);
  CHECK(w[4].begin == 65536);
  CHECK(w[4].len == 1);
  CHECK(w[5].len == 1);
  CHECK(w[6].len == 3);
  // The CPU work list is the same chunking with its own chunk size.
  const std::vector<S> two = {{65537}, {3}};
  const auto cw = mr::optim::cpu::detail::work_list(std::span<const S>(two));
  REQUIRE(cw.size() == 3);
  CHECK(cw[1].len == 1);
  CHECK(cw[2].slot == 1);
}

TEST_CASE("multi-tensor block walk: each element of a chunk once, tails skipped", "[optim][geometry]") {
  for (int64_t len : kOdd) {
    if (len > geom::kGpuChunk) continue;  // one work item is at most one chunk
    for (int64_t begin : {int64_t{0}, geom::kGpuChunk * 3}) {
      auto hits = coverage(begin + len, [&](auto f) {
        for (int t = 0; t < geom::kThreads; ++t)
          for (int64_t r = 0; r < geom::ilp_rounds(len); ++r)
            for (int u = 0; u < geom::kIlp; ++u) {
              const int64_t i = geom::ilp_index(begin, r, t, u);
              if (i < begin + len) f(i);
            }
      });
      INFO("len " << len << " begin " << begin);
      CHECK(std::all_of(hits.begin(), hits.begin() + begin, [](int x) { return x == 0; }));
      CHECK(once(std::vector<int>(hits.begin() + begin, hits.end())));
    }
  }
  // Rounds: 1024 elements per round (256 threads x 4 lanes); consecutive threads read consecutive elements.
  CHECK(geom::ilp_rounds(1) == 1);
  CHECK(geom::ilp_rounds(1024) == 1);
  CHECK(geom::ilp_rounds(1025) == 2);
  CHECK(geom::ilp_rounds(geom::kGpuChunk) == 16);
  CHECK(geom::ilp_index(0, 0, 1, 0) - geom::ilp_index(0, 0, 0, 0) == 1);
  CHECK(geom::ilp_index(0, 0, 0, 1) == geom::kThreads);
}

TEST_CASE("block-strided walk (unscale_and_check): each element once", "[optim][geometry]") {
  for (int64_t len : kOdd) {
    if (len > geom::kGpuChunk) continue;
    auto hits = coverage(len, [&](auto f) {
      for (int t = 0; t < geom::kThreads; ++t)
        for (int64_t i = geom::block_stride_first(0, t); i < len; i += geom::block_stride_step()) f(i);
    });
    INFO("len " << len);
    CHECK(once(hits));
  }
}

TEST_CASE("grid-stride launches: grid sizes and coverage", "[optim][geometry]") {
  CHECK(geom::grid_for(0) == 1);  // a launch needs a block even for nothing (the loop then does nothing)
  CHECK(geom::grid_for(1) == 1);
  CHECK(geom::grid_for(256) == 1);
  CHECK(geom::grid_for(257) == 2);
  CHECK(geom::grid_for(65537) == 257);
  CHECK(geom::grid_for(int64_t{1} << 40) == geom::kMaxGridStride);  // capped: the grid strides
  for (int64_t n : kOdd) {
    const unsigned blocks = geom::grid_for(n);
    auto hits = coverage(n, [&](auto f) {
      for (unsigned b = 0; b < blocks; ++b)
        for (unsigned t = 0; t < geom::kThreads; ++t)
          for (int64_t i = geom::grid_stride_first(b, geom::kThreads, t); i < n;
               i += geom::grid_stride_step(blocks, geom::kThreads))
            f(i);
    });
    INFO("n " << n);
    CHECK(once(hits));
  }
  // A capped grid still covers everything: pretend the cap is 3 blocks over 65537 elements.
  auto hits = coverage(65537, [&](auto f) {
    for (unsigned b = 0; b < 3; ++b)
      for (unsigned t = 0; t < geom::kThreads; ++t)
        for (int64_t i = geom::grid_stride_first(b, geom::kThreads, t); i < 65537; i += geom::grid_stride_step(3, geom::kThreads))
          f(i);
  });
  CHECK(once(hits));
  CHECK(geom::blocks_per_item(0) == 1);
  CHECK(geom::blocks_per_item(1) == 1);
  CHECK(geom::blocks_per_item(128) == 1);
  CHECK(geom::blocks_per_item(129) == 2);
  CHECK(geom::blocks_for_work(3) == 3);
  CHECK_THROWS_AS(geom::blocks_for_work(size_t{1} << 31), std::length_error);
}

TEST_CASE("step and unscale metadata: aligned regions that do not overlap", "[optim][geometry]") {
  for (size_t slots : {size_t{1}, size_t{3}, size_t{17}})
    for (size_t items : {size_t{1}, size_t{5}, size_t{65537}}) {
      const geom::StepMeta m = geom::step_meta(slots, 88, 4, 36, items);
      for (size_t o : {m.consts, m.work, m.amax, m.total}) CHECK(o % geom::kMetaAlign == 0);
      CHECK(m.consts >= slots * 88);
      CHECK(m.work >= m.consts + 4 * 36);
      CHECK(m.amax >= m.work + items * sizeof(geom::WorkItem));
      CHECK(m.total >= m.amax + slots * 3 * sizeof(unsigned));
      const geom::UnscaleMeta u = geom::unscale_meta(slots, 88, items);
      for (size_t o : {u.work, u.partial, u.flag}) CHECK(o % geom::kMetaAlign == 0);
      CHECK(u.partial >= u.work + items * sizeof(geom::WorkItem));
      CHECK(u.flag >= u.partial + items * sizeof(double));
      CHECK(u.total >= u.flag + sizeof(int32_t));
    }
  CHECK(geom::align_up(0, 256) == 0);
  CHECK(geom::align_up(1, 256) == 256);
  CHECK(geom::align_up(256, 256) == 256);
}

TEST_CASE("buffer alignment: bf16/fp16 on 2 bytes, fp32 on 4", "[optim][geometry]") {
  alignas(16) unsigned char buf[32] = {};
  CHECK(geom::aligned_for(buf, DType::F32));
  CHECK(geom::aligned_for(buf + 2, DType::BF16));
  CHECK(geom::aligned_for(buf + 2, DType::F16));
  CHECK_FALSE(geom::aligned_for(buf + 2, DType::F32));
  CHECK_FALSE(geom::aligned_for(buf + 1, DType::BF16));
  CHECK_FALSE(geom::aligned_for(buf + 3, DType::F16));
  CHECK(geom::aligned_for(buf + 4, DType::F32));
  // A bf16 tensor at an odd element offset of a flat buffer is still aligned for its elements; a chunk start
  // (a multiple of 16 Ki elements) keeps the base's alignment at any element size.
  CHECK(geom::aligned_for(reinterpret_cast<uint16_t*>(buf) + 3, DType::BF16));
  CHECK((geom::kGpuChunk * 2) % 256 == 0);
}

TEST_CASE("Newton-Schulz grids: tiles over odd shapes, sums of squares, batch limits", "[optim][geometry]") {
  for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{33}, int64_t{160}})
    for (int64_t cols : {int64_t{1}, int64_t{3}, int64_t{48}, int64_t{65}}) {
      const geom::Grid g = geom::tile_grid(rows, cols, 2);
      CHECK(g.z == 2);
      // Each element (r, c) lies in exactly one tile, and every tile holds at least one element.
      auto hits = coverage(rows * cols, [&](auto f) {
        for (unsigned by = 0; by < g.y; ++by)
          for (unsigned bx = 0; bx < g.x; ++bx)
            for (int ty = 0; ty < geom::kTileRows; ++ty)
              for (int k = ty; k < geom::kTile; k += geom::kTileRows)
                for (int tx = 0; tx < geom::kTile; ++tx) {
                  const int64_t r = geom::tile_origin(by) + k, c = geom::tile_origin(bx) + tx;
                  if (r < rows && c < cols) f(r * cols + c);
                }
      });
      INFO(rows << " x " << cols);
      CHECK(once(hits));
      CHECK(geom::tile_origin(g.x - 1) < cols);
      CHECK(geom::tile_origin(g.y - 1) < rows);
    }
  for (int64_t mn : {int64_t{1}, int64_t{3}, int64_t{65537}, int64_t{4096} * 16384}) {
    const int64_t blocks = geom::sumsq_blocks(mn);
    CHECK(blocks >= 1);
    CHECK(blocks <= geom::kMaxSumsqBlocks);
    if (mn <= 65537) {
      auto hits = coverage(mn, [&](auto f) {
        for (int64_t b = 0; b < blocks; ++b)
          for (unsigned t = 0; t < geom::kThreads; ++t)
            for (int64_t i = geom::sumsq_first(static_cast<unsigned>(b), t); i < mn; i += geom::sumsq_step(blocks)) f(i);
      });
      CHECK(once(hits));
    }
  }
  CHECK(geom::sumsq_grid(65537, 7).y == 7);
  CHECK_THROWS_AS(geom::sumsq_grid(10, 0), std::length_error);
  CHECK_THROWS_AS(geom::tile_grid(10, 10, 65536), std::length_error);
  CHECK_NOTHROW(geom::tile_grid(10, 10, 65535));
}

TEST_CASE("Muon QKV split: the part copies tile the fused matrix", "[optim][geometry]") {
  // 4 query groups of (q 16, k 8, v 8) rows, 3 columns: each part's 2-D copy takes its rows of every group.
  const int64_t cols = 3, groups = 4;
  const std::vector<int64_t> parts = {16, 8, 8};
  const int64_t total = std::accumulate(parts.begin(), parts.end(), int64_t{0});
  auto hits = coverage(groups * total * cols, [&](auto f) {
    int64_t off = 0;
    for (int64_t s : parts) {
      const geom::PartCopy c = geom::qkv_part_copy(cols, total, s, off, groups);
      CHECK(c.width == static_cast<size_t>(s * cols) * sizeof(float));
      CHECK(c.pitch >= c.width);
      CHECK(c.rows == static_cast<size_t>(groups));
      for (size_t r = 0; r < c.rows; ++r)
        for (size_t b = 0; b < c.width / sizeof(float); ++b)
          f(c.src_offset + static_cast<int64_t>(r * c.pitch / sizeof(float) + b));
      off += s;
    }
  });
  CHECK(once(hits));
}

TEST_CASE("Muon duplicated TP by columns: the 2-D copies between the gathered shards and the full matrix",
          "[optim][gpu][geometry]") {
  // The CPU step's loops (muon_cpu.cpp) put shard r's row i at full[i * world * cols + r * cols]; the copies must
  // do the same, every element of both buffers exactly once, for odd sizes too.
  for (auto [rows, cols, world] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 2}, {3, 5, 2}, {7, 1, 4}, {1, 9, 3},
                                   {65, 33, 8}}) {
    INFO(rows << " x " << cols << " x " << world);
    const int64_t n = rows * cols;
    std::vector<float> gathered(static_cast<size_t>(n * world)), full(gathered.size(), -1.0f), back(gathered.size());
    std::iota(gathered.begin(), gathered.end(), 0.0f);
    for (int64_t r = 0; r < world; ++r) {
      const geom::ColumnBlockCopy c = geom::column_block_copy(rows, cols, world, r);
      REQUIRE(c.full_pitch >= c.width);
      REQUIRE(c.shard_pitch >= c.width);
      for (size_t i = 0; i < c.rows; ++i)  // cudaMemcpy2D(full, full_pitch, gathered, shard_pitch, width, rows)
        std::memcpy(full.data() + c.full_offset + static_cast<int64_t>(i * c.full_pitch / sizeof(float)),
                    gathered.data() + c.shard_offset + static_cast<int64_t>(i * c.shard_pitch / sizeof(float)), c.width);
    }
    for (int64_t r = 0; r < world; ++r)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          CHECK(full[static_cast<size_t>(i * world * cols + r * cols + j)] == gathered[static_cast<size_t>(r * n + i * cols + j)]);
    for (int64_t r = 0; r < world; ++r) {  // and back: rank r keeps its own block
      const geom::ColumnBlockCopy c = geom::column_block_copy(rows, cols, world, r);
      for (size_t i = 0; i < c.rows; ++i)
        std::memcpy(back.data() + c.shard_offset + static_cast<int64_t>(i * c.shard_pitch / sizeof(float)),
                    full.data() + c.full_offset + static_cast<int64_t>(i * c.full_pitch / sizeof(float)), c.width);
    }
    CHECK(back == gathered);
  }
}
