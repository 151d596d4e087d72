// The CUDA backend's host arithmetic (run/device_plan.h), the shared per-element parts of its reductions
// (run/fixed_point.h, run/checksum_term.h) and the backend choice, checked on the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "optim/launch_geometry.h"
#include "optim/optimizer_table.h"
#include "run/backend.h"
#include "run/cuda_ops.h"
#include "run/device_plan.h"
#include "run/exact_stats.h"

using namespace mr::run;
namespace geom = mr::optim::geom;

namespace {

ParamSpec param(const std::string& name, std::vector<int64_t> shape, ParamSpec::Init init = ParamSpec::Init::Normal) {
  ParamSpec p;
  p.name = p.key = name;
  p.shape = p.full_shape = std::move(shape);
  p.init = init;
  p.no_weight_decay = p.shape.size() == 1;
  p.embedding_or_output = name.rfind("embedding.", 0) == 0;
  return p;
}

ModelPlan small_plan() {
  ModelPlan plan;
  plan.params = {param("embedding.word_embeddings.weight", {37, 8}), param("decoder.layers.0.mlp.linear_fc1.weight", {24, 8}),
                 param("decoder.layers.0.mlp.linear_fc1.bias", {3}, ParamSpec::Init::Zero),
                 param("decoder.final_layernorm.weight", {8}, ParamSpec::Init::One)};
  return plan;
}

// The device reduction of the sums of squares, step by step on the host: grid_for(n) blocks of kThreads threads,
// thread t of block b summing the elements of its grid-stride walk in a U128, the block's threads combined in a
// tree, one partial per block, the partials summed by sum_partials.
Fixed emulated_device_sum(const std::vector<float>& x, double scale) {
  const int64_t n = static_cast<int64_t>(x.size());
  const unsigned blocks = geom::grid_for(n);
  std::vector<U128> partials(blocks);
  for (unsigned b = 0; b < blocks; ++b) {
    std::vector<U128> lane(geom::kThreads);
    for (unsigned t = 0; t < static_cast<unsigned>(geom::kThreads); ++t)
      for (int64_t i = geom::grid_stride_first(b, geom::kThreads, t); i < n; i += geom::grid_stride_step(blocks, geom::kThreads))
        lane[t].add(static_cast<uint64_t>(fixed_square_bits(x[static_cast<size_t>(i)], scale)));
    for (unsigned s = geom::kThreads / 2; s > 0; s >>= 1)
      for (unsigned t = 0; t < s; ++t) lane[t].add(lane[t + s]);
    partials[b] = lane[0];
  }
  return sum_partials(partials);
}

}  // namespace

TEST_CASE("the CUDA backend's device: LOCAL_RANK among the visible devices", "[run][device]") {
  CHECK(device_for_local_rank(0, 8, std::nullopt) == 0);
  CHECK(device_for_local_rank(5, 8, std::nullopt) == 5);
  CHECK(device_for_local_rank(3, 1, std::string("3")) == 0);  // one GPU per process (CUDA_VISIBLE_DEVICES per rank)
  // More ranks than visible GPUs would put two ranks on one GPU: refused, not wrapped around.
  CHECK_THROWS_WITH(device_for_local_rank(9, 8, std::nullopt),
                    Catch::Contains("LOCAL_RANK 9") && Catch::Contains("8 GPUs are visible") &&
                        Catch::Contains("[dist.local-rank-gpu]"));
  CHECK_THROWS_AS(device_for_local_rank(0, 0, std::nullopt), RunError);
  CHECK_THROWS_AS(device_for_local_rank(-1, 4, std::nullopt), RunError);
}

TEST_CASE("the buffers' byte count is what they allocate", "[run][device]") {
  const ModelPlan plan = small_plan();
  using mr::arg::Optimizer;
  const int64_t numel = 37 * 8 + 24 * 8 + 3 + 8, matrix = 24 * 8;  // the fc1 weight: Muon's and Lion's matrix
  struct Case {
    Optimizer opt;
    mr::arg::MuonScalarOptimizer scalar;
    int64_t sq;  // second-moment elements (one rank, no shards): only the parameters whose rule keeps one
  } cases[] = {{Optimizer::adam, mr::arg::MuonScalarOptimizer::adam, numel},
               {Optimizer::sgd, mr::arg::MuonScalarOptimizer::adam, 0},
               {Optimizer::lion, mr::arg::MuonScalarOptimizer::adam, numel - matrix},  // Adam on the rest
               {Optimizer::muon, mr::arg::MuonScalarOptimizer::adam, numel - matrix},
               {Optimizer::muon, mr::arg::MuonScalarOptimizer::lion, 0},  // Lion's one moment on the rest
               {Optimizer::adaptive_muon, mr::arg::MuonScalarOptimizer::adam, numel},  // moment2 on the matrix
               {Optimizer::adaptive_muon, mr::arg::MuonScalarOptimizer::lion, matrix},
               {Optimizer::soap, mr::arg::MuonScalarOptimizer::adam, numel}};  // Adam on the rest, SOAP's two moments
  for (const Case& c : cases) {
    const mr::optim::OptimizerInfo info = mr::optim::optimizer_info(c.opt, c.scalar);
    // fp32; bf16 with fp32 moments; bf16 with the precision-aware optimizer's bf16 first and fp16 second moment and
    // remainders; bf16 with fp8 moments; fp16 with fp16 main params.
    using mr::run::MainStorage;
    const mr::run::BufferDtypes all[] = {
        mr::optim::DType::F32, mr::optim::DType::BF16,
        {mr::optim::DType::BF16, mr::optim::DType::BF16, mr::optim::DType::F16, MainStorage::Remainder},
        {mr::optim::DType::BF16, mr::optim::DType::E4M3, mr::optim::DType::E4M3, MainStorage::F32},
        {mr::optim::DType::F16, mr::optim::DType::F32, mr::optim::DType::F32, MainStorage::F16}};
    for (const mr::run::BufferDtypes& dtypes : all) {
      for (int64_t dp : {1, 3}) {
        FlatBuffers b;
        const bool layer_wise = info.scalar_rule != mr::optim::ScalarRule::None;
        b.set_layout(plan, info, dtypes, {dp > 1, dp, dp - 1, 1, 0, layer_wise}, false);
        b.allocate_host();
        const double allocated = static_cast<double>(b.model.size() + b.main.size() + b.exp_avg.size() + b.exp_avg_sq.size()) +
                                 4.0 * static_cast<double>(b.grad.size() + b.grad_shard.size() + b.target.size() +
                                                           b.kronecker.size());
        INFO("optimizer " << info.name << ", scalar " << static_cast<int>(c.scalar) << ", dtypes "
                           << static_cast<int>(dtypes.model) << static_cast<int>(dtypes.exp_avg)
                           << static_cast<int>(dtypes.exp_avg_sq) << ", dp " << dp);
        // SOAP's step takes scratch for the largest matrix it steps here while it runs; no buffer.
        double work = 0;
        for (size_t k = 0; k < plan.params.size(); ++k)
          if (b.kronecker_at[k] >= 0)
            work = std::max(work, double(mr::optim::soap_work_bytes(plan.params[k].shape[0], plan.params[k].shape[1])));
        CHECK(b.bytes().work == work);
        if (c.opt == Optimizer::soap && dp == 1) CHECK(work >= double(mr::optim::soap_work_bytes(24, 8)));
        CHECK(b.bytes().total() - b.bytes().work == allocated);
        // The CUDA Muon step's scratch (set by the run for the CUDA backend) adds to the work, not to a buffer.
        b.muon_work_bytes = 3 * 1024;
        CHECK(b.bytes().work == work + 3 * 1024);
        CHECK(b.bytes().total() - b.bytes().work == allocated);
        b.muon_work_bytes = 0;
        CHECK(b.numel == numel);
        if (!layer_wise) CHECK(b.padded % dp == 0);  // element shards pad; layer-wise shards own whole params
        CHECK(b.has_main == (dtypes.model != mr::optim::DType::F32));
        CHECK(b.has_exp_avg_sq == (c.sq > 0));
        const size_t w1 = static_cast<size_t>(mr::optim::dtype_size(dtypes.exp_avg));
        const size_t w2 = static_cast<size_t>(mr::optim::dtype_size(dtypes.exp_avg_sq));
        CHECK(b.exp_avg.size() == static_cast<size_t>(b.shard()) * w1);
        if (dp == 1) CHECK(b.exp_avg_sq.size() == static_cast<size_t>(c.sq) * w2);
        // An fp16 or fp8 state has one scale per parameter; none without one. Main params: 4 or 2 bytes per element.
        const bool scaled = mr::optim::scaled_state(dtypes.exp_avg) || mr::optim::scaled_state(dtypes.exp_avg_sq) ||
                            dtypes.main == MainStorage::F16;
        CHECK(b.state_scale.size() == (scaled ? 3 * plan.params.size() : 0));
        if (b.has_main) CHECK(b.main.size() == static_cast<size_t>(b.shard()) * (dtypes.main == MainStorage::F32 ? 4 : 2));
        // Every element of this rank's shard that keeps a second moment has its own place in the packed buffer.
        std::vector<int> hits(b.exp_avg_sq.size() / w2, 0);
        uint8_t* base = b.exp_avg_sq.empty() ? nullptr : b.exp_avg_sq.data();
        b.for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i)
            if (void* at = b.sq_at(base, k, i)) ++hits[static_cast<size_t>(static_cast<uint8_t*>(at) - base) / w2];
        });
        CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<std::ptrdiff_t>(hits.size()));
        b.release_host();
        CHECK(b.model.empty());
        CHECK(b.grad.capacity() == 0);
      }
    }
  }
}

TEST_CASE("rule run.device-memory: the buffers against the device's free memory, with the sizes", "[run][device]") {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  CHECK(device_reserve_bytes(16 * gib) == gib);                // at least 1 GiB
  CHECK(device_reserve_bytes(140 * gib) == 0.05 * 140 * gib);  // else 5% of the device
  BufferBytes need;
  need.model = 2 * gib;
  need.grad = 4 * gib;
  need.main = need.state = 4 * gib;
  need.target = 4 * gib;
  CHECK(need.total() == 18 * gib);
  CHECK(device_memory_refusal(need, 100 * gib, 140 * gib, 1000, 0, "NVIDIA H200").empty());
  CHECK(device_memory_refusal(need, 19 * gib + 1, 20 * gib, 1000, 0, "x").empty());  // 18 + the 1 GiB reserve
  const std::string r = device_memory_refusal(need, 18.5 * gib, 80 * gib, 536870912, 3, "NVIDIA A100-SXM4-80GB, sm_80");
  // The rule id first ("[id] text", printed as error[id]: text), the advice last.
  CHECK_THAT(r, Catch::StartsWith("[run.device-memory] the training run needs 18.00 GiB") &&
                    Catch::EndsWith("or --dry-run") && Catch::Contains("18.00 GiB") &&
                    Catch::Contains("GPU 3 (NVIDIA A100-SXM4-80GB, sm_80)") && Catch::Contains("18.50 GiB of its 80.00 GiB") &&
                    Catch::Contains("536870912 parameters") && Catch::Contains("--dry-run") &&
                    Catch::Contains("--use-distributed-optimizer"));
}

TEST_CASE("the device sums of squares: block partials in 128 bits give the CPU's integer", "[run][device]") {
  std::mt19937_64 rng(5);
  std::lognormal_distribution<float> mag(0.0f, 2.0f);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{255}, int64_t{257}, int64_t{65537}}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = (rng() & 1 ? -1.0f : 1.0f) * mag(rng);
    const int e = fixed_exponent(max_abs(x.data(), n));
    INFO("n = " << n);
    CHECK(emulated_device_sum(x, std::ldexp(1.0, e)) == sum_squares(x.data(), n, e));
    CHECK(reduction_blocks(n) == static_cast<size_t>((n + 255) / 256));
  }
  // Every term near 2^62: the 64-bit words carry (4 terms of 2^62 - 1 already pass 2^64).
  std::vector<float> big(1000, 1.0f);
  const int e = fixed_exponent(1.0);
  const Fixed sum = emulated_device_sum(big, std::ldexp(1.0, e));
  CHECK(sum == sum_squares(big.data(), 1000, e));
  CHECK(sum > (static_cast<Fixed>(1) << 64));
  U128 u;
  u.add(~uint64_t{0});
  u.add(uint64_t{2});
  CHECK(u.hi == 1);
  CHECK(u.lo == 1);
  CHECK(to_fixed(u) == (static_cast<Fixed>(1) << 64) + 1);
  CHECK(reduction_blocks(int64_t{1} << 40) == static_cast<size_t>(geom::kMaxGridStride));
}

TEST_CASE("the checksum term and the host staging of a device buffer's hash", "[run][device]") {
  CHECK(mix64(0) == 0xe220a8397b1dcdafull);  // splitmix64's first output from state 0
  CHECK(checksum_term(7, 3, 0x3f800000u) == mix64(mix64(7 ^ 3) ^ 0x3f800000u));
  // Chunked FNV-1a (the CUDA backend's checksum): the same hash as one pass.
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{64}, size_t{1000}, size_t{4096}}) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t covered = 0;
    for (auto [lo, hi] : byte_chunks(bytes.size(), chunk)) {
      CHECK(lo == covered);
      CHECK(hi - lo <= chunk);
      h = fnv1a(bytes.data() + lo, hi - lo, h);
      covered = hi;
    }
    CHECK(covered == bytes.size());
    CHECK(h == fnv1a(bytes.data(), bytes.size()));
  }
  CHECK(byte_chunks(0, 64).empty());
}

TEST_CASE("the backend is chosen once: nccl -> CUDA, gloo -> CPU", "[run][device]") {
  CHECK(backend_kind(mr::arg::DistributedBackend::nccl) == BackendKind::Cuda);
  CHECK(backend_kind(mr::arg::DistributedBackend::gloo) == BackendKind::Cpu);
  CHECK(std::string(make_cpu_backend()->name()) == "cpu");
  for (int p = 0; p < kPhases; ++p) CHECK(std::string(phase_name(static_cast<Phase>(p))) != "?");
  // Without a GPU (this machine, or a build without CUDA) the CUDA backend is refused with a RunError.
  if (cuda::visible_devices() == 0) CHECK_THROWS_AS(make_cuda_backend(0), RunError);
}
