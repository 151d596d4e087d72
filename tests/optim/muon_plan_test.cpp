// The Muon step's planner (muon_plan.h), on the CPU and without LibTorch: which parameters share a batched
// Newton-Schulz call. The CPU and the CUDA step both take their jobs from it; before it existed the CUDA copy of
// this grouping had drifted (it batched tensor-parallel shards that the CPU orthogonalises across the TP group).
#include <catch2/catch.hpp>

#include <vector>

#include "optim/muon_plan.h"

using namespace mr::optim;

namespace {

// Buffers are never touched by the planner; the checks only want them non-null.
float g_dummy[1];

MuonParam matrix(int64_t rows, int64_t cols, int partition_dim = -1, bool is_qkv = false, int32_t group = 0) {
  MuonParam p;
  p.param = g_dummy, p.grad = g_dummy, p.momentum_buffer = g_dummy;
  p.rows = rows, p.cols = cols, p.partition_dim = partition_dim, p.is_qkv = is_qkv, p.group = group;
  return p;
}

std::vector<std::vector<size_t>> members(const std::vector<MuonJob>& jobs) {
  std::vector<std::vector<size_t>> out;
  for (const MuonJob& j : jobs) out.push_back(j.members);
  return out;
}

using Members = std::vector<std::vector<size_t>>;

}  // namespace

TEST_CASE("Muon planner: batching off gives one job per parameter, in order", "[optim][muon_plan]") {
  std::vector<MuonParam> ps = {matrix(32, 24), matrix(32, 24), matrix(24, 32), matrix(32, 24)};
  MuonOptions o;
  for (int batch : {1, 0, -3}) {
    o.ns_batch_size = batch;
    auto jobs = plan_muon_jobs(ps, o, 1);
    REQUIRE(members(jobs) == Members{{0}, {1}, {2}, {3}});
    for (size_t i = 0; i < jobs.size(); ++i) {
      CHECK(jobs[i].rows == ps[i].rows);
      CHECK(jobs[i].cols == ps[i].cols);
      CHECK_FALSE(jobs[i].batched());
      CHECK_FALSE(jobs[i].split_qkv);
      CHECK(jobs[i].partition_dim == -1);
    }
  }
  CHECK(plan_muon_jobs({}, o, 1).empty());
}

TEST_CASE("Muon planner: same-shape matrices share a job up to ns_batch_size", "[optim][muon_plan]") {
  MuonOptions o;
  o.ns_batch_size = 3;
  SECTION("seven of one shape: 3 + 3 + 1") {
    std::vector<MuonParam> ps(7, matrix(16, 8));
    auto jobs = plan_muon_jobs(ps, o, 1);
    REQUIRE(members(jobs) == Members{{0, 1, 2}, {3, 4, 5}, {6}});
    CHECK(jobs[0].batched());
    CHECK_FALSE(jobs[2].batched());
  }
  SECTION("interleaved shapes: grouped by shape, jobs in the order of their first member") {
    // A B A B A C: rows x cols and cols x rows are different shapes.
    std::vector<MuonParam> ps = {matrix(16, 8), matrix(8, 16), matrix(16, 8), matrix(8, 16), matrix(16, 8),
                                 matrix(16, 16)};
    auto jobs = plan_muon_jobs(ps, o, 1);
    REQUIRE(members(jobs) == Members{{0, 2, 4}, {1, 3}, {5}});
    CHECK(jobs[0].rows == 16);
    CHECK(jobs[0].cols == 8);
    CHECK(jobs[1].rows == 8);
    CHECK(jobs[1].cols == 16);
  }
  SECTION("a full job is closed: later members open the next one of that shape") {
    o.ns_batch_size = 2;
    std::vector<MuonParam> ps = {matrix(4, 4), matrix(4, 4), matrix(2, 4), matrix(4, 4), matrix(4, 4), matrix(4, 4)};
    REQUIRE(members(plan_muon_jobs(ps, o, 1)) == Members{{0, 1}, {2}, {3, 4}, {5}});
  }
  SECTION("parameter groups do not split a batch (lr and weight decay are per member)") {
    std::vector<MuonParam> ps = {matrix(4, 4, -1, false, 0), matrix(4, 4, -1, false, 1)};
    REQUIRE(members(plan_muon_jobs(ps, o, 1)) == Members{{0, 1}});
  }
}

TEST_CASE("Muon planner: split QKV weights are jobs of their own", "[optim][muon_plan]") {
  MuonOptions o;
  o.ns_batch_size = 4;
  std::vector<MuonParam> ps = {matrix(48, 16), matrix(48, 16, -1, true), matrix(48, 16), matrix(48, 16, -1, true)};
  SECTION("split_qkv on") {
    auto jobs = plan_muon_jobs(ps, o, 1);
    REQUIRE(members(jobs) == Members{{0, 2}, {1}, {3}});
    CHECK_FALSE(jobs[0].split_qkv);
    CHECK(jobs[1].split_qkv);
    CHECK(jobs[2].split_qkv);
  }
  SECTION("split_qkv off: a fused QKV weight is a plain matrix") {
    o.split_qkv = false;
    auto jobs = plan_muon_jobs(ps, o, 1);
    REQUIRE(members(jobs) == Members{{0, 1, 2, 3}});
    CHECK_FALSE(jobs[0].split_qkv);
  }
}

// The case the two copies disagreed on: a TP shard whose NS spans the group must not be batched.
TEST_CASE("Muon planner: tensor-parallel shards orthogonalised across the group are not batched",
          "[optim][muon_plan]") {
  MuonOptions o;
  o.ns_batch_size = 8;
  // Two plain matrices, a row-sharded and a column-sharded one, all 32 x 16 on this rank.
  std::vector<MuonParam> ps = {matrix(32, 16), matrix(32, 16, 0), matrix(32, 16), matrix(32, 16, 1)};
  for (MuonTpMode mode : {MuonTpMode::Duplicated, MuonTpMode::Distributed}) {
    o.tp_mode = mode;
    DYNAMIC_SECTION("mode " << static_cast<int>(mode) << ", 2 TP ranks: the shards alone") {
      auto jobs = plan_muon_jobs(ps, o, 2);
      REQUIRE(members(jobs) == Members{{0, 2}, {1}, {3}});
      CHECK(jobs[0].partition_dim == -1);
      CHECK(jobs[1].partition_dim == 0);
      CHECK(jobs[2].partition_dim == 1);
      CHECK(muon_partition_dim(ps[1], o, 2) == 0);
      CHECK(muon_partition_dim(ps[3], o, 2) == 1);
    }
    DYNAMIC_SECTION("mode " << static_cast<int>(mode) << ", one TP rank (or none): a shard is a whole matrix") {
      auto jobs = plan_muon_jobs(ps, o, 1);
      REQUIRE(members(jobs) == Members{{0, 1, 2, 3}});
      CHECK(jobs[0].partition_dim == -1);
      CHECK(muon_partition_dim(ps[1], o, 1) == -1);
    }
  }
  SECTION("auto and layer_sharded: whole matrices without a TP group; auto refused across one") {
    for (MuonTpMode mode : {MuonTpMode::Auto, MuonTpMode::LayerSharded}) {
      o.tp_mode = mode;
      auto jobs = plan_muon_jobs(ps, o, 1);
      REQUIRE(members(jobs) == Members{{0, 1, 2, 3}});  // as duplicated with one TP rank
      CHECK(muon_partition_dim(ps[1], o, 1) == -1);
    }
    o.tp_mode = MuonTpMode::Auto;
    REQUIRE_THROWS_WITH(plan_muon_jobs(ps, o, 2), Catch::Contains("auto with a TP group of 2 ranks is not implemented"));
  }
  SECTION("layer_sharded: the TP-split matrices get home ranks round robin, the rest none") {
    o.tp_mode = MuonTpMode::LayerSharded;
    std::vector<MuonParam> q = {matrix(32, 16, 0), matrix(32, 16), matrix(32, 16, 1), matrix(32, 16, 0),
                                matrix(32, 16, 1)};
    for (int world : {2, 3}) {
      auto jobs = plan_muon_jobs(q, o, world);
      REQUIRE(members(jobs) == Members{{0}, {1}, {2}, {3}, {4}});  // ns_batch_size 8: nothing TP-split batches
      CHECK(jobs[0].home == 0);
      CHECK(jobs[1].partition_dim == -1);
      CHECK(jobs[2].home == 1);
      CHECK(jobs[3].home == 2 % world);
      CHECK(jobs[4].home == 3 % world);
    }
  }
  SECTION("blockwise: every shard is orthogonalised on its own, so shards batch with the rest") {
    o.tp_mode = MuonTpMode::Blockwise;
    auto jobs = plan_muon_jobs(ps, o, 2);
    REQUIRE(members(jobs) == Members{{0, 1, 2, 3}});
    CHECK(jobs[0].partition_dim == -1);
    CHECK(muon_partition_dim(ps[1], o, 2) == -1);
  }
  SECTION("a sharded split-QKV weight keeps both properties") {
    o.tp_mode = MuonTpMode::Duplicated;
    std::vector<MuonParam> q = {matrix(48, 16, 0, true), matrix(48, 16, 0, true)};
    auto jobs = plan_muon_jobs(q, o, 2);
    REQUIRE(members(jobs) == Members{{0}, {1}});
    CHECK(jobs[0].split_qkv);
    CHECK(jobs[0].partition_dim == 0);
  }
  SECTION("an invalid partition_dim is refused where it matters, before any job is formed") {
    o.tp_mode = MuonTpMode::Duplicated;
    std::vector<MuonParam> bad = {matrix(8, 8), matrix(8, 8, 2)};
    REQUIRE_THROWS_WITH(plan_muon_jobs(bad, o, 2), Catch::Contains("partition_dim must be -1, 0 or 1"));
    bad[1].is_qkv = true;  // the split QKV path checks it too
    REQUIRE_THROWS_WITH(plan_muon_jobs(bad, o, 2), Catch::Contains("partition_dim must be -1, 0 or 1"));
    CHECK_NOTHROW(plan_muon_jobs(bad, o, 1));
    o.tp_mode = MuonTpMode::Blockwise;
    CHECK_NOTHROW(plan_muon_jobs(bad, o, 2));
  }
}

TEST_CASE("Muon planner: parameter checks name the parameter", "[optim][muon_plan]") {
  std::vector<GroupHyper> groups = {{0.01, 0.0, 1}, {0.02, 0.1, 1}};
  std::vector<MuonParam> ps = {matrix(4, 4, -1, false, 1), matrix(4, 4)};
  CHECK_NOTHROW(check_muon_params(ps, groups));
  ps[1].group = 2;
  CHECK_THROWS_WITH(check_muon_params(ps, groups), "muon step: param 1: group out of range");
  ps[1].group = -1;
  CHECK_THROWS_WITH(check_muon_params(ps, groups), "muon step: param 1: group out of range");
  ps[1].group = 0;
  ps[0].cols = 0;
  CHECK_THROWS_WITH(check_muon_params(ps, groups), "muon step: param 0: needs a 2-D param, grad and momentum");
  ps[0].cols = 4;
  ps[0].momentum_buffer = nullptr;
  CHECK_THROWS_WITH(check_muon_params(ps, groups), "muon step: param 0: needs a 2-D param, grad and momentum");
}

TEST_CASE("Muon device work: the CUDA step's scratch areas, each at its largest job", "[optim][muon_plan]") {
  MuonOptions o;
  o.ns.precision = MatmulPrecision::Highest;  // fp32 GEMMs: 4-byte iterates
  // One 32 x 24 matrix, worked on transposed (24 x 32): updates and their orthogonalised values (768 floats each),
  // two iterates of 768 and A, B of 24 x 24 floats, 3 blocks' double partial sums, one norm.
  const int64_t one = 2 * 768 * 4 + 2 * 768 * 4 + 2 * 576 * 4 + 3 * 8 + 4;
  {
    MuonDeviceWork w;
    std::vector<MuonParam> ps = {matrix(32, 24)};
    w.add(ps, o, 1);
    CHECK(w.bytes() == one);
    // A smaller job and the same step again leave every area as it is: the areas are reused, not summed.
    std::vector<MuonParam> more = {matrix(32, 24), matrix(8, 8), matrix(24, 32)};
    w.add(more, o, 1);
    w.add(ps, o, 1);
    CHECK(w.bytes() == one);
  }
  {
    // Two of them batched (--muon-ns-batch-size 2), bf16 GEMMs (medium precision): everything NS holds per matrix
    // twice, its iterates and Gram matrices in 2-byte elements.
    MuonOptions b = o;
    b.ns_batch_size = 2;
    b.ns.precision = MatmulPrecision::Medium;
    MuonDeviceWork w;
    std::vector<MuonParam> ps = {matrix(32, 24), matrix(32, 24)};
    w.add(ps, b, 1);
    CHECK(w.bytes() == 2 * (2 * 768 * 4) + 2 * (2 * 768 * 2) + 2 * (2 * 576 * 2) + 2 * 3 * 8 + 2 * 4);
  }
  {
    // Duplicated TP mode, 2 ranks, a 16 x 8 shard split by columns: the gathered shards, the whole 16 x 16 matrix
    // and its orthogonalised copy (1 KiB each), NS on the whole matrix.
    MuonDeviceWork w;
    std::vector<MuonParam> ps = {matrix(16, 8, /*partition_dim=*/1)};
    w.add(ps, o, 2);
    CHECK(w.bytes() == 2 * 128 * 4 + 3 * 1024 + 2 * 256 * 4 + 2 * 256 * 4 + 8 + 4);
  }
  {
    // Distributed TP mode, bf16: NS on the shard itself (split by rows: transposed, 8 x 16), plus the summed norm and
    // the fp32 Gram matrix it all-reduces (8 x 8 floats).
    MuonOptions d = o;
    d.tp_mode = MuonTpMode::Distributed;
    d.ns.precision = MatmulPrecision::Medium;
    MuonDeviceWork w;
    std::vector<MuonParam> ps = {matrix(16, 8, /*partition_dim=*/0)};
    w.add(ps, d, 2);
    CHECK(w.bytes() == 2 * 128 * 4 + 2 * 128 * 2 + 2 * 64 * 2 + 8 + 4 + 4 + 64 * 4);
  }
}
