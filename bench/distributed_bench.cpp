// dist.*: our collective API against the raw c10d call it wraps, in the same run.
//
// gloo.allreduce_256mb: an all-reduce (sum) of 256 MB of float32 between 2 local ranks (two threads of this
// process, each a rank with its own store connection, over loopback). Ours: mr::distributed::Runtime's "dp" group
// (Group::all_reduce -> GlooCommunicator); raw: c10d::ProcessGroupGloo::allreduce on a second, identically
// configured process group. The two alternate (in alternating order), iteration by iteration; the figure is
// the best time of each.
// ratio = raw time / our time (1.0: our layer adds nothing). --quick: 64 MB, fewer iterations.
// Compiled empty unless this target links mr_distributed (which defines MR_HAVE_DIST_RUNTIME for its users).
#ifdef MR_HAVE_DIST_RUNTIME
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <thread>

#include "bench.h"
#include "distributed/runtime.h"
#include "launch/free_port.h"
#include "launch/spawn.h"
#include "util/log.h"

namespace mr::bench {
namespace {

struct Times {
  double ours = 1e300, raw = 1e300;
};

void rank_main(int rank, int port, size_t floats, int iters, Times& out) {
  distributed::RuntimeOptions o;
  o.launch.rank = rank;
  o.launch.world_size = 2;
  o.launch.local_rank = rank;
  o.launch.local_world_size = 2;
  o.launch.master_addr = "127.0.0.1";
  o.launch.master_port = port;
  o.layout.tp = 1;
  o.backend = arg::DistributedBackend::gloo;
  o.timeout = std::chrono::minutes(5);
  distributed::Runtime rt(o);
  distributed::Group& dp = rt.group("dp");

  // The raw process group: same store server (rank 0's), its own key prefix, same Gloo options as ours.
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = std::chrono::minutes(5);
  auto tcp = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto store = c10::make_intrusive<c10d::PrefixStore>("bench/raw", tcp);
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::minutes(5));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, opts);

  std::vector<float> buf(floats, 0.0f);
  std::vector<at::Tensor> t{at::from_blob(buf.data(), {static_cast<int64_t>(floats)}, at::kFloat)};
  auto ours = [&] { dp.all_reduce(distributed::Buffer::cpu(buf.data(), buf.size()), distributed::ReduceOp::Sum); };
  auto raw = [&] { pg->allreduce(t)->wait(); };
  auto timed = [](auto&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i <= iters; ++i) {  // iteration 0 warms both up; the order alternates (cache effects)
    double a = 0, b = 0;
    if (i % 2) {
      b = timed(raw);
      a = timed(ours);
    } else {
      a = timed(ours);
      b = timed(raw);
    }
    if (i == 0) continue;
    out.ours = std::min(out.ours, a);
    out.raw = std::min(out.raw, b);
  }
  pg.reset();
  rt.finish();
}

MR_BENCHMARK("gloo.allreduce_256mb", [](const Options& o) {
  log::init(log::Level::warning);
  const size_t bytes = o.quick ? (64u << 20) : (256u << 20);
  const int iters = o.quick ? 4 : 20;
  const int port = launch::free_port();
  Times t0, t1;
  std::exception_ptr err;
  auto guarded = [&](int rank, Times& t) {
    try {
      rank_main(rank, port, bytes / sizeof(float), iters, t);
    } catch (...) {
      err = std::current_exception();
    }
  };
  std::thread a(guarded, 0, std::ref(t0)), b(guarded, 1, std::ref(t1));
  a.join();
  b.join();
  if (err) std::rethrow_exception(err);
  Result r;
  r.value = t0.ours * 1e3;
  r.unit = "ms";
  r.baseline = "raw ProcessGroupGloo::allreduce";
  r.baseline_value = t0.raw * 1e3;
  r.ratio = t0.raw / t0.ours;
  r.target = ratio_at_least(0.95);
  // Details go to stderr: stdout is the runner's (a table, or with --json one JSON document).
  std::fprintf(stderr, "  gloo.allreduce: %zu MB, 2 ranks: ours %.1f ms (%.2f GB/s bus bandwidth), raw %.1f ms (%.2f GB/s)\n",
              bytes >> 20, t0.ours * 1e3, static_cast<double>(bytes) / t0.ours / 1e9, t0.raw * 1e3,
              static_cast<double>(bytes) / t0.raw / 1e9);
  return r;
});

}  // namespace
}  // namespace mr::bench

#endif  // MR_HAVE_DIST_RUNTIME
