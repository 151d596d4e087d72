// The worker (lib/distributed/worker.cpp) under a tight address-space limit (`ulimit -v`, RLIMIT_AS): across the
// band where its start-up, the store, Gloo or the training buffers run out, every job ends with exit 0 or 1,
// never a signal or a hang, and a failure names the limit. The band is found relative to what this build's
// worker needs just to load its libraries (it varies with the build, the libraries and the machine).
#include <catch2/catch.hpp>

#include <new>
#include <regex>
#include <system_error>

#include "proc.h"
#include "util/resources.h"

namespace {

// `argv` under `ulimit -v kib`, waited for `limit` at most.
mrtest::Proc run_limited(long kib, const std::vector<std::string>& argv, const mrtest::TempDir& dir,
                         const std::string& tag, std::chrono::seconds limit,
                         const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> a = {"/bin/sh", "-c", "ulimit -v " + std::to_string(kib) + " && exec \"$0\" \"$@\""};
  a.insert(a.end(), argv.begin(), argv.end());
  std::vector<mrtest::Proc> p = {mrtest::start(a, env, dir, tag)};
  mrtest::wait_all(p, limit);
  return p[0];
}

// The smallest limit (KiB, to 16 MiB) at which the worker loads its libraries and gets to main (its usage
// error, exit 2), with one BLAS thread as megatron-run gives it under a limit.
long load_minimum(const mrtest::TempDir& dir) {
  const std::string worker = std::string(MR_BIN_DIR) + "/megatron-run-worker";
  long lo = 256L << 10, hi = 64L << 20;
  auto loads = [&](long kib) {
    return run_limited(kib, {worker}, dir, "load", std::chrono::seconds(20), {{"OPENBLAS_NUM_THREADS", "1"}})
               .exit_code() == 2;
  };
  if (!loads(hi)) return -1;
  while (hi - lo > (16L << 10)) {
    const long mid = (lo + hi) / 2;
    (loads(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

TEST_CASE("resource failures are named; other exceptions are not", "[worker][ulimit]") {
  CHECK_THAT(mr::util::resource_failure(std::bad_alloc()), Catch::Contains("an allocation failed"));
  CHECK_THAT(mr::util::resource_failure(std::system_error(EAGAIN, std::generic_category(), "thread")),
             Catch::Contains("a thread could not be created"));
  CHECK(mr::util::resource_failure(std::system_error(ECONNREFUSED, std::generic_category(), "x")).empty());
  CHECK(mr::util::resource_failure(std::runtime_error("x")).empty());
}

TEST_CASE("the default job under ulimit -v: exit 0 or 1 with the limit named, never a signal or a hang",
          "[worker][ulimit]") {
  mrtest::TempDir dir;
  const long base = load_minimum(dir);
  INFO("the worker loads from ulimit -v " << base);
  REQUIRE(base > 0);
  const std::vector<std::string> job = {mrtest::megatron_run(), "--config",
                                        std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters", "2",
                                        "--lr-warmup-iters", "1", "--distributed-backend", "gloo"};
  const std::map<std::string, std::string> env = {{"MR_DIST_TIMEOUT_S", "20"}};
  static const std::regex named(R"(error: .*ulimit -v \d+)");
  for (long extra_mib : {-32L, 0L, 32L, 64L, 96L, 128L, 192L, 256L, 1024L}) {
    const long kib = base + extra_mib * 1024;
    mrtest::Proc p = run_limited(kib, job, dir, "job", std::chrono::seconds(25), env);
    const std::string out = p.out() + p.err();
    INFO("ulimit -v " << kib << " (load minimum + " << extra_mib << " MiB): exit " << p.exit_code() << "\n" << out);
    REQUIRE_FALSE(p.timed_out);
    CHECK((p.exit_code() == 0 || p.exit_code() == 1));
    // A failure names the limit; only the dynamic loader's own failure (before any of the worker's code runs)
    // says something else, and says it is a mapping that failed.
    if (p.exit_code() == 1)
      CHECK((std::regex_search(out, named) || out.find("error while loading shared libraries") != std::string::npos));
    if (extra_mib == 1024) CHECK(p.exit_code() == 0);  // a gigabyte above the load minimum is plenty
  }
}
