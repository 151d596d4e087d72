// The diagnosis of a failed collective (lib/distributed/runtime_diagnosis.cpp): a rank killed mid-collective (an
// ordinary rank, rank 0 which hosts the store, and one while another is stalled) makes every other rank exit non-zero
// naming it. 4 CPU ranks on loopback; every test has a hard timeout (mrtest::wait_all kills what is left).
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "proc.h"

using mrtest::Proc;
using mrtest::TempDir;

TEST_CASE("a rank killed mid-collective: every other rank exits non-zero naming it", "[dist][process][fault]") {
  // An ordinary rank, rank 0 (which hosts the store), and an ordinary rank while another is stalled for 5 s (as
  // a loaded machine can starve it): the stalled rank must still read the verdict, not find the store gone.
  struct Case {
    int victim, stalled;
  };
  for (Case c : {Case{2, -1}, Case{0, -1}, Case{2, 1}}) {
    const int victim = c.victim;
    DYNAMIC_SECTION("kill rank " << victim << (c.stalled < 0 ? "" : " while rank 1 is stopped for 5 s")) {
      TempDir dir;
      std::vector<Proc> procs = mrtest::start_job(4, mrtest::bring_up_args({"--tensor-model-parallel-size", "2"}), dir,
                                                  {{"MR_DIST_REPORT", dir / "report."},
                                                   {"MR_DIST_SELFCHECK_SECONDS", "120"}});
      // Wait until every rank has built its groups and is looping over collectives.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      auto ready = [&] {
        for (int r = 0; r < 4; ++r)
          if (!std::filesystem::exists(dir / ("report." + std::to_string(r) + ".ready"))) return false;
        return true;
      };
      while (!ready() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      REQUIRE(ready());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (c.stalled >= 0) kill(procs[static_cast<size_t>(c.stalled)].pid, SIGSTOP);
      kill(procs[static_cast<size_t>(victim)].pid, SIGKILL);
      auto t0 = std::chrono::steady_clock::now();
      if (c.stalled >= 0) {
        std::this_thread::sleep_for(std::chrono::seconds(5));
        kill(procs[static_cast<size_t>(c.stalled)].pid, SIGCONT);
      }
      const int bound = 30;  // seconds: heartbeat 0.5 s, so detection takes a few seconds
      mrtest::wait_all(procs, std::chrono::seconds(bound + 30));
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(mrtest::all_output(procs));
      for (const Proc& p : procs) {
        CHECK_FALSE(p.timed_out);
        if (p.rank == victim) continue;
        CHECK(p.exit_code() != 0);
        CHECK_THAT(p.err(), Catch::Contains("rank " + std::to_string(victim)));
      }
      CHECK(took < bound);
    }
  }
}
