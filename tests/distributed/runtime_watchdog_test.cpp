// The heartbeat watchdog: a rank that stops (SIGSTOP) mid-run fails the job within the heartbeat timeout, not
// after the collective timeout, and the error names it. 4 CPU ranks on loopback, looping over collectives.
// Every test is bounded (mrtest::wait_all kills what is left; KillOnExit kills the stopped rank).
#include <catch2/catch.hpp>

#include <set>

#include "proc.h"

using mrtest::Proc;
using mrtest::TempDir;

namespace {

constexpr int kBound = 3;   // seconds: the heartbeat timeout these tests run with (heartbeat 0.5 s)
constexpr int kSlack = 15;  // seconds on top of the bound for a loaded 2-core machine

// Every rank has built its groups (MR_DIST_REPORT's ready files).
bool all_ready(const TempDir& dir, int world) {
  for (int r = 0; r < world; ++r)
    if (!std::filesystem::exists(dir / ("report." + std::to_string(r) + ".ready"))) return false;
  return true;
}

}  // namespace

TEST_CASE("a stopped rank (SIGSTOP) fails the job within the heartbeat timeout, named", "[dist][process][heartbeat]") {
  for (int victim : {2, 0}) {  // an ordinary rank, and rank 0 (whose stopped process also holds the store)
    DYNAMIC_SECTION("stop rank " << victim) {
      TempDir dir;
      // The collective timeout (60 s) is far above the bound: only the watchdog can stop the job in time.
      std::vector<Proc> procs = mrtest::start_job(4, mrtest::bring_up_args({"--tensor-model-parallel-size", "2"}), dir,
                                                  {{"MR_DIST_REPORT", dir / "report."},
                                                   {"MR_DIST_SELFCHECK_SECONDS", "120"},
                                                   {"MR_DIST_HEARTBEAT_TIMEOUT_S", std::to_string(kBound)}});
      mrtest::KillOnExit cleanup;
      for (const Proc& p : procs) cleanup.pids.push_back(p.pid);
      REQUIRE(mrtest::wait_for([&] { return all_ready(dir, 4); }, std::chrono::seconds(120)));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // well inside the collective loop
      Proc& stopped = procs[static_cast<size_t>(victim)];
      REQUIRE(kill(stopped.pid, SIGSTOP) == 0);
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Proc> others;
      for (const Proc& p : procs)
        if (p.rank != victim) others.push_back(p);
      mrtest::wait_all(others, std::chrono::seconds(kBound + kSlack + 30));
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      kill(stopped.pid, SIGKILL);
      std::vector<Proc> rest = {stopped};
      mrtest::wait_all(rest, std::chrono::seconds(10));
      INFO(mrtest::all_output(others) << "took " << took << " s");
      for (const Proc& p : others) {
        CHECK_FALSE(p.timed_out);
        CHECK(p.exit_code() == 1);
        CHECK_THAT(p.err(), Catch::Contains("rank " + std::to_string(victim)));
      }
      if (victim == 0)  // the store's host: the others find the store silent
        CHECK_THAT(others[0].err(), Catch::Contains("has not answered") && Catch::Contains("rank 0, which hosts it"));
      else  // a watcher names the rank, the others stop with its verdict (rank 0 keeps the store up until they read it)
        CHECK_THAT(mrtest::all_output(others), Catch::Contains("rank 2 (pid " + std::to_string(stopped.pid)) &&
                                                   Catch::Contains("stopped sending heartbeats") &&
                                                   Catch::Contains(", MR_DIST_HEARTBEAT_TIMEOUT_S)") &&
                                                   !Catch::Contains("probably died"));
      CHECK(took < kBound + kSlack);
      CHECK(took > kBound - 1);  // not before the bound: the watchdog waits for it
    }
  }
}

TEST_CASE("megatron-run --nproc-per-node 4 with a stopped worker: the launcher fails and no worker is left",
          "[dist][process][heartbeat][spawn]") {
  TempDir dir;
  std::vector<std::string> argv = {mrtest::megatron_run(), "--nproc-per-node", "4", "--heartbeat-timeout",
                                   std::to_string(kBound)};
  for (const std::string& a : mrtest::bring_up_args({"--tensor-model-parallel-size", "2"})) argv.push_back(a);
  std::vector<Proc> p = {mrtest::start(argv,
                                       {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}, {"MR_DIST_TIMEOUT_S", "60"},
                                        {"MR_DIST_HEARTBEAT_S", "0.5"}, {"MR_DIST_SELFCHECK_SECONDS", "120"},
                                        {"MR_DIST_REPORT", dir / "report."}},
                                       dir, "spawn")};
  mrtest::KillOnExit cleanup;
  cleanup.pids.push_back(p[0].pid);
  REQUIRE(mrtest::wait_for([&] { return all_ready(dir, 4); }, std::chrono::seconds(120)));
  std::vector<pid_t> workers = mrtest::workers_of(p[0].pid);
  REQUIRE(workers.size() == 4);
  cleanup.pids.insert(cleanup.pids.end(), workers.begin(), workers.end());
  pid_t victim = -1;
  for (pid_t w : workers)
    if (mrtest::env_of(w, "RANK") == "2") victim = w;
  REQUIRE(victim > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(kill(victim, SIGSTOP) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  mrtest::wait_all(p, std::chrono::seconds(kBound + kSlack + 30));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(p[0].out() << p[0].err() << "took " << took << " s");
  CHECK_FALSE(p[0].timed_out);
  CHECK(p[0].exit_code() == 1);  // the first worker to fail exited 1 with the verdict
  CHECK_THAT(p[0].err(), Catch::Contains("rank 2 (pid " + std::to_string(victim)) &&
                             Catch::Contains("stopped sending heartbeats"));
  CHECK(took < kBound + kSlack);
  // The stopped worker got SIGTERM and SIGCONT: nothing is left once the launcher is gone.
  for (pid_t w : workers) CHECK(mrtest::wait_for([&] { return mrtest::gone(w); }, std::chrono::seconds(5)));
}
