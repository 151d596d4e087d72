// The flat buffers' layout (run/buffers.h): the distributed optimizer's shards of the dense part over the
// data-parallel group and of the routed experts over the expert data-parallel group.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/optimizer_table.h"
#include "run/buffers.h"
#include "run/checkpoint_io.h"

using namespace mr::run;

namespace {

ParamSpec param(const std::string& name, std::vector<int64_t> shape, bool expert = false) {
  ParamSpec p;
  p.name = p.key = name;
  p.shape = p.full_shape = std::move(shape);
  p.expert = expert;
  return p;
}

// Dense 37 x 8, 24 x 8, 5; routed experts 3 x 7 and 2 x 3 x 5 (odd sizes, so that every shard is padded).
ModelPlan moe_plan() {
  ModelPlan plan;
  plan.params = {param("embedding.word_embeddings.weight", {37, 8}), param("decoder.layers.0.mlp.linear_fc1.weight", {24, 8}),
                 param("decoder.final_layernorm.weight", {5}),
                 param("decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight", {3, 7}, true),
                 param("decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight", {3, 5}, true)};
  return plan;
}

FlatBuffers layout(const ModelPlan& plan, ShardGroups g) {
  FlatBuffers b;
  b.set_layout(plan, mr::optim::optimizer_info(mr::arg::Optimizer::adam), mr::optim::DType::BF16, g, false);
  return b;
}

}  // namespace

TEST_CASE("without the distributed optimizer the shard is the whole buffer, experts right after the dense part",
          "[run][buffers]") {
  const FlatBuffers b = layout(moe_plan(), {});
  CHECK(b.dense_end == 37 * 8 + 24 * 8 + 5);
  CHECK(b.expert_begin == b.dense_end);
  CHECK(b.numel == b.dense_end + 21 + 15);
  CHECK(b.padded == b.numel);
  CHECK(b.lo == 0);
  CHECK(b.hi == b.numel);
  CHECK(b.shard() == b.numel);
  CHECK(b.scattered() == 0);
  CHECK(b.offset[3] == b.dense_end);
  float grad[1] = {};
  CHECK(b.grad_at(grad, nullptr, 0) == grad);
}

TEST_CASE("the distributed optimizer: every element of each part in exactly one rank's shard, back to back",
          "[run][buffers]") {
  const ModelPlan plan = moe_plan();
  const int64_t dense = 37 * 8 + 24 * 8 + 5, experts = 21 + 15;
  for (auto [dp, edp] : {std::pair<int64_t, int64_t>{3, 2}, {2, 1}, {4, 4}, {2, 3}}) {
    INFO("dp " << dp << ", expert dp " << edp);
    // Rank r of the data-parallel group is rank r % edp of its expert data-parallel group (any mapping works).
    std::vector<int> dense_owner(static_cast<size_t>(dense), 0), expert_owner(static_cast<size_t>(experts), 0);
    for (int64_t r = 0; r < dp; ++r) {
      const FlatBuffers b = layout(plan, {true, dp, r, edp, r % edp});
      CHECK(b.dense_end == dense);
      CHECK(b.expert_begin % dp == 0);
      CHECK(b.expert_begin >= dense);
      CHECK(b.numel == b.expert_begin + experts);
      CHECK(b.offset[3] == b.expert_begin);
      CHECK(b.offset[4] == b.expert_begin + 21);
      CHECK(b.hi - b.lo == b.expert_begin / dp);
      CHECK(b.experts_scattered == (edp > 1));
      if (edp > 1) {
        CHECK((b.padded - b.expert_begin) % edp == 0);
        CHECK(b.ehi - b.elo == (b.padded - b.expert_begin) / edp);
        CHECK(b.scattered() == b.shard());
      } else {
        CHECK(b.elo == b.expert_begin);  // a group of one: this rank's block is all the experts
        CHECK(b.ehi == b.numel);
        CHECK(b.scattered() == b.hi - b.lo);
      }
      // The pieces: inside the parameters and the shard; a piece's gradient in the scattered shard, or in the
      // gradient buffer for experts that are not scattered.
      std::vector<float> grad(static_cast<size_t>(b.padded)), shard(static_cast<size_t>(b.scattered()));
      std::vector<int> local_seen(static_cast<size_t>(b.shard()), 0);
      b.for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
        CHECK(lo >= b.offset[k]);
        CHECK(hi <= b.offset[k] + plan.params[k].numel());
        for (int64_t i = lo; i < hi; ++i) {
          REQUIRE(b.local(i) >= 0);
          REQUIRE(b.local(i) < b.shard());
          ++local_seen[static_cast<size_t>(b.local(i))];
          const float* g = b.grad_at(grad.data(), shard.data(), i);
          if (i < b.expert_begin || b.experts_scattered) {
            CHECK(g == shard.data() + b.local(i));
          } else {
            CHECK(g == grad.data() + i);
          }
          if (i < b.expert_begin) ++dense_owner[static_cast<size_t>(i)];
          // One expert data-parallel group: ranks 0 .. edp-1 (rank r is its member r % edp).
          else if (r < edp) ++expert_owner[static_cast<size_t>(i - b.expert_begin)];
        }
      });
      for (int n : local_seen) CHECK(n <= 1);  // padding is in no piece
    }
    for (int n : dense_owner) CHECK(n == 1);
    if (edp <= dp)
      for (int n : expert_owner) CHECK(n == 1);
  }
}

TEST_CASE("the distributed optimizer without experts: the dense part's padding is not counted in numel",
          "[run][buffers]") {
  ModelPlan plan = moe_plan();
  plan.params.resize(3);
  const FlatBuffers b = layout(plan, {true, 4, 3, 1, 0});
  CHECK(b.numel == 37 * 8 + 24 * 8 + 5);
  CHECK(b.padded == (b.numel + 3) / 4 * 4);
  CHECK(b.expert_begin == b.padded);
  CHECK(b.elo == b.ehi);
  CHECK(b.shard() == b.padded / 4);
  CHECK(b.hi == b.padded);
}

TEST_CASE("the layer-wise distributed optimizer (Muon): whole parameters, a contiguous run per rank",
          "[run][buffers]") {
  ModelPlan plan = moe_plan();
  plan.params.resize(3);  // dense only
  plan.params.push_back(param("decoder.layers.1.mlp.linear_fc2.weight", {8, 24}));
  plan.params.push_back(param("decoder.layers.1.mlp.linear_fc2.bias", {8}));
  for (int64_t dp : {1, 2, 3, 4, 7}) {
    INFO("dp " << dp);
    std::vector<int> owner(plan.params.size(), 0);
    int64_t next = 0;
    for (int64_t r = 0; r < dp; ++r) {
      ShardGroups g{true, dp, r, 1, 0, true};
      const FlatBuffers b = layout(plan, g);
      CHECK(b.layer_wise);
      CHECK(b.padded == b.numel);  // no padding
      CHECK(b.scattered() == 0);   // gradients all-reduced, not scattered
      CHECK(b.lo == next);         // the runs follow each other
      REQUIRE(b.bounds.size() == static_cast<size_t>(dp) + 1);
      CHECK(b.bounds[static_cast<size_t>(r)] == b.lo);
      CHECK(b.bounds[static_cast<size_t>(r) + 1] == b.hi);
      next = b.hi;
      std::vector<float> grad(static_cast<size_t>(b.padded));
      b.for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
        CHECK(lo == b.offset[k]);  // whole parameters
        CHECK(hi == b.offset[k] + plan.params[k].numel());
        CHECK(b.local(lo) == lo - b.lo);
        CHECK(b.grad_at(grad.data(), nullptr, lo) == grad.data() + lo);
        ++owner[k];
      });
    }
    CHECK(next == layout(plan, {}).numel);
    for (int n : owner) CHECK(n == 1);
  }
  // Routed experts: whole expert matrices in runs over the expert data-parallel group, after the dense part (no
  // padding); their gradients stay in the gradient buffer (all-reduced).
  const ModelPlan moe = moe_plan();
  for (auto [dp, edp] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {2, 1}, {3, 3}}) {
    INFO("dp " << dp << ", expert dp " << edp);
    std::vector<int> owner(moe.params.size(), 0);
    for (int64_t r = 0; r < dp; ++r) {
      const FlatBuffers b = layout(moe, {true, dp, r, edp, r % edp, true});
      CHECK(b.expert_begin == b.dense_end);
      CHECK_FALSE(b.experts_scattered);
      REQUIRE(b.expert_bounds.size() == static_cast<size_t>(edp) + 1);
      CHECK(b.expert_bounds.front() == b.expert_begin);
      CHECK(b.expert_bounds.back() == b.numel);
      std::vector<float> grad(static_cast<size_t>(b.padded));
      int64_t next_local = 0;
      b.for_each_piece(moe, [&](size_t k, int64_t lo, int64_t hi) {
        CHECK(lo == b.offset[k]);
        CHECK(hi == b.offset[k] + moe.params[k].numel());
        CHECK(b.local(lo) == next_local);  // the shard's state: this rank's dense run, then its experts
        next_local += hi - lo;
        CHECK(b.grad_at(grad.data(), nullptr, lo) == grad.data() + lo);
        // Count the dense part over the data-parallel group, the experts over one expert group (ranks 0 .. edp-1).
        if (!moe.params[k].expert || r < edp) ++owner[k];
      });
      CHECK(next_local == b.shard());
    }
    for (int n : owner) CHECK(n == 1);
  }
}

TEST_CASE("rows split over TP part by part (Mamba's in_proj, conv1d): every element of the whole tensor on exactly "
          "one rank, in its part's slice, and the checkpoint blocks say the same",
          "[run][buffers]") {
  const std::vector<int64_t> parts = {8, 8, 4, 4, 2};  // z, x, B, C, dt (whole sizes)
  for (const std::vector<int64_t>& rest : {std::vector<int64_t>{}, std::vector<int64_t>{3}, std::vector<int64_t>{1, 4}}) {
    for (int64_t tp : {1, 2}) {
      ParamSpec p;
      p.name = p.key = "decoder.layers.0.mixer.in_proj.weight";
      p.full_shape = {26};
      p.full_shape.insert(p.full_shape.end(), rest.begin(), rest.end());
      p.shape = p.full_shape;
      p.shape[0] = 26 / tp;
      p.split_dim = 0;
      p.split_parts = parts;
      int64_t inner = 1;
      for (int64_t d : rest) inner *= d;
      std::vector<int> seen(static_cast<size_t>(26 * inner), 0);
      for (int64_t r = 0; r < tp; ++r) {
        // Local row 0 is the rank's first row of z, local row 26 / tp - 1 its last of dt.
        CHECK(global_index(p, r, 0) == r * (8 / tp) * inner);
        CHECK(global_index(p, r, p.numel() - 1) == (24 + (r + 1) * (2 / tp)) * inner - 1);
        for (int64_t i = 0; i < p.numel(); ++i) ++seen[static_cast<size_t>(global_index(p, r, i))];
        // The checkpoint's blocks (run/checkpoint_io.h) place each local element where global_index does.
        for (const ShardBlock& b : blocks_of(p, r))
          for (int64_t i = b.flat_lo; i < b.flat_hi; ++i) {
            const int64_t in_block = i - b.flat_lo;
            const int64_t g = (b.offset[0] + in_block / inner) * inner + in_block % inner;
            CHECK(g == global_index(p, r, i));
          }
      }
      INFO("tp " << tp << " rest " << rest.size());
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(seen.size()));
    }
  }
}

TEST_CASE("initial values: normal with the parameter's std (its own, else --init-method-std); a std of 0 gives zeros "
          "and targets 0.02 away",
          "[run][buffers][init]") {
  ModelPlan plan;
  plan.params = {param("decoder.layers.0.mlp.linear_fc1.weight", {64, 32})};
  const FlatBuffers b = layout(plan, {});
  const ParamSpec& p = plan.params[0];
  auto values = [&](const ParamSpec& q, double std) {
    std::vector<float> init(static_cast<size_t>(q.numel())), target(init.size());
    b.initial_values(q, 1234, std, 0, [&](int64_t i, float v, float t) {
      init[static_cast<size_t>(i)] = v;
      target[static_cast<size_t>(i)] = t;
    });
    return std::pair{init, target};
  };
  auto rms = [](const std::vector<float>& v, const std::vector<float>& minus) {
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += (double(v[i]) - minus[i]) * (double(v[i]) - minus[i]);
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  const std::vector<float> zeros(static_cast<size_t>(p.numel()), 0.0f);
  const auto [i02, t02] = values(p, 0.02);
  CHECK(rms(i02, zeros) == Approx(0.02).epsilon(0.1));
  CHECK(rms(t02, i02) == Approx(0.02).epsilon(0.1));
  // std 0: zero matrices, as torch's normal_(std=0); the targets keep the default's distance (the same one).
  const auto [i0, t0] = values(p, 0.0);
  CHECK(i0 == zeros);
  CHECK(rms(t0, i0) == Approx(rms(t02, i02)).epsilon(1e-3));
  // The parameter's own std (--embedding-init-method-std) wins over the run's.
  ParamSpec own = p;
  own.init_std = 0.5;
  const auto [i5, t5] = values(own, 0.02);
  CHECK(rms(i5, zeros) == Approx(0.5).epsilon(0.1));
  CHECK(i5 == values(p, 0.5).first);
}

namespace {

double host_copy_bytes(const FlatBuffers& b) {
  return static_cast<double>(b.model.size() + b.main.size() + b.exp_avg.size() + b.exp_avg_sq.size()) +
         4.0 * static_cast<double>(b.grad.size() + b.grad_shard.size() + b.target.size() + b.state_scale.size() +
                                   b.kronecker.size());
}

}  // namespace

// Review gpu31 finding 4: the CUDA backend's checkpoint copy (Backend::to_host) took every buffer to the host, the
// gradients and the targets too, unchecked. Now only what checkpoint_io reads and writes, counted by
// checkpoint_host_bytes and checked by rule run.host-memory.
TEST_CASE("the checkpoint's host copy: the model, main params, moments, scales and preconditioners only, as counted",
          "[run][buffers][checkpoint]") {
  using mr::optim::DType;
  struct Layout {
    const char* what;
    mr::arg::Optimizer opt;
    BufferDtypes dtypes;
    ShardGroups shards;
  };
  const std::vector<Layout> layouts = {
      {"adam fp32", mr::arg::Optimizer::adam, DType::F32, {}},
      {"adam bf16, distributed optimizer, DP rank 1 of 2", mr::arg::Optimizer::adam, DType::BF16, {true, 2, 1, 2, 1}},
      {"precision-aware: bf16 and fp16 moments, remainders", mr::arg::Optimizer::adam,
       BufferDtypes(DType::BF16, DType::BF16, DType::F16, MainStorage::Remainder), {true, 2, 0, 2, 0}},
      {"muon bf16 (no second moment for its matrices)", mr::arg::Optimizer::muon, DType::BF16, {}},
      {"soap (preconditioners)", mr::arg::Optimizer::soap, DType::F32, {}},
  };
  for (const Layout& l : layouts) {
    INFO(l.what);
    FlatBuffers b;
    b.set_layout(moe_plan(), mr::optim::optimizer_info(l.opt), l.dtypes, l.shards, false);
    b.allocate_checkpoint_host();
    CHECK(b.grad.empty());
    CHECK(b.grad_shard.empty());
    CHECK(b.target.empty());
    CHECK(!b.model.empty());
    CHECK(host_copy_bytes(b) == b.checkpoint_host_bytes());
    // Everything bytes() counts but the gradients, the targets and the step's scratch (bytes() leaves the scales out).
    const BufferBytes all = b.bytes();
    CHECK(b.checkpoint_host_bytes() ==
          all.model + all.main + all.state + 4.0 * static_cast<double>(b.scales()));
    if (l.opt == mr::arg::Optimizer::soap) CHECK(!b.kronecker.empty());
    b.release_host();
    CHECK(b.model.empty());
  }
}

TEST_CASE("the checkpoint's host copy is checked against this machine's memory (run.host-memory), naming its bytes",
          "[run][buffers][checkpoint]") {
  FlatBuffers b;
  b.set_layout(moe_plan(), mr::optim::optimizer_info(mr::arg::Optimizer::adam), mr::optim::DType::F32, {}, false);
  const std::string bytes = std::to_string(static_cast<uint64_t>(b.checkpoint_host_bytes()));
  ::setenv("MR_RUN_MEM_AVAILABLE_BYTES", "1000", 1);
  ::setenv("LOCAL_WORLD_SIZE", "8", 1);
  std::string err;
  try {
    b.check_checkpoint_memory("the checkpoint's host copy (--save, --load on the cuda backend)");
  } catch (const RunError& e) {
    err = e.what();
  }
  CHECK_THAT(err, Catch::Contains("run.host-memory"));
  CHECK_THAT(err, Catch::Contains("--save, --load"));
  CHECK_THAT(err, Catch::Contains("(" + bytes + " bytes"));
  CHECK_THAT(err, Catch::Contains("each of the 8 ranks"));
  // Enough for all eight ranks' copies: no refusal (the gradients and targets are not counted).
  ::setenv("MR_RUN_MEM_AVAILABLE_BYTES", std::to_string(9 * b.checkpoint_host_bytes() / 0.9).c_str(), 1);
  CHECK_NOTHROW(b.check_checkpoint_memory("--save"));
  ::unsetenv("MR_RUN_MEM_AVAILABLE_BYTES");
  ::unsetenv("LOCAL_WORLD_SIZE");
}
