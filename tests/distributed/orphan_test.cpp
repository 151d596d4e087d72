// No worker outlives its launcher: kill -9 of `megatron-run --nproc-per-node 2` takes its workers with it
// (PR_SET_PDEATHSIG), and when one worker fails the launcher stops the others (SIGTERM, SIGCONT for a stopped one,
// SIGKILL after the grace period) and exits with the failing worker's code. Every test is bounded.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "distributed/store.h"
#include "proc.h"

using mrtest::Proc;
using mrtest::TempDir;

namespace {

// Runs spawn_workers(so) in a child process (its output to DIR/NAME.out), as `megatron-run --nproc-per-node`
// would; returns its pid.
pid_t spawner(const mr::launch::SpawnOptions& so, const TempDir& dir, const std::string& name) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int out = open((dir / (name + ".out")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(out, 2);
    _exit(mr::launch::spawn_workers(so));
  }
  return pid;
}

// Waits for a child (SIGKILL of its group after `limit`); returns its wait status, -1 when it had to be killed.
int wait_child(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  if (!mrtest::wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, limit)) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return status;
}

std::vector<pid_t> read_pids(const TempDir& dir, int n) {
  std::vector<pid_t> out;
  for (int r = 0; r < n; ++r) {
    std::string s = mrtest::slurp(dir / ("pid." + std::to_string(r)));
    if (!s.empty()) out.push_back(static_cast<pid_t>(std::stol(s)));
  }
  return out;
}

}  // namespace

TEST_CASE("kill -9 of the launcher: every worker dies with it", "[dist][process][orphan]") {
  TempDir dir;
  // A long run: the bring-up's self-check repeated for two minutes.
  std::vector<std::string> argv = {mrtest::megatron_run(), "--nproc-per-node", "2"};
  for (const std::string& a : mrtest::bring_up_args({})) argv.push_back(a);
  std::vector<Proc> p = {mrtest::start(argv,
                                       {{"MR_DIST_TIMEOUT_S", "60"}, {"MR_DIST_SELFCHECK_SECONDS", "120"},
                                        {"MR_DIST_REPORT", dir / "report."}},
                                       dir, "launcher")};
  mrtest::KillOnExit cleanup;
  cleanup.pids.push_back(p[0].pid);
  REQUIRE(mrtest::wait_for([&] {
    return std::filesystem::exists(dir / "report.0.ready") && std::filesystem::exists(dir / "report.1.ready");
  }, std::chrono::seconds(120)));
  std::vector<pid_t> workers = mrtest::workers_of(p[0].pid);
  cleanup.pids.insert(cleanup.pids.end(), workers.begin(), workers.end());
  REQUIRE(workers.size() == 2);
  for (pid_t w : workers) REQUIRE_FALSE(mrtest::gone(w));

  REQUIRE(kill(p[0].pid, SIGKILL) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  mrtest::wait_all(p, std::chrono::seconds(10));
  for (pid_t w : workers) CHECK(mrtest::wait_for([&] { return mrtest::gone(w); }, std::chrono::seconds(5)));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("workers gone " << took << " s after kill -9 of the launcher");
  CHECK(took < 5);
}

TEST_CASE("a worker that fails early: the launcher exits with its code and stops every other worker",
          "[dist][process][orphan][spawn]") {
  TempDir dir;
  // Rank 1 fails at once with code 3. Rank 0 ignores SIGTERM (SIGKILL after the grace period ends it), rank 2
  // stops itself (only SIGCONT lets it act on SIGTERM), rank 3 is an ordinary sleeper.
  mr::launch::SpawnOptions so;
  so.nproc_per_node = 4;
  so.prefix_output = true;
  so.grace_seconds = 2;
  so.argv = {"/bin/sh", "-c",
             "echo $$ > " + dir / "pid." + "$RANK; "
             "case $RANK in "
             "0) trap '' TERM; echo ready; while :; do sleep 0.1; done;; "
             "1) while [ ! -e " + dir / "go" + " ]; do sleep 0.05; done; exit 3;; "
             "2) echo ready; kill -STOP $$; exec sleep 60;; "
             "*) echo ready; exec sleep 60;; "
             "esac"};
  pid_t pid = spawner(so, dir, "spawn");
  mrtest::KillOnExit cleanup;
  cleanup.pids.push_back(pid);
  // Every worker is up (rank 2 stopped) before rank 1 fails.
  REQUIRE(mrtest::wait_for([&] {
    std::string out = mrtest::slurp(dir / "spawn.out");
    for (int r : {0, 2, 3})
      if (out.find("[rank " + std::to_string(r) + "] ready") == std::string::npos) return false;
    return read_pids(dir, 4).size() == 4;
  }, std::chrono::seconds(60)));
  std::vector<pid_t> workers = read_pids(dir, 4);
  cleanup.pids.insert(cleanup.pids.end(), workers.begin(), workers.end());
  std::ofstream(dir / "go") << "\n";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = wait_child(pid, std::chrono::seconds(60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string out = mrtest::slurp(dir / "spawn.out");
  INFO(out << "took " << took << " s");
  REQUIRE(status != -1);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK_THAT(out, Catch::Contains("worker rank 1") && Catch::Contains("exited with code 3") &&
                      Catch::Contains("stopping the other workers"));
  CHECK_THAT(out, Catch::Contains("killing them"));  // rank 0 ignored SIGTERM
  CHECK(took < 2 + 15);
  for (pid_t w : workers) CHECK(mrtest::gone(w));
}

TEST_CASE("a real worker that fails: megatron-run exits with its code, the other worker is gone",
          "[dist][process][orphan][spawn]") {
  TempDir dir;
  // MR_DIST_STALL is read after the bring-up; a malformed value fails every rank there with exit code 1.
  // Only the worker with rank 1 gets it, through a wrapper that sets it for that rank.
  const std::string wrapper = dir / "worker.sh";
  {
    std::ofstream f(wrapper);
    f << "#!/bin/sh\n[ \"$RANK\" = 1 ] && export MR_DIST_STALL=bad\nexec " << MR_BIN_DIR << "/megatron-run-worker \"$@\"\n";
  }
  REQUIRE(chmod(wrapper.c_str(), 0755) == 0);
  std::vector<std::string> argv = {mrtest::megatron_run(), "--nproc-per-node", "2"};
  for (const std::string& a : mrtest::bring_up_args({})) argv.push_back(a);
  std::vector<Proc> p = {mrtest::start(argv,
                                       {{"MR_DIST_TIMEOUT_S", "60"}, {"MR_WORKER", wrapper},
                                        {"MR_DIST_REPORT", dir / "report."}},
                                       dir, "launcher")};
  mrtest::KillOnExit cleanup;
  cleanup.pids.push_back(p[0].pid);
  std::vector<pid_t> workers;
  mrtest::wait_for([&] {
    workers = mrtest::workers_of(p[0].pid);
    return workers.size() == 2 || mrtest::gone(p[0].pid);
  }, std::chrono::seconds(60));
  cleanup.pids.insert(cleanup.pids.end(), workers.begin(), workers.end());
  mrtest::wait_all(p, std::chrono::seconds(120));
  INFO(p[0].out() << p[0].err());
  CHECK_FALSE(p[0].timed_out);
  CHECK(p[0].exit_code() == 1);
  CHECK_THAT(p[0].err(), Catch::Contains("MR_DIST_STALL='bad'") && Catch::Contains("worker rank 1"));
  for (pid_t w : workers) CHECK(mrtest::gone(w));
}

TEST_CASE("torchrun's agent killed with -9: workers using its store stop within a heartbeat period or two",
          "[dist][process][orphan][agent]") {
  // megatron-run does not set a death signal for workers started by someone else (torchrun, srun): their lifetime
  // is the launcher's business. What ends them when torchrun's agent dies is its store going away: here a child
  // process hosts a store of our own LibTorch, as torchrun's agent would, and is killed once the ranks run.
  TempDir dir;
  const int port = mrtest::store_port();
  pid_t agent = fork();
  if (agent == 0) {
    setpgid(0, 0);
    mr::distributed::Store::Options so;
    so.port = port;
    so.is_server = true;
    so.timeout = std::chrono::seconds(30);
    std::shared_ptr<mr::distributed::Store> server = mr::distributed::Store::connect(so);
    std::ofstream(dir / "agent.ready") << "\n";
    for (int i = 0; i < 1200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 2 min at most
    _exit(0);
  }
  mrtest::KillOnExit cleanup;
  cleanup.pids.push_back(agent);
  REQUIRE(mrtest::wait_for([&] { return std::filesystem::exists(dir / "agent.ready"); }, std::chrono::seconds(30)));
  std::vector<Proc> procs = mrtest::start_job(2, mrtest::bring_up_args({}), dir,
                                              {{"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                               {"TORCHELASTIC_RESTART_COUNT", "0"},
                                               {"MR_DIST_SELFCHECK_SECONDS", "120"},
                                               {"MR_DIST_HEARTBEAT_TIMEOUT_S", "3"},
                                               {"MR_DIST_REPORT", dir / "report."}},
                                              port);
  for (const Proc& p : procs) cleanup.pids.push_back(p.pid);
  REQUIRE(mrtest::wait_for([&] {
    return std::filesystem::exists(dir / "report.0.ready") && std::filesystem::exists(dir / "report.1.ready");
  }, std::chrono::seconds(120)));
  REQUIRE(kill(agent, SIGKILL) == 0);
  waitpid(agent, nullptr, 0);
  const auto t0 = std::chrono::steady_clock::now();
  mrtest::wait_all(procs, std::chrono::seconds(60));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(mrtest::all_output(procs) << "took " << took << " s");
  // The first to notice is a watchdog (`lost the rendezvous store`); a rank whose collective fails first (its
  // peer has just exited) finds the store gone while diagnosing it. Both name the agent's store.
  for (const Proc& p : procs) {
    CHECK_FALSE(p.timed_out);
    CHECK(p.exit_code() == 1);
    CHECK_THAT(p.err(), Catch::Contains("torchrun's agent hosts it"));
  }
  CHECK_THAT(mrtest::all_output(procs), Catch::Contains("lost the rendezvous store at 127.0.0.1:" + std::to_string(port)));
  CHECK(took < 3 + 15);
}
