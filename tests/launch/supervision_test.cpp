// The launcher's supervision of the programs it starts (launch/spawn.h, launch/failure_report.h, log_spec.h):
// --max-restarts, --log-dir with -r/--redirects, -t/--tee and --local-ranks-filter, --term-timeout, and the
// failure summary naming the root cause. Real programs (tests/launch/programs/faults.py, probe.py) under
// Debian's /usr/bin/python3; every command runs under `timeout`.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "launch/spawn.h"
#include "launch_test_util.h"

namespace fs = std::filesystem;
using namespace mrtest::launcher;

namespace {

using mrtest::Proc;
using mrtest::run_shell;

struct TempDir : ScratchDir {
  TempDir() : ScratchDir("mr-supervision") {}
};

// faults.py on 2 workers: `env` (FAULT=... and any other variables, each followed by a space), then megatron-run
// with `options` (each followed by a space).
Proc faults(const std::string& env, const std::string& options = "") {
  return sh(env + kRun + "--nproc-per-node 2 " + options + "--no-append-args " + kFaults);
}

// How often `what` occurs in `s`.
size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The one <run id>_<unique> directory under `root`.
fs::path run_dir(const fs::path& root, const std::string& run_id) {
  fs::path found;
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename().string().rfind(run_id + "_", 0) == 0) found = e.path();
  return found;
}

}  // namespace

TEST_CASE("--max-restarts: the failed group is stopped and started again with the next restart count",
          "[launch][supervision][process]") {
  TempDir t;
  Proc r = sh("env -u OMP_NUM_THREADS FAULT=first-attempt " + kRun + "--nproc-per-node 2 --max-restarts 2 --rdzv-id "
              "job5 --log-dir " + t.path.string() + " --no-append-args " + kFaults);
  INFO(r.out);
  CHECK(r.exit == 0);
  // The workers' OMP_NUM_THREADS is said once a launch, not again for the restart (review firsthour36 #11).
  CHECK(count_of(r.out, " for each of the 2 workers (") == 1);
  CHECK(has(r.out, "[rank 1] rank 1 fails on attempt 0"));
  // Numbered as the log directories and TORCHELASTIC_RESTART_COUNT are (from 0); the restart as the one it is.
  CHECK(has(r.out, "megatron-run: the worker group failed (attempt_0, TORCHELASTIC_RESTART_COUNT=0: rank 1 exited with "
                   "code 3); restart 1 of 2 (--max-restarts): restarting the worker group (TORCHELASTIC_RESTART_COUNT=1)"));
  CHECK(has(r.out, "[rank 0] rank 0 attempt 1 of at most 2 restarts"));
  CHECK(has(r.out, "[rank 1] rank 1 attempt 1 of at most 2 restarts"));
  CHECK_FALSE(has(r.out, "attempt 2 of"));
  // One directory per attempt (torchrun's attempt_<restart count>).
  fs::path run = run_dir(t.path, "job5");
  REQUIRE(!run.empty());
  CHECK(fs::is_directory(run / "attempt_0" / "1"));
  CHECK(fs::is_directory(run / "attempt_1" / "1"));

  // No restart left: the last failure is the job's, with the summary.
  Proc none = faults("FAULT=first-attempt ");
  INFO(none.out);
  CHECK(none.exit == 3);
  CHECK(has(none.out, "megatron-run: the job failed\n"));
  CHECK_FALSE(has(none.out, "restarting"));
  // A stop signal to the launcher while it stops a failed group (restarts left): no restart, the failure's code.
  const fs::path trapped = t.path / "trapped";
  const fs::path group = t.path / "group.sh";
  std::ofstream(group) << "if [ \"$RANK\" = 0 ]; then trap '' TERM; : > " << trapped.string() << "; sleep 60; fi\n"
                       << "while [ ! -e " << trapped.string() << " ]; do sleep 0.05; done; exit 3\n";
  // The SIGTERM goes once the launcher says it stops the group (its line in stop.txt), not a guessed second after
  // rank 0's trap: under load rank 1's exit may come later, and the SIGTERM would then be a plain stop (exit 143).
  // The launcher is the script's own child, not under `timeout`, whose -k would SIGKILL it 5 s after the SIGTERM,
  // when its own --term-timeout of 5 s (from rank 1's exit) ends too.
  const fs::path said = t.path / "stop.txt", stop_sh = t.path / "stop.sh";
  std::ofstream(stop_sh) << kBin << " --config " << kConfig << " --nproc-per-node 2 --max-restarts 2 --term-timeout 5 "
                         << "--no-append-args -- /bin/sh " << group.string() << " > " << said.string() << " 2>&1 & L=$!\n"
                         << "for i in $(seq 1200); do grep -q 'stopping the other workers' " << said.string()
                         << " && break; sleep 0.05; done\n"
                         << "kill -TERM $L; wait $L; rc=$?; cat " << said.string() << "; exit $rc\n";
  Proc stop = sh("/bin/sh " + stop_sh.string());
  INFO(stop.out);
  CHECK(stop.exit == 3);
  CHECK(has(stop.out, "received signal 15 (SIGTERM)"));
  CHECK_FALSE(has(stop.out, "restarting the worker group"));
  // A configuration error is never retried: nothing starts.
  Proc bad = sh("FAULT=first-attempt " + kRun + "--nproc-per-node 2 --max-restarts 3 --tensor-model-parallel-size 4 " +
                kFaults);
  CHECK(bad.exit == 1);
  CHECK(has(bad.out, "error[parallel.world-size-divisible]"));
  CHECK_FALSE(has(bad.out, "attempt"));
}

TEST_CASE("a stop sent to workers just forked is not taken for a signal to the launcher", "[launch][supervision][process]") {
  // Four ranks of /bin/false: the first to fail stops the others, some of them only just forked. The stop must not
  // run the launcher's inherited signal handler in such a child (it writes to the launcher's self-pipe), which read
  // as "received signal 15" in the launcher: no restart, exit 143. Several rounds, restarts included.
  for (int round = 0; round < 5; ++round) {
    Proc r = sh(kRun + "--nproc-per-node 4 --max-restarts 2 --no-append-args --no-python /bin/false");
    INFO(r.out);
    CHECK(r.exit == 1);
    CHECK_FALSE(has(r.out, "received signal"));
    CHECK(has(r.out, "the job failed (attempt_2, TORCHELASTIC_RESTART_COUNT=2; no restart left, --max-restarts 2)"));
    CHECK(has(r.out, "restart 2 of 2 (--max-restarts): restarting the worker group (TORCHELASTIC_RESTART_COUNT=2)"));
  }
}

TEST_CASE("--log-dir with --redirects, --tee and --local-ranks-filter: torchrun's layout and console",
          "[launch][supervision][process]") {
  TempDir t;
  // Rank 0: stdout to its file only (-r 0:1); rank 1: both streams to files and the console (-t 1:3).
  Proc r = sh(kRun + "--nproc-per-node 2 --rdzv-id logs1 --log-dir " + t.path.string() +
              " -r 0:1 -t 1:3 --no-append-args " + kProbe + " own-arg");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  fs::path a0 = run_dir(t.path, "logs1") / "attempt_0";
  CHECK(has(slurp(a0 / "0" / "stdout.log"), "\"argv\": [\"own-arg\"]"));
  CHECK_FALSE(fs::exists(a0 / "0" / "stderr.log"));  // not redirected
  CHECK(has(slurp(a0 / "1" / "stdout.log"), "\"RANK\": \"1\""));
  CHECK(fs::exists(a0 / "1" / "stderr.log"));
  CHECK_FALSE(has(r.out, "[rank 0] {"));  // redirected: not on the console
  CHECK(has(r.out, "[rank 1] {"));        // tee'd: on the console too
  // TORCHELASTIC_ERROR_FILE: <attempt>/<local rank>/error.json.
  CHECK(has(slurp(a0 / "1" / "stdout.log"),
            "\"TORCHELASTIC_ERROR_FILE\": \"" + (a0 / "1" / "error.json").string() + "\""));

  // --local-ranks-filter 1: only rank 1 on the console; rank 0's tee'd file is still written.
  Proc f = sh(kRun + "--nproc-per-node 2 --rdzv-id logs2 --log-dir " + t.path.string() +
              " --tee 3 --local-ranks-filter 1 --no-append-args " + kProbe);
  INFO(f.out);
  REQUIRE(f.exit == 0);
  CHECK_FALSE(has(f.out, "[rank 0] {"));
  CHECK(has(f.out, "[rank 1] {"));
  CHECK(has(slurp(run_dir(t.path, "logs2") / "attempt_0" / "0" / "stdout.log"), "\"RANK\": \"0\""));

  // Bad values: exit 2 naming the option, nothing started.
  for (std::string opt : {"-r 4", "--tee 0:9", "--redirects x", "--local-ranks-filter a", "--max-restarts -1",
                          "--term-timeout -3"}) {
    Proc b = sh(kRun + "--nproc-per-node 2 " + opt + " " + kProbe);
    INFO(opt << ": " << b.out);
    CHECK(b.exit == 2);
    CHECK(has(b.out, "argument -"));
    CHECK_FALSE(has(b.out, "{\"env\""));
  }
  // Inside another launcher's job (no --nproc-per-node) they would do nothing: refused.
  Proc in_job = sh("RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 " + kRun +
                   "--max-restarts 1 " + kProbe);
  CHECK(in_job.exit == 2);
  CHECK(has(in_job.out, "argument --max-restarts/--max_restarts: acts on the workers megatron-run starts"));
  Proc numa = sh("RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 " + kRun +
                 "--numa-binding node " + kProbe);
  CHECK(numa.exit == 2);
  CHECK(has(numa.out, "argument --numa-binding/--numa_binding: acts on the workers megatron-run starts"));
}

TEST_CASE("inside a job, -r and -t are refused under their argparse names, as their value errors name them "
          "(review diff38 #6)", "[launch][supervision][process]") {
  const std::string job = "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 ";
  for (const auto& [opt, name] : std::vector<std::pair<std::string, std::string>>{
           {"-r 3", "-r/--redirects"}, {"--redirects 3", "-r/--redirects"}, {"-t 1", "-t/--tee"}, {"--tee 1", "-t/--tee"}}) {
    Proc p = sh(job + kRun + opt + " " + kProbe);
    INFO(opt << ": " << p.out);
    CHECK(p.exit == 2);
    CHECK(has(p.out, "argument " + name + ": acts on the workers megatron-run starts"));
  }
  // The value error names it the same way.
  Proc bad = sh(kRun + "--nproc-per-node 1 -r x " + kProbe);
  CHECK(bad.exit == 2);
  CHECK(has(bad.out, "argument -r/--redirects: 'x'"));
}

TEST_CASE("--term-timeout: a worker that ignores SIGTERM is killed after the grace period",
          "[launch][supervision][process]") {
  auto t0 = std::chrono::steady_clock::now();
  Proc r = faults("FAULT=ignore-term ", "--term-timeout 1 ");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK(r.exit == 4);  // the root cause's code, not the SIGKILLed rank's
  CHECK(has(r.out, "workers still running 1 s after the stop signal (--term-timeout); killing them"));
  CHECK(has(r.out, "rank 0 (local rank 0), pid "));
  CHECK(has(r.out, "was killed by signal 9 (SIGKILL) (after the launcher stopped the workers)"));
  CHECK(s < 30);  // the worker would sleep 60 s; the default grace is 30 s
  // torchrun's name for it: --shutdown-timeout.
  Proc t = faults("FAULT=ignore-term ", "--shutdown-timeout 1 ");
  INFO(t.out);
  CHECK(t.exit == 4);
  CHECK(has(t.out, "workers still running 1 s after the stop signal (--term-timeout); killing them"));
  // ... and its PET_ default, as torchrun reads it.
  Proc p = faults("FAULT=ignore-term PET_SHUTDOWN_TIMEOUT=1 ");
  INFO(p.out);
  CHECK(p.exit == 4);
  CHECK(has(p.out, "workers still running 1 s after the stop signal (--term-timeout); killing them"));
  // ... and torchrun 2.x's TORCH_ELASTIC_SHUTDOWN_TIMEOUT after it (review 29b); not an integer: named.
  Proc e = faults("FAULT=ignore-term TORCH_ELASTIC_SHUTDOWN_TIMEOUT=1 ");
  INFO(e.out);
  CHECK(e.exit == 4);
  CHECK(has(e.out, "workers still running 1 s after the stop signal (--term-timeout); killing them"));
  Proc bad = faults("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon ");
  CHECK(bad.exit == 2);
  CHECK(has(bad.out, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT='soon' (the default of --shutdown-timeout) is not an integer"));
}

TEST_CASE("the failure summary: the root cause with its error file (@record) and stderr, then the cascade",
          "[launch][supervision][process][torch]") {
  Proc has_torch = sh("/usr/bin/python3 -c 'import torch.distributed.elastic.multiprocessing.errors'");
  INFO("python3-torch is required (scripts/setup.sh installs it): " << has_torch.out);
  REQUIRE(has_torch.exit == 0);
  Proc r = faults("FAULT=record ", "--term-timeout 5 ");
  INFO(r.out);
  CHECK(r.exit == 1);  // Python's code for an uncaught exception
  const size_t root = r.out.find("megatron-run: the job failed\n");
  REQUIRE(root != std::string::npos);
  const std::string summary = r.out.substr(root);
  CHECK(has(summary, "  root cause (first failure): rank 1 (local rank 1), pid "));
  CHECK(has(summary, "exited with code 1 at "));
  CHECK(has(summary, "/attempt_0/1/error.json:\n      RuntimeError: boom on rank 1\n"));
  CHECK(has(summary, "Traceback (most recent call last):"));  // the error file's py_callstack
  CHECK(has(summary, " of its stderr:\n"));
  CHECK(has(summary, "      RuntimeError: boom on rank 1\n"));  // the last line of its stderr
  CHECK(has(summary, "  then (the cascade):\n    rank 0 (local rank 0), pid "));
  CHECK(has(summary, "was killed by signal 15 (SIGTERM) (after the launcher stopped the workers)"));
}

TEST_CASE("what a worker leaves running in its process group is stopped when the workers have exited",
          "[launch][supervision][process]") {
  // Each rank starts a background `sleep 60` (in the worker's process group: sh without job control) that inherits
  // its stdout, and exits at once. The launcher shows what the ranks wrote, names the leftovers, stops them and
  // returns; no `sleep` of theirs outlives it.
  auto t0 = std::chrono::steady_clock::now();
  Proc r = sh(kBin + " --nproc-per-node 2 --config " + kConfig +
              " --no-append-args -- /bin/sh -c 'sleep 60 & echo started $!; echo done'");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(has(r.out, "[rank 0] started "));
  CHECK(has(r.out, "[rank 1] done\n"));
  CHECK(has(r.out, "every worker has exited, but processes they started are still running in their process groups "
                   "(rank 0: pid "));
  CHECK(s < 30);
  // The pids the ranks printed: each is gone (or a zombie, where this machine's init does not reap orphans).
  for (size_t at = r.out.find("] started "); at != std::string::npos; at = r.out.find("] started ", at + 1)) {
    const std::string pid = r.out.substr(at + 10, r.out.find('\n', at) - at - 10);
    INFO("leftover pid " << pid);
    CHECK(sh("s=$(cut -d' ' -f3 /proc/" + pid + "/stat 2>/dev/null); test -z \"$s\" -o \"$s\" = Z").exit == 0);
  }
  TempDir dir;
  // One that ignores SIGTERM is killed after --term-timeout.
  const fs::path stubborn = dir.path / "stubborn.sh";
  const fs::path ready = dir.path / "trapped";
  // The worker exits once its child has set the trap (a marker file), not after a guessed delay.
  std::ofstream(stubborn) << "sh -c 'trap \"\" TERM; : > " << ready.string() << "; sleep 61' &\n"
                          << "while [ ! -e " << ready.string() << " ]; do sleep 0.05; done\n";
  Proc k = sh(kBin + " --nproc-per-node 1 --config " + kConfig + " --term-timeout 1 --no-append-args -- /bin/sh " +
              stubborn.string());
  INFO(k.out);
  CHECK(k.exit == 0);  // the worker's own code
  CHECK(has(k.out, "processes the workers started still running 1 s after the stop signal (--term-timeout): rank 0: "
                   "pid "));
  // One that left the group (setsid) is not the launcher's to stop: the launcher does not wait for its output, and
  // names it (its pid, written to `own` before it becomes `sleep`).
  const std::string own = (dir.path / "own").string();
  Proc t = sh(kBin + " --nproc-per-node 1 --config " + kConfig + " --log-dir " + dir.path.string() +
              " --tee 3 --no-append-args -- /bin/sh -c 'setsid sh -c \"echo \\$\\$ > " + own + ".tmp; mv " + own +
              ".tmp " + own + "; exec sleep 3\" & echo started; while [ ! -e " + own + " ]; do sleep 0.05; done'");
  INFO(t.out);
  CHECK(t.exit == 0);
  CHECK(has(t.out, "started"));
  CHECK(has(t.out, "every worker has exited, but a process one of them started still holds its output open"));
  std::string leftover;
  std::getline(std::ifstream(own), leftover);
  INFO("the setsid process: pid " << leftover);
  CHECK(!leftover.empty());
  CHECK(has(t.out, "megatron-run: pid " + leftover + " (sleep) still holds rank 0's output open; it is not stopped "
                   "(it left the worker's process group)\n"));
}

TEST_CASE("what the workers left is looked for at a worker's exit and then at most every 100 ms, not on every pass",
          "[launch][supervision][process]") {
  // The worker leaves a shell loop (SIGTERM ignored) writing short lines to its stdout as fast as it can, and exits. Until the grace
  // period ends (SIGKILL), the leftover's output wakes the supervision loop over and over; the launcher's report
  // counts those passes and the scans of /proc among them. The bound holds by construction, whatever the load: one
  // scan per worker exit, one per 100 ms of the whole run (and one more), one at the SIGKILL.
  TempDir dir;
  const fs::path ready = dir.path / "trapped", counts = dir.path / "counts";
  std::ofstream(dir.path / "leftover.sh") << "sh -c 'trap \"\" TERM; : > " << ready.string() << "; while :; do echo x; done' &\n"
                                          << "while [ ! -e " << ready.string() << " ]; do sleep 0.05; done\n";
  mr::launch::SpawnOptions so;
  so.nproc_per_node = 1;
  so.argv = {"/bin/sh", (dir.path / "leftover.sh").string()};
  so.grace_seconds = 2;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the launcher, as `megatron-run --nproc-per-node 1 --term-timeout 2` runs it
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    mr::launch::SpawnReport report;
    so.report = &report;
    const int code = mr::launch::spawn_workers(so);
    std::ofstream(counts) << report.leftover_scans << " " << report.leftover_passes << "\n";
    _exit(code);
  }
  int status = 0;
  for (int i = 0; i < 1200 && waitpid(pid, &status, WNOHANG) != pid; ++i) usleep(100000);  // 120 s at most
  if (kill(pid, 0) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL("the launcher did not end within 120 s");
  }
  const long elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the worker's own code
  long scans = -1, passes = -1;
  std::ifstream(counts) >> scans >> passes;
  INFO("scans " << scans << ", passes " << passes << ", " << elapsed_ms << " ms");
  const long bound = so.nproc_per_node + elapsed_ms / 100 + 1 + 1;
  CHECK(scans >= 1);
  CHECK(scans <= bound);
  // The check has teeth: the loop passed far more often than it may scan (a scan on every pass would fail above).
  CHECK(passes > 4 * bound);
}

TEST_CASE("--local-ranks-filter naming a local rank the node does not have is named", "[launch][supervision][process]") {
  Proc none = sh(kBin + " --nproc-per-node 2 --local-ranks-filter 7 --config " + kConfig +
                 " --no-append-args -- /bin/echo hi");
  INFO(none.out);
  CHECK(none.exit == 0);
  // Named as -r/-t are (option_name: every option string of it).
  CHECK(has(none.out, "warning: --local-ranks-filter/--local_ranks_filter: local rank 7 is not on this node (2 workers, "
                      "local ranks 0-1): no worker's output reaches the console"));
  CHECK(!has(none.out, "hi\n"));
  Proc some = sh(kBin + " --nproc-per-node 2 --local-ranks-filter 1,7 --config " + kConfig +
                 " --no-append-args -- /bin/echo hi");
  CHECK(has(some.out, "warning: --local-ranks-filter/--local_ranks_filter: local rank 7 is not on this node (2 workers, "
                      "local ranks 0-1)\n"));
  CHECK(has(some.out, "[rank 1] hi\n"));
}

TEST_CASE("-r/-t naming a local rank the node does not have is named as --local-ranks-filter's (review user39 #9)",
          "[launch][supervision][process]") {
  Proc r = sh(kBin + " --nproc-per-node 2 --redirects 1:3,5:1 --tee 0:1,4:2 --config " + kConfig +
              " --no-append-args -- /bin/echo hi");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(has(r.out, "warning: -r/--redirects: local rank 5 is not on this node (2 workers, local ranks 0-1): its "
                   "setting does nothing"));
  CHECK(has(r.out, "warning: -t/--tee: local rank 4 is not on this node"));
  Proc fine = sh(kBin + " --nproc-per-node 2 --redirects 1:3 --config " + kConfig + " --no-append-args -- /bin/echo hi");
  CHECK(fine.exit == 0);
  CHECK(!has(fine.out, "is not on this node"));
}

TEST_CASE("inside another launcher's job the rendezvous options are refused, not ignored or a nested job "
          "(review user39 #1, #2)", "[launch][supervision][process]") {
  const std::string job = "RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 ";
  for (const auto& [opt, name] : std::vector<std::pair<std::string, std::string>>{
           {"--master-port 1234", "--master-port/--master_port"},
           {"--master-addr 10.0.0.1", "--master-addr/--master_addr"},
           {"--standalone", "--standalone"},
           {"--rdzv-id foo", "--rdzv-id/--rdzv_id"},
           {"--nnodes 2 --join-timeout 3", "--nnodes"},
           {"--node-rank 0", "--node-rank/--node_rank"}}) {
    Proc p = sh(job + kRun + opt + " " + kProbe);
    INFO(opt << ": " << p.out);
    CHECK(p.exit == 2);
    CHECK(has(p.out, "argument " + name + ": acts on the workers megatron-run starts, but it is inside a job already"));
    CHECK(!has(p.out, "waiting for the other nodes"));
  }
  // Inside a torchrun job (TORCHELASTIC_RUN_ID: its PET_ defaults are not read) the spawner's options are refused
  // too (they were ignored there).
  Proc tee = sh(job + "TORCHELASTIC_RUN_ID=x " + kRun + "--tee 3 " + kProbe);
  INFO(tee.out);
  CHECK(tee.exit == 2);
  CHECK(has(tee.out, "argument -t/--tee: acts on the workers megatron-run starts"));
  // With --nproc-per-node it is a nested job and the options act.
  Proc nested = sh(job + kRun + "--nproc-per-node 1 --master-port 0 " + kProbe);
  CHECK(!has(nested.out, "acts on the workers megatron-run starts"));
}

// --virtual-local-rank and --event-log-handler act on the workers megatron-run starts (their LOCAL_RANK and
// CUDA_VISIBLE_DEVICES; the agent's event records): inside another launcher's job they were accepted and did nothing
// (review diff39 #2).
TEST_CASE("inside another launcher's job --virtual-local-rank and --event-log-handler are refused, not ignored",
          "[launch][supervision][process][in-job]") {
  const std::string job = "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 ";
  for (const auto& [opt, name] : std::vector<std::pair<std::string, std::string>>{
           {"--virtual-local-rank", "--virtual-local-rank/--virtual_local_rank"},
           {"--event-log-handler console", "--event-log-handler/--event_log_handler"}}) {
    Proc p = sh(job + kRun + opt + " --no-python /bin/true");
    INFO(opt << ": " << p.out);
    CHECK(p.exit == 2);
    CHECK(has(p.out, "argument " + name + ": acts on the workers megatron-run starts, but it is inside a job already"));
  }
  Proc plain = sh(job + kRun + "--no-python /bin/true");
  INFO(plain.out);
  CHECK(plain.exit == 0);
}

// A dry run inside the job (a CI pre-flight of the launch) said nothing of them, and the launch then refused them:
// the dry run and --format json's check refuse them as the launch does, the same line and exit code 2.
TEST_CASE("inside another launcher's job a dry run refuses the launcher's rendezvous and spawner options as the "
          "launch does", "[launch][supervision][process][in-job]") {
  const std::string job = "-u TORCHELASTIC_RUN_ID RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 "
                          "MASTER_PORT=29999 ";
  auto error_line = [](const std::string& out) {
    const size_t at = out.find("megatron-run: error: ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  for (const std::string& opt : {std::string("--nnodes 2"), std::string("--master-port 1234"),
                                 std::string("--master-addr 10.0.0.1"), std::string("--standalone"),
                                 std::string("--rdzv-id foo"), std::string("--node-rank 0"),
                                 std::string("--log-dir /tmp"), std::string("PET_NNODES=2 ")}) {
    const bool pet = opt.rfind("PET_", 0) == 0;
    const std::string env = job + (pet ? opt : std::string());
    const std::string flags = pet ? std::string() : opt + " ";
    Proc launch = sh(env + kRun + flags + "--no-python /bin/true");
    Proc dry = sh(env + kRun + "--dry-run " + flags + "--no-python /bin/true");
    Proc json = sh(env + kRun + "--format json " + flags + "--no-python /bin/true");
    INFO(opt << ":\nlaunch: " << launch.out << "\ndry run: " << dry.out << "\njson: " << json.out);
    CHECK(launch.exit == 2);
    CHECK(dry.exit == 2);
    CHECK(json.exit == 2);
    CHECK(has(dry.out, "acts on the workers megatron-run starts, but it is inside a job already"));
    CHECK(error_line(dry.out) == error_line(launch.out));
    CHECK(error_line(json.out) == error_line(launch.out));
    CHECK(has(json.out, "\"ok\": false"));
    // The job's MASTER_ADDR / MASTER_PORT are its own: no "not read" warning before the refusal (review launch40 #1).
    for (const Proc* p : {&launch, &dry, &json}) CHECK(!has(p->out, "is set in the launcher's environment"));
  }
  // Outside a job (no RANK) a dry run takes them, as the launch does.
  Proc outside = sh("-u RANK -u WORLD_SIZE -u TORCHELASTIC_RUN_ID " + kRun + "--dry-run --nnodes 2 --master-port 1234 "
                    "--no-python /bin/true");
  INFO(outside.out);
  CHECK(outside.exit == 0);
  // With --nproc-per-node (a nested job) neither refuses them.
  Proc nested = sh(job + kRun + "--dry-run --nproc-per-node 1 --master-port 1234 --no-python /bin/true");
  INFO(nested.out);
  CHECK(nested.exit == 0);
}

// Under SLURM the job's store is MASTER_ADDR:MASTER_PORT where set, else derived from SLURM's variables; srun has no
// option for it: the refusal of --master-port / --master-addr says so (review diff39 #3).
TEST_CASE("under SLURM the refusal of --master-port and --master-addr advises MASTER_PORT and MASTER_ADDR",
          "[launch][supervision][process][in-job]") {
  const std::string slurm = "-u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u TORCHELASTIC_RUN_ID "
                            "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_NODELIST=localhost SLURM_JOB_ID=77 SLURM_STEP_ID=0 "
                            "SLURM_LOCALID=0 SLURM_NNODES=1 SLURM_NTASKS_PER_NODE=2 ";
  Proc port = sh(slurm + kRun + "--master-port 29533 --no-python /bin/true");
  INFO(port.out);
  CHECK(port.exit == 2);
  CHECK(has(port.out, "argument --master-port/--master_port: acts on the workers megatron-run starts, but it is "
                      "inside a job already"));
  CHECK(has(port.out, "via SLURM"));
  CHECK(has(port.out, "under SLURM set MASTER_PORT in the job's environment for its store (without it the port is "
                      "derived from SLURM_JOB_ID), or add --nproc-per-node"));
  CHECK(!has(port.out, "give it to that job's launcher"));
  Proc addr = sh(slurm + kRun + "--master-addr 127.0.0.1 --no-python /bin/true");
  INFO(addr.out);
  CHECK(addr.exit == 2);
  CHECK(has(addr.out, "under SLURM set MASTER_ADDR in the job's environment for its store (without it the address "
                      "is SLURM_JOB_NODELIST's first host), or add --nproc-per-node"));
  // Another option keeps the general advice.
  Proc tee = sh(slurm + kRun + "--tee 3 --no-python /bin/true");
  INFO(tee.out);
  CHECK(tee.exit == 2);
  CHECK(has(tee.out, "give it to that job's launcher, or add --nproc-per-node"));
}

// A PET_ default of such an option (no TORCHELASTIC_RUN_ID: the PET_ variables are read) inside a RANK/WORLD_SIZE
// job: PET_NNODES=2 started a nested wait for a second node, up to --join-timeout (review diff39 #1). Refused as
// the option is, naming the variable; a switch's PET_ default that leaves it off, and PET_ variables inside a
// torchrun job (its launcher's), are not.
TEST_CASE("inside another launcher's job a PET_ default of a rendezvous or spawner option is refused, naming it",
          "[launch][supervision][process][in-job]") {
  const std::string job = "-u TORCHELASTIC_RUN_ID RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 "
                          "MASTER_PORT=29999 ";
  auto quick = [](const std::string& cmd) { return run_shell("timeout -k 5 20 env " + cmd + " 2>&1"); };
  for (const auto& [var, name, flag] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"PET_NNODES=2", "--nnodes", "PET_NNODES='2'"},
           {"PET_NODE_RANK=0", "--node-rank/--node_rank", "PET_NODE_RANK='0'"},
           {"PET_MASTER_PORT=29533", "--master-port/--master_port", "PET_MASTER_PORT='29533'"},
           {"PET_RDZV_ID=foo", "--rdzv-id/--rdzv_id", "PET_RDZV_ID='foo'"},
           {"PET_STANDALONE=1", "--standalone", "PET_STANDALONE='1'"},
           {"PET_MAX_RESTARTS=1", "--max-restarts/--max_restarts", "PET_MAX_RESTARTS='1'"},
           {"PET_VIRTUAL_LOCAL_RANK=1", "--virtual-local-rank/--virtual_local_rank", "PET_VIRTUAL_LOCAL_RANK='1'"}}) {
    Proc p = quick(job + var + " " + kRun + "--no-python /bin/true");
    INFO(var << ": " << p.out);
    CHECK(p.exit == 2);
    CHECK(has(p.out, "argument " + name + ": its default " + flag + " acts on the workers megatron-run starts, but it "
                     "is inside a job already"));
    CHECK(has(p.out, "unset " + flag.substr(0, flag.find('=')) + ", or add --nproc-per-node"));
    CHECK(!has(p.out, "waiting for the other nodes"));
  }
  // Switches a PET_ default leaves off: nothing to refuse.
  Proc off = quick(job + "PET_STANDALONE=0 PET_VIRTUAL_LOCAL_RANK=0 " + kRun + "--no-python /bin/true");
  INFO(off.out);
  CHECK(off.exit == 0);
  // Inside a torchrun job the PET_ variables are its launcher's, not read.
  Proc torchrun = quick(job + "TORCHELASTIC_RUN_ID=x PET_NNODES=2 " + kRun + "--no-python /bin/true");
  INFO(torchrun.out);
  CHECK(torchrun.exit == 0);
  CHECK(!has(torchrun.out, "waiting for the other nodes"));
}

// A stop signal the launcher forwards (SIGTERM here) that every worker handles and then exits 0 for (Megatron's
// --exit-signal-handler saves and exits 0): the job ended well, exit 0 and a line. One worker that dies of it:
// 128 + the signal, as before.
TEST_CASE("a forwarded stop that every worker handles (exit 0) ends the launcher with 0; otherwise 128 + N",
          "[launch][supervision][process][signal]") {
  TempDir t;
  auto run = [&](const std::string& failing) {
    return signal_launcher(t.path, "FAULT=term FAULT_RANK=" + failing, "", "TERM");
  };
  check_handled_stop(run("none").out, 15, "SIGTERM");
  Proc died = run("1");
  INFO(died.out);
  CHECK(has(died.out, "[rank 0] rank 0 got SIGTERM, stops cleanly"));
  CHECK_FALSE(has(died.out, "rank 1 got SIGTERM"));
  CHECK_FALSE(has(died.out, "they handled the stop"));
  CHECK(has(died.out, "exit=143"));
}

TEST_CASE("a stop gives what the workers left in their groups one grace period, not a second one",
          "[launch][supervision][process]") {
  // The launcher gets SIGTERM; the worker traps it and exits 5 s later (inside the 6 s grace period), leaving a
  // child in its group that ignores SIGTERM (it counts each one in a file). That child had its SIGTERM with the
  // stop: it gets no second one, and SIGKILL comes at the end of the first grace period, not a new one from the
  // worker's exit (which would end it about 11 s after the stop).
  TempDir dir;
  const fs::path ready = dir.path / "ready", terms = dir.path / "terms", elapsed = dir.path / "elapsed";
  const fs::path worker = dir.path / "worker.sh";
  // The worker sets its own trap before it starts the child that marks `ready` (the SIGTERM comes then).
  std::ofstream(worker) << "trap 'sleep 5; exit 0' TERM\n"
                        << "sh -c 'trap \"echo term >> " << terms.string() << "\" TERM; : > " << ready.string()
                        << "; while :; do sleep 0.1; done' &\n"
                        << "while :; do sleep 0.1; done\n";
  // The launcher is the script's own child (not under `timeout`, whose -k would SIGKILL it 5 s after the SIGTERM).
  const fs::path script = dir.path / "stop.sh";
  std::ofstream(script) << kBin << " --config " << kConfig
                        << " --nproc-per-node 1 --term-timeout 6 --no-append-args -- /bin/sh " << worker.string()
                        << " 2>&1 & L=$!\nwhile [ ! -e " << ready.string() << " ]; do sleep 0.05; done\n"
                        << "t0=$(date +%s.%N); kill -TERM $L; wait $L; rc=$?\n"
                        << "echo \"$(date +%s.%N) $t0\" | awk '{print $1 - $2}' > " << elapsed.string() << "\nexit $rc\n";
  Proc r = sh("/bin/sh " + script.string());
  INFO(r.out);
  CHECK(r.exit == 128 + 15);
  CHECK(has(r.out, "received signal 15 (SIGTERM)"));
  CHECK(has(r.out, "every worker has exited, but processes they started are still running in their process groups "
                   "(rank 0: pid "));
  CHECK(has(r.out, "killed at the end of the grace period unless they end"));
  CHECK_FALSE(has(r.out, "stopping them"));
  CHECK(has(r.out, "processes the workers started still running 6 s after the stop signal (--term-timeout): rank 0: "
                   "pid "));
  CHECK(slurp(terms) == "term\n");  // one SIGTERM, the stop's
  const double s = std::stod(slurp(elapsed));
  INFO("stop to exit: " << s << " s");
  CHECK(s > 5.5);  // the grace period ran
  CHECK(s < 9.5);  // one grace period (6 s) with room for a loaded machine; a second would end at about 11 s
}

TEST_CASE("exit code 127: a program megatron-run could not start and a shell's missing command are told apart",
          "[launch][supervision][process]") {
  TempDir dir;
  // The program's own 127: a shell that did not find a command.
  Proc missing = sh(kBin + " --nproc-per-node 2 --config " + kConfig +
                    " --no-append-args -- /bin/sh -c no_such_command_mr_test");
  INFO(missing.out);
  CHECK(missing.exit == 127);
  // Both ranks fail alike: either can be the first.
  CHECK((has(missing.out, "  root cause (first failure): rank 0 (local rank 0), pid ") ||
         has(missing.out, "  root cause (first failure): rank 1 (local rank 1), pid ")));
  CHECK(has(missing.out, "exited with code 127 at "));
  CHECK(has(missing.out, "    hint: exit code 127: a shell in the program could not find a command (its stderr says which)\n"));
  CHECK_FALSE(has(missing.out, "could not be started"));
  // megatron-run's 127: its exec failed (the interpreter the #! line names is not there).
  const fs::path script = dir.path / "no_interpreter.sh";
  std::ofstream(script) << "#!/nonexistent/mr-test-interpreter\necho hi\n";
  fs::permissions(script, fs::perms::owner_all);
  Proc unstartable = sh(kBin + " --nproc-per-node 2 --config " + kConfig + " --no-append-args -- " + script.string());
  INFO(unstartable.out);
  CHECK(unstartable.exit == 127);
  const std::string why = "cannot start " + script.string() +
                          ": No such file or directory (the file is there: the interpreter its #! line names, or its "
                          "ELF loader, is not)";
  // Both ranks fail alike here too: either can be the one the launcher reports first.
  CHECK((has(unstartable.out, "megatron-run: worker rank 0 (pid ") ||
         has(unstartable.out, "megatron-run: worker rank 1 (pid ")));
  CHECK(has(unstartable.out, ") could not be started (" + why + ")"));
  CHECK(has(unstartable.out, "could not be started by megatron-run (" + why + "; the exit code 127 is megatron-run's) at "));
  CHECK_FALSE(has(unstartable.out, "hint: exit code 127"));
  CHECK_FALSE(has(unstartable.out, "exited with code 127"));  // rank 1 could not be started either
}

// The child's note that its exec failed is trusted only with the exit code 127 it goes with: a child killed between
// the note and its _exit (here by a seccomp filter on exit_group(127), tests/launch/support/seccomp_run.cpp, as if by
// SIGSYS; SIGKILL from outside or the OOM killer alike) is described by the signal it ended by.
TEST_CASE("a child killed after its note that the exec failed is described by its signal, not as not started",
          "[launch][supervision][process]") {
  TempDir dir;
  const fs::path script = dir.path / "no_interpreter.sh";
  std::ofstream(script) << "#!/nonexistent/mr-test-interpreter\necho hi\n";
  fs::permissions(script, fs::perms::owner_all);
  Proc p = sh(std::string("'") + MR_SECCOMP_RUN + "' kill-exit-127 " + kBin + " --nproc-per-node 1 --config " +
              kConfig + " --no-append-args -- " + script.string());
  INFO(p.out);
  if (p.exit == 125 && has(p.out, "mr_test_seccomp_run: cannot install the filter")) {
    WARN("skipped: a seccomp filter cannot be installed here");
    return;
  }
  CHECK(p.exit == 128 + SIGSYS);
  CHECK(has(p.out, "megatron-run: cannot start " + script.string() + ": No such file or directory"));  // its own line
  CHECK(has(p.out, ") was killed by signal " + std::to_string(SIGSYS) + " (SIGSYS)\n"));
  CHECK(has(p.out, "  root cause (first failure): rank 0 (local rank 0), pid "));
  CHECK(has(p.out, "was killed by signal " + std::to_string(SIGSYS) + " (SIGSYS) at "));
  CHECK_FALSE(has(p.out, "could not be started"));
  CHECK_FALSE(has(p.out, "is megatron-run's"));
}

TEST_CASE("a rank that finished while the others run on is named once, after the wait; a normal end says nothing",
          "[launch][supervision][process][finished]") {
  // Rank 1 exits 0 at once, rank 0 runs 3 s more (a rank waiting for it would hang): named once, 1 s after. The
  // ranks time themselves from marks in `dir` (rank 1's `done.1`, and each one's `up.RANK`), not from their own
  // starts, which a loaded machine may set seconds apart.
  TempDir dir;
  const std::string d = dir.path.string();
  const std::string after1 = "while [ ! -e " + d + "/done.1 ]; do sleep 0.02; done; ";
  const std::string prog = " --no-append-args --no-python /bin/sh -c 'if [ \"$RANK\" = 1 ]; then : > " + d +
                           "/done.1; exit 0; fi; " + after1 + "sleep 3'";
  Proc r = sh("MR_FINISHED_NOTICE_S=1 " + kRun + "--nproc-per-node 2" + prog);
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(has(r.out, "megatron-run: worker rank 1 exited with code 0 more than 1 s ago, and 1 of 2 workers still run "
                   "(rank 0); if they wait for a rank that finished (a collective, a barrier), the job hangs"));
  size_t said = 0;
  for (size_t at = r.out.find("exited with code 0 more than"); at != std::string::npos;
       at = r.out.find("exited with code 0 more than", at + 1))
    ++said;
  CHECK(said == 1);
  // Ranks that end within the wait of each other (the usual end of a job): nothing said.
  // Both wait until the other is up, then rank 1 exits and rank 0 half a second later.
  const std::string both_up = ": > " + d + "/up.$RANK; while [ ! -e " + d + "/up.0 ] || [ ! -e " + d +
                              "/up.1 ]; do sleep 0.02; done; ";
  const std::string close_end = " --no-append-args --no-python /bin/sh -c '" + both_up +
                                "if [ \"$RANK\" = 1 ]; then exit 0; fi; sleep 0.5'";
  Proc quiet = sh("MR_FINISHED_NOTICE_S=2 " + kRun + "--nproc-per-node 2" + close_end);
  CHECK(quiet.exit == 0);
  CHECK_FALSE(has(quiet.out, "exited with code 0 more than"));
  // A failure after it stops the job as before (the notice does not count as a stop).
  fs::remove(dir.path / "done.1");
  const std::string fails = " --no-append-args --no-python /bin/sh -c 'if [ \"$RANK\" = 1 ]; then : > " + d +
                            "/done.1; exit 0; fi; " + after1 + "sleep 2; exit 4'";
  Proc f = sh("MR_FINISHED_NOTICE_S=1 " + kRun + "--nproc-per-node 2" + fails);
  CHECK(f.exit == 4);
  CHECK(has(f.out, "worker rank 1 exited with code 0 more than 1 s ago"));
}

TEST_CASE("the failure summary leaves torch's info and warning log lines out of the stderr tail, and counts them",
          "[launch][supervision][process][stderr-tail]") {
  TempDir dir;
  // A program that fails, then writes twelve c10d-style warnings as it goes down: the tail of ten lines would be
  // nothing but them.
  const fs::path script = dir.path / "noisy.sh";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\n"
         "echo 'Traceback (most recent call last):' >&2\n"
         "echo 'RuntimeError: the real error' >&2\n"
         "i=0\n"
         "while [ $i -lt 12 ]; do\n"
         "  echo \"[W1205 12:00:01.$i TCPStore.cpp:125] [c10d] recvValue failed: Connection reset by peer\" >&2\n"
         "  i=$((i + 1))\n"
         "done\n"
         "echo 'E1205 12:00:02.000000  77 ProcessGroupGloo.cpp:144] the error line stays' >&2\n"
         "exit 3\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  // Two ranks: their stderr goes through the launcher (one rank's goes straight to the console). Both fail alike.
  Proc r = sh(kBin + " --nproc-per-node 2 --config " + kConfig + " --no-append-args -- " + script.string());
  INFO(r.out);
  CHECK(r.exit == 3);
  const size_t root = r.out.find("megatron-run: the job failed\n");
  REQUIRE(root != std::string::npos);
  const std::string summary = r.out.substr(root);
  CHECK(has(summary, "    last 3 lines of its stderr (12 torch log lines left out):\n"
                     "      Traceback (most recent call last):\n"
                     "      RuntimeError: the real error\n"
                     "      E1205 12:00:02.000000  77 ProcessGroupGloo.cpp:144] the error line stays\n"));
  CHECK_FALSE(has(summary, "recvValue failed"));
  // The console still got every line as it came.
  CHECK(has(r.out.substr(0, root), "[c10d] recvValue failed"));
}

// The launcher's stdout fails while the workers run (review 28c F4, F6): a full device or a reader that went away is
// the launcher's failure (said once, the workers stopped with SIGTERM and the grace period, exit 1), unless the
// lines also go to log files (--tee: the console copy is lost, said once, the job goes on). SIGPIPE never kills the
// launcher (kill -PIPE), and the workers get its default back.
TEST_CASE("stdout on a full device or a closed pipe: exit 1 and the workers stopped; tee'd: a notice; SIGPIPE ignored",
          "[launch][supervision][process][output]") {
  TempDir t;
  const std::string in = "cd '" + t.path.string() + "' && ";
  const std::string run = "timeout -k 5 90 env " + kRun + "--nproc-per-node 2 --no-append-args -- ";
  Proc full = run_shell(in + run + "sh -c 'echo hi $RANK; sleep 0.5; echo bye $RANK' 2>&1 >/dev/full; echo exit=$?");
  INFO(full.out);
  CHECK(has(full.out, "megatron-run: error: cannot write the output: a write to stdout failed: No space left on device"));
  CHECK(has(full.out, "exit=1"));
  // A reader that goes away: the workers get SIGTERM (their trap says so) within the grace period, not SIGKILL.
  // Each rank sets its trap, marks it (trapped.RANK) and waits for the other's mark before its line: the stop that
  // line brings finds both trapped, however far apart a loaded machine starts them.
  Proc pipe = run_shell(in + "(" + run + "sh -c 'trap \"echo term > term.$RANK; exit 0\" TERM; : > trapped.$RANK; "
                        "while [ ! -e trapped.0 ] || [ ! -e trapped.1 ]; do sleep 0.02; done; sleep 0.5; echo a; "
                        "sleep 20 & wait' 2>err.txt; echo exit=$? > code.txt) | true; cat err.txt code.txt; ls");
  INFO(pipe.out);
  CHECK(has(pipe.out, "megatron-run: error: cannot write the output: stdout is a pipe whose reader has gone"));
  CHECK(has(pipe.out, "exit=1"));
  CHECK(has(pipe.out, "term.0"));
  CHECK(has(pipe.out, "term.1"));
  CHECK_FALSE(has(pipe.out, "ended without stopping its workers"));
  // --tee: the lines are in the log files; the job's own code.
  Proc tee = run_shell(in + run.substr(0, run.find("--no-append-args")) + "--log-dir logs --tee 3 --no-append-args -- "
                       "sh -c 'echo hi $RANK; sleep 0.3; echo bye $RANK' 2>&1 >/dev/full; echo exit=$?; "
                       "cat logs/*/attempt_0/1/stdout.log");
  INFO(tee.out);
  CHECK(has(tee.out, "cannot write the output: a write to stdout failed: No space left on device; the workers' "
                     "stdout goes on into their log files only"));
  CHECK(has(tee.out, "exit=0"));
  CHECK(has(tee.out, "hi 1\nbye 1\n"));
  // kill -PIPE of the launcher (itself, under no `timeout`: its workers end after a second) while the workers run:
  // ignored; the workers finish and the job exits 0. They have SIGPIPE's default (SigIgn in /proc lacks bit 13).
  Proc sig = run_shell(in + "rm -f ready.*; (exec env " + kRun + "--nproc-per-node 2 --no-append-args -- sh -c 'grep SigIgn /proc/self/status; touch ready.$RANK; "
                       "sleep 1; echo done-$RANK' > out.txt 2>&1) & pid=$!; for i in $(seq 600); do [ -e ready.0 ] && "
                       "[ -e ready.1 ] && break; sleep 0.05; done; kill -PIPE $pid; wait $pid; echo exit=$?; cat out.txt");
  INFO(sig.out);
  CHECK(has(sig.out, "exit=0"));
  CHECK(has(sig.out, "[rank 0] done-0"));
  CHECK(has(sig.out, "[rank 1] done-1"));
  const size_t ign = sig.out.find("[rank 0] SigIgn:");
  REQUIRE(ign != std::string::npos);
  const unsigned long long mask = std::stoull(sig.out.substr(ign + 16, sig.out.find('\n', ign) - ign - 16), nullptr, 16);
  CHECK((mask & (1ULL << (SIGPIPE - 1))) == 0);
}

// A file-size limit (ulimit -f): the launcher's write of a log file past it fails (EFBIG) instead of SIGXFSZ
// killing the launcher, and its workers with it; the workers get SIGXFSZ's default back (ckpt35 F5).
TEST_CASE("a --log-dir file past the file-size limit (ulimit -f) does not kill the launcher; the workers get "
          "SIGXFSZ's default", "[launch][supervision][process][output]") {
  TempDir t;
  // 8 blocks (4 KiB in dash, 8 in bash): rank 0 writes 20 KB to its stdout, which -r 3 sends to its log file only.
  Proc r = run_shell("cd '" + t.path.string() + "' && (ulimit -f 8 && exec timeout -k 5 90 env " + kRun +
                     "--nproc-per-node 1 --rdzv-id fsz --log-dir logs -r 3 --no-append-args -- sh -c 'grep SigIgn "
                     "/proc/self/status; yes | head -c 20000; echo done >&2') > out.txt 2>&1; "
                     "echo exit=$?; cat out.txt");
  INFO(r.out);
  CHECK(has(r.out, "exit=0"));
  CHECK_FALSE(has(r.out, "SIGXFSZ"));
  const fs::path a0 = run_dir(t.path / "logs", "fsz") / "attempt_0" / "0";
  const std::string log = slurp(a0 / "stdout.log");
  CHECK((log.size() == 4096 || log.size() == 8192));  // what fit under the limit (8 blocks of dash's or bash's size)
  CHECK(has(slurp(a0 / "stderr.log"), "done"));
  const size_t ign = log.find("SigIgn:");
  REQUIRE(ign != std::string::npos);
  const unsigned long long mask = std::stoull(log.substr(ign + 7, log.find('\n', ign) - ign - 7), nullptr, 16);
  CHECK((mask & (1ULL << (SIGXFSZ - 1))) == 0);
}

// A write to a log file fails (here EFBIG past `ulimit -f`; a full disk's ENOSPC is the same path): the launcher says
// it once per file on its stderr with the file and the system's reason (rule launch.log-write-failed), writes nothing
// more there, and the job goes on: exit 0, and the console copy of the tee'd stream still gets every line. A failed
// job's summary names the file; a stream that went to its file only (-r) says its further output is lost.
TEST_CASE("rule launch.log-write-failed: a log file write that fails (ulimit -f) is said once per file; the job goes "
          "on and the console keeps every line", "[launch][supervision][process][output][log-write]") {
  TempDir t;
  auto count = [](const std::string& s, const std::string& part) {
    size_t n = 0;
    for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
    return n;
  };
  // 8 blocks (4 KiB in dash, 8 in bash); rank 0 prints 3000 lines (about 30 KB) to its stdout, tee'd (-t 1) to
  // stdout.log, and every line also to filtered_stdout.log (--duplicate-stdout-filters line). The console is the
  // pipe run_shell reads (no file: the limit does not touch it).
  const std::string worker = "sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo line $i; done'";
  Proc r = run_shell("cd '" + t.path.string() + "' && (ulimit -f 8 && exec timeout -k 5 90 env " + kRun +
                     "--nproc-per-node 1 --rdzv-id lwf --log-dir logs -t 1 --duplicate-stdout-filters line "
                     "--no-append-args -- " + worker + ") 2>&1; echo exit=$?");
  INFO(r.out);
  CHECK(has(r.out, "exit=0"));
  const std::string lost = "megatron-run: warning[launch.log-write-failed]: cannot write the log file ";
  CHECK(count(r.out, lost) == 2);  // once per file, however many writes came after
  CHECK(count(r.out, "/attempt_0/0/stdout.log: File too large (past the file-size limit, `ulimit -f`: ") == 1);
  CHECK(count(r.out, "/attempt_0/filtered_stdout.log: File too large (past the file-size limit, `ulimit -f`: ") == 1);
  CHECK(count(r.out, "; nothing more is written to it, its further output goes to the console only; the job goes on\n") == 2);
  // The console got every line, in order (one rank: no prefix; the launcher's own lines come between).
  std::string shown, expected;
  for (size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1)
    if (r.out.compare(at, 5, "line ") == 0) shown += r.out.substr(at, nl + 1 - at);
  for (int i = 1; i <= 3000; ++i) expected += "line " + std::to_string(i) + "\n";
  CHECK(shown == expected);
  CHECK_FALSE(has(r.out, "the job failed"));
  const fs::path a0 = run_dir(t.path / "logs", "lwf") / "attempt_0";
  const auto size = fs::file_size(a0 / "0" / "stdout.log");
  CHECK((size == 4096 || size == 8192));  // what fit under the limit
  CHECK(has(slurp(a0 / "0" / "stdout.log"), "line 1\nline 2\n"));
  const auto filtered = fs::file_size(a0 / "filtered_stdout.log");
  CHECK((filtered == 4096 || filtered == 8192));

  // -r 1: stdout goes to its file only, so what the file cannot take is lost (said); the worker then fails (exit 3):
  // the failure summary lists the incomplete log file with its reason.
  Proc f = run_shell("cd '" + t.path.string() + "' && (ulimit -f 8 && exec timeout -k 5 90 env " + kRun +
                     "--nproc-per-node 1 --rdzv-id lwf2 --log-dir logs -r 1 --no-append-args -- sh -c 'i=0; while "
                     "[ $i -lt 3000 ]; do i=$((i+1)); echo line $i; done; exit 3') 2>&1; echo exit=$?");
  INFO(f.out);
  CHECK(has(f.out, "exit=3"));
  CHECK(count(f.out, lost) == 1);
  CHECK(has(f.out, "/attempt_0/0/stdout.log: File too large (past the file-size limit, `ulimit -f`: "));
  CHECK(has(f.out, "; nothing more is written to it, its further output is lost (it is not shown on the console); "
                   "the job goes on\n"));
  CHECK_FALSE(has(f.out, "\nline 3000\n"));
  const size_t summary = f.out.find("megatron-run: the job failed");
  REQUIRE(summary != std::string::npos);
  const std::string tail = f.out.substr(summary);
  const size_t listed = tail.find("  log file left incomplete (a write failed; nothing after it was written there):\n    ");
  REQUIRE(listed != std::string::npos);
  CHECK(has(tail.substr(listed), "/attempt_0/0/stdout.log: File too large (past the file-size limit"));

  // The console (a file under the same limit) and the log file both fail, a full disk holding both (review diff36
  // #1): each is said, the output is lost from then on, and the job still goes on to its own exit code.
  const std::string console = (t.path / "console.txt").string();
  Proc both = run_shell("cd '" + t.path.string() + "' && (ulimit -f 8 && exec timeout -k 5 90 env " + kRun +
                        "--nproc-per-node 1 --rdzv-id lwf3 --log-dir logs -t 1 --no-append-args -- " + worker +
                        " 2>&1 >'" + console + "'); echo exit=$?");  // the launcher's stderr to the pipe read here
  INFO(both.out);
  CHECK(has(both.out, "exit=0"));
  CHECK(count(both.out, lost) == 1);
  CHECK(has(both.out, "megatron-run: notice: cannot write the output: "));
  CHECK(has(both.out, "the workers' stdout goes on into their log files only (--log-dir, --tee), where those can be "
                      "written; the job goes on"));
  CHECK_FALSE(has(both.out, "stopping the workers"));
}

// coreutils' timeout -s INT signals the launcher, then its own process group (the launcher's): one event, said and
// passed on once (review 28c F12).
TEST_CASE("a signal delivered twice at once (timeout -s INT) is said and passed on once", "[launch][supervision][process][signal]") {
  Proc r = run_shell("timeout -s INT 2 env " + kRun + "--nproc-per-node 2 --no-append-args -- sh -c 'sleep 30' 2>&1; "
                     "echo exit=$?");
  INFO(r.out);
  size_t n = 0;
  for (size_t at = r.out.find("received signal 2 (SIGINT)"); at != std::string::npos;
       at = r.out.find("received signal 2 (SIGINT)", at + 1))
    ++n;
  CHECK(n == 1);
  CHECK(has(r.out, "megatron-run: received signal 2 (SIGINT); forwarding it to the workers; they get 30 s to stop "
                   "(--term-timeout), then are killed\n"));
  CHECK(has(r.out, "exit=124"));
}

// The launcher's own TORCHELASTIC_ERROR_FILE gets the root cause's record, as torchrun's @record main copies it;
// without --log-dir the run directory holding the error file the summary names is kept.
TEST_CASE("the launcher's TORCHELASTIC_ERROR_FILE gets the root cause; the error file the summary names stays",
          "[launch][supervision][process][error-file]") {
  TempDir t;
  const fs::path mine = t.path / "launcher.json";
  fs::create_directories(t.path / "tmp");
  fs::create_directories(t.path / "tmp2");
  // A worker that wrote its error file (@record's format, here without torch): copied, errorCode its exit code.
  Proc r = sh("FAULT=error-file TMPDIR='" + (t.path / "tmp").string() + "' TORCHELASTIC_ERROR_FILE='" +
              mine.string() + "' " + kRun + "--nproc-per-node 2 --term-timeout 5 --no-append-args " + kFaults);
  INFO(r.out);
  CHECK(r.exit == 5);
  const std::string copied = slurp(mine);
  CHECK(has(copied, "\"message\": \"ValueError: written by rank 1\""));
  CHECK(has(copied, "\"py_callstack\": \"Traceback: here\""));
  CHECK(has(copied, "\"errorCode\": 5"));
  // The summary names the worker's error file, and it is still there after the launcher exits (with a line).
  const size_t at = r.out.find("    error file ");
  REQUIRE(at != std::string::npos);
  const size_t from = at + std::string("    error file ").size();
  const std::string named = r.out.substr(from, r.out.find(":\n", from) - from);
  CHECK(has(named, "/attempt_0/1/error.json"));
  CHECK(fs::exists(named));
  CHECK(has(r.out, "kept: it holds the root cause's error file (rank 1: " + named + ")"));
  // No worker wrote one: the temporary directory goes, and the launcher's file gets a record of the root cause.
  Proc n = sh("FAULT=ignore-term TMPDIR='" + (t.path / "tmp2").string() + "' TORCHELASTIC_ERROR_FILE='" +
              mine.string() + "' " + kRun + "--nproc-per-node 2 --term-timeout 1 --no-append-args " + kFaults);
  INFO(n.out);
  CHECK(n.exit == 4);
  const std::string record = slurp(mine);
  CHECK(has(record, "\"message\": \"worker rank 1 (local rank 1), pid "));
  CHECK(has(record, " exited with code 4\""));
  CHECK(has(record, "\"errorCode\": 4"));
  CHECK_FALSE(has(n.out, "kept: it holds"));
  // A launcher's file that cannot be written is said; the exit code stays the root cause's.
  Proc bad = sh("FAULT=ignore-term TORCHELASTIC_ERROR_FILE=/nonexistent-dir/x.json " + kRun +
                "--nproc-per-node 2 --term-timeout 1 --no-append-args " + kFaults);
  INFO(bad.out);
  CHECK(bad.exit == 4);
  CHECK(has(bad.out, "megatron-run: cannot write the launcher's error file /nonexistent-dir/x.json "
                     "(TORCHELASTIC_ERROR_FILE): No such file or directory"));
}

// After a stop to the launcher no worker's end is a root cause: every worker of the node in one line, none alone.
// The launcher's own TORCHELASTIC_ERROR_FILE gets torchrun's record of the stop (its agent's SignalException).
TEST_CASE("after a stop signal, every worker of the node is named in one line",
          "[launch][supervision][process][signal]") {
  TempDir t;
  const fs::path mine = t.path / "launcher.json";
  Proc r = signal_launcher(t.path, "FAULT=term FAULT_RANK=1 TORCHELASTIC_ERROR_FILE='" + mine.string() + "'", "",
                           "TERM");
  INFO(r.out);
  CHECK(has(r.out, "exit=143"));
  const std::string record = slurp(mine);
  INFO(record);
  CHECK(has(record, "\"message\": \"SignalException: Process "));
  CHECK(has(record, " got signal: 15\""));
  CHECK(has(record, "received signal 15 (SIGTERM) and stopped its workers"));
  CHECK(has(record, "\"timestamp\": \""));
  CHECK_FALSE(has(record, "errorCode"));
  CHECK(has(r.out, "megatron-run: this node's workers after the stop: rank 0 (pid "));
  CHECK(has(r.out, ") exited with code 0, rank 1 (pid "));
  CHECK(has(r.out, ") was killed by signal 15 (SIGTERM)\n"));
  CHECK_FALSE(has(r.out, "megatron-run: worker rank "));
}

namespace {

// A launch of `worker` (python3, 2 workers, --term-timeout 3) whose stdout (`stream` "out") or stderr ("err") is a
// FIFO the shell holds open and never reads (a stuck pipe consumer), the other stream a file (out.txt, err.txt).
// With `signal`, SIGTERM goes to the launcher once both workers are up (their ready.RANK files) and a second
// later; without, the launch runs on its own. The launcher is killed (-9) if still there 30 s after; the output
// ends with "exit=CODE" and "ms=N" (since the SIGTERM, else since the start), then err.txt.
Proc unread_stream_launch(const TempDir& t, const std::string& stream, const std::string& worker, bool signal) {
  std::ofstream(t.path / "worker.py") << worker;
  const std::string out = stream == "out" ? "out.fifo" : "out.txt", err = stream == "err" ? "err.fifo" : "err.txt";
  return run_shell("cd '" + t.path.string() + "' && mkfifo " + stream + ".fifo && exec 3<>" + stream + ".fifo || "
                   "exit 1; touch err.txt; t0=$(date +%s%N); (exec env " + kRun + "--nproc-per-node 2 --term-timeout 3 "
                   "--no-append-args -- python3 worker.py > " + out + " 2> " + err + ") & pid=$!; " +
                   (signal ? "for i in $(seq 600); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.05; done; "
                             "sleep 1; t0=$(date +%s%N); kill -TERM $pid; "
                           : "") +
                   "for i in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done; "
                   "kill -KILL $pid 2>/dev/null; wait $pid; echo exit=$?; "
                   "echo ms=$(( ($(date +%s%N) - t0) / 1000000 )); exec 3<&-; cat err.txt");
}

// The milliseconds unread_stream_launch printed ("ms=N").
long launch_ms(const Proc& r) {
  const size_t ms = r.out.find("ms=");
  return ms == std::string::npos ? -1 : std::stol(r.out.substr(ms + 3));
}

}  // namespace

// A stdout whose reader does not read (a stuck pipe consumer; here a FIFO the shell holds open and never reads):
// the launcher still reads its signal pipe, passes SIGTERM on at once and exits within the grace period, dropping
// what the reader did not take, with a warning (review 29b F1: a blocking write held the launcher until the reader
// went away).
TEST_CASE("a stdout reader that does not read: SIGTERM is passed on, the launcher exits 143 within --term-timeout",
          "[launch][supervision][process][signal][output]") {
  TempDir t;
  Proc r = unread_stream_launch(t, "out", "import os, sys\nopen('ready.' + os.environ['RANK'], 'w').close()\n"
                                          "while True: sys.stdout.write('x' * 200 + '\\n')\n", true);
  INFO(r.out);
  CHECK(has(r.out, "megatron-run: received signal 15 (SIGTERM); forwarding it to the workers"));
  CHECK(has(r.out, "exit=143"));
  CHECK(has(r.out, "rank 0 (pid "));
  CHECK(has(r.out, "was killed by signal 15 (SIGTERM), rank 1"));  // passed on; not the grace period's SIGKILL
  CHECK_FALSE(has(r.out, "killing them"));
  CHECK(has(r.out, "bytes of the workers' output for stdout were not written: its reader took nothing more by the end "
                   "of the grace period (--term-timeout 3 s); dropped"));
  CHECK(launch_ms(r) >= 0);
  CHECK(launch_ms(r) < 5000);  // the grace period (3 s) and a little
}

// The same with stderr: the workers fill the launcher's stderr pipe, whose reader never reads, to its last byte
// (each relayed line with its "[rank N] " prefix is 4096 bytes, a pipe page). The launcher's own lines ("received
// signal 15 ...") queue behind theirs instead of blocking it (written directly, they held the launcher in that
// write: SIGTERM never passed on, killed after 30 s), so it passes SIGTERM on and exits within the grace period.
TEST_CASE("a stderr reader that does not read: SIGTERM is passed on, the launcher exits 143 within --term-timeout",
          "[launch][supervision][process][signal][output]") {
  TempDir t;
  Proc r = unread_stream_launch(t, "err", "import os, sys\nopen('ready.' + os.environ['RANK'], 'w').close()\n"
                                          "while True: sys.stderr.write('x' * 4086 + '\\n')\n", true);
  INFO(r.out);
  CHECK(has(r.out, "exit=143"));
  CHECK(launch_ms(r) >= 0);
  CHECK(launch_ms(r) < 5000);  // the grace period (3 s) and a little
}

// The same reader with a worker that fails: rank 0 fills stderr (64 lines of a pipe page each) and exits 3, rank 1
// goes on. The launcher stops rank 1, drops at the end of the grace period what stderr's reader never took, and
// then writes its failure summary only as far as stderr takes it at once: it exits 3 on its own. (The summary was
// a blocking write: the launcher hung there for good, a SIGTERM caught and the write resumed; review 30.)
TEST_CASE("a stderr reader that does not read: a worker failure still ends the launch (exit 3, summary not awaited)",
          "[launch][supervision][process][output]") {
  TempDir t;
  Proc r = unread_stream_launch(t, "err", "import os, sys, time\nopen('ready.' + os.environ['RANK'], 'w').close()\n"
                                          "for _ in range(64): sys.stderr.write('x' * 4086 + '\\n')\n"
                                          "if os.environ['RANK'] == '0': sys.exit(3)\ntime.sleep(60)\n", false);
  INFO(r.out);
  CHECK(has(r.out, "exit=3"));
  CHECK(launch_ms(r) >= 0);
  CHECK(launch_ms(r) < 20000);  // start, the grace period (3 s), and a margin; not the 30 s kill
}

TEST_CASE("a worker is a session leader: a read of the terminal it inherited is not stopped by SIGTTIN",
          "[launch][supervision][process][terminal]") {
  // Review launch37 #1: each worker was a process group of its own in the terminal's session, a background group
  // there: `breakpoint()` / `input()` on rank 0 stopped it (SIGTTIN) and the job hung silently. The launcher runs
  // on a pseudo-terminal (on_terminal.py, the controlling terminal of its session); the worker says its pid, its
  // process group and its session (/proc/self/stat's fields 5 and 6), and reads a line, which on_terminal.py
  // types once it sees "ready".
  TempDir dir;
  std::ofstream(dir.path / "reader.sh")
      << "read pid comm state ppid pgrp sid rest < /proc/$$/stat\n"
      << "echo \"ready pid=$pid pgrp=$pgrp sid=$sid\"\n"
      << "read line\n"
      << "echo \"got:$line\"\n";
  const std::string driver = std::string(MR_SOURCE_DIR) + "/tests/launch/programs/on_terminal.py";
  const std::string cmd = "exec " + kBin + " --nproc-per-node 1 --config " + kConfig +
                          " --no-append-args --no-python /bin/sh " + (dir.path / "reader.sh").string();
  Proc r = run_shell("timeout -k 5 60 /usr/bin/python3 " + driver + " \"" + cmd + "\" 20 2>&1");
  INFO(r.out);
  CHECK(has(r.out, "got:typed"));
  CHECK(has(r.out, "exit=0"));
  CHECK_FALSE(has(r.out, "TIMEOUT"));
  // getsid(pid) == pid, and the group the launcher signals is still the worker's pid.
  const size_t at = r.out.find("ready pid=");
  REQUIRE(at != std::string::npos);
  std::istringstream line(r.out.substr(at + 10, r.out.find('\n', at) - at - 10));
  std::string pid, pgrp, sid;
  line >> pid >> pgrp >> sid;
  CHECK(pgrp == "pgrp=" + pid);
  CHECK(sid == "sid=" + pid);
}

TEST_CASE("the kept log directory's line names the root cause's error file, or says the root cause wrote none",
          "[launch][supervision][process][error-file]") {
  // Review launch37 #4: it named whichever worker's error file came first in the directory, a cascade rank's.
  TempDir t;
  fs::create_directories(t.path / "tmp");
  Proc r = sh("FAULT=others-file TMPDIR='" + (t.path / "tmp").string() + "' " + kRun +
              "--nproc-per-node 2 --term-timeout 5 --no-append-args " + kFaults);
  INFO(r.out);
  CHECK(r.exit == 6);
  CHECK_FALSE(has(r.out, "    error file "));  // the root cause (rank 1) wrote none: the summary names none
  CHECK(has(r.out, "kept: it holds error files of workers that failed after the root cause (rank 1, which wrote "
                   "none): "));
  CHECK(has(r.out, "/attempt_0/0/error.json\n"));
  CHECK_FALSE(has(r.out, "kept: it holds a worker's error file"));
  // Review launch37 #8: rank 0, which wrote its own error file, is not only "killed by signal 15" in the cascade.
  CHECK(has(r.out, "wrote its error file "));
  CHECK(has(r.out, "/attempt_0/0/error.json (ConnectionError: written by rank 0), then was killed by signal 15 "
                   "(SIGTERM) (after the launcher stopped the workers)"));
}

TEST_CASE("a relative --log-dir gives the workers absolute paths", "[launch][supervision][process][log-dir]") {
  // Review launch37 #3: TORCHELASTIC_ERROR_FILE was relative, and @record failed after the program's os.chdir.
  TempDir t;
  std::ofstream(t.path / "show.sh") << "echo \"EF=$TORCHELASTIC_ERROR_FILE\"\n";
  Proc r = sh("sh -c \"cd '" + t.path.string() + "' && exec env " + kRun + "--nproc-per-node 1 --log-dir logs/ "
              "--no-append-args --no-python /bin/sh show.sh\"");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(has(r.out, "EF=" + (t.path / "logs").string() + "/none_"));
  CHECK(has(r.out, "megatron-run: log directory " + (t.path / "logs").string() + "/none_"));
}

TEST_CASE("a reader that went away before the failure summary does not change the exit code",
          "[launch][supervision][process][sigpipe]") {
  // Review launch37 #10: SIGPIPE was ignored only while the workers ran; the summary written into the closed pipe
  // killed the launcher (141) and the root cause's code was lost. Rank 1 writes its error file and exits 5, so the
  // temporary log directory is kept and said last, after the workers' signal handling has ended. `true` has gone
  // long before.
  TempDir t;
  Proc r = run_shell("{ (FAULT=error-file TMPDIR='" + t.path.string() + "' timeout -k 5 60 env " + kRun +
                     "--nproc-per-node 2 --term-timeout 5 --no-append-args " + kFaults +
                     " 2>&1; echo \"exit=$?\" >&3) | true; } 3>&1");
  INFO(r.out);
  CHECK(has(r.out, "exit=5"));
}

TEST_CASE("--local-ranks-filter: a filtered root cause's stderr tail still reaches the failure summary",
          "[launch][supervision][process][local-ranks-filter]") {
  // Review launch37 #9: rank 1's stderr went to /dev/null (no log file) while the summary said it had gone
  // "straight to the console (above)". Its console copy stays hidden; its last lines are in the summary.
  Proc r = faults("FAULT=first-attempt ", "--local-ranks-filter 0 ");
  INFO(r.out);
  CHECK(r.exit == 3);
  CHECK_FALSE(has(r.out, "[rank 1] rank 1 fails on attempt 0"));  // not on the console
  CHECK(has(r.out, "    last 1 line of its stderr (not shown on the console: --local-ranks-filter):\n"
                   "      rank 1 fails on attempt 0\n"));
  CHECK_FALSE(has(r.out, "went straight to the console"));
}

// A rank that fails only because another rank failed (megatron-run's worker writes extraInfo.follows_rank into its
// error file) may exit first: the summary's root cause is the rank it names, and the first to exit keeps its
// message in the cascade, not "after the launcher stopped the workers" (review user39 #4).
TEST_CASE("the root cause is the rank a follower's error file names, not the first rank to exit",
          "[launch][supervision][process][error-file]") {
  Proc r = faults("FAULT=follower FAULT_RANK=0 ", "--term-timeout 5 ");
  INFO(r.out);
  CHECK(r.exit == 1);  // the first failure's code, as before
  const size_t at = r.out.find("megatron-run: the job failed\n");
  REQUIRE(at != std::string::npos);
  const std::string summary = r.out.substr(at);
  CHECK(has(summary, "  root cause (first failure): rank 0 (local rank 0), pid "));
  CHECK(has(summary, "exited with code 3 at "));
  CHECK(has(summary, "      rank 0: the real failure\n"));  // its stderr tail
  CHECK(has(summary, "    it failed first; rank 1 (pid "));
  CHECK(has(summary, "which exited first, failed because of it (its error file says so; below)\n"));
  CHECK(has(summary, "  then (the cascade):\n    rank 1 (local rank 1), pid "));
  CHECK(has(summary, "/attempt_0/1/error.json (loading failed on rank 0: the real failure), then exited with code 1\n"));
  CHECK_FALSE(has(summary, "after the launcher stopped the workers"));
  // A rank no worker of the job has (5 in a world of 2): no other node's either; the first failure is the root
  // cause (review diff39 #4; a rank of another node: failure_report_test.cpp).
  Proc e = faults("FAULT=follower FAULT_RANK=5 ");
  INFO(e.out);
  CHECK(e.exit == 1);
  CHECK_FALSE(has(e.out, "on another node"));
  CHECK(has(e.out, "  root cause (first failure): rank "));
}

// Workers that all die of a signal the launcher passed on without stopping them (SIGUSR1): named together as killed
// by it, no root cause picked among them, none "after the launcher stopped the workers" (review user39 #5).
TEST_CASE("workers all killed by a forwarded SIGUSR1: the summary names the signal, no root cause",
          "[launch][supervision][process][signal]") {
  TempDir t;
  Proc r = signal_launcher(t.path, "FAULT=usr1-default FAULT_RANK=all", "--term-timeout 2", "USR1");
  INFO(r.out);
  CHECK(has(r.out, "exit=138"));
  CHECK(has(r.out, "  the workers were killed by signal 10 (SIGUSR1), which the launcher received and passed on to "
                   "them (it does not stop the workers; their programs do not handle it):\n"));
  CHECK(has(r.out, "    rank 0 (local rank 0), pid "));
  CHECK(has(r.out, "    rank 1 (local rank 1), pid "));
  CHECK_FALSE(has(r.out, "root cause"));
  CHECK_FALSE(has(r.out, "after the launcher stopped the workers"));
}

// A second stop signal (Ctrl-C again) after the stop began, later than the de-duplication window: SIGKILL at once,
// not the rest of --term-timeout (review user39 #7). The launcher is a background job, whose SIGINT the shell
// ignores: --signals-to-handle names it, so it is caught. The window counts from the launcher's taking of the first
// (its "forwarding" line), so the second goes 1.5 s after that line, not after the first kill (a loaded launcher
// may take the first late, and the two would then count as one).
TEST_CASE("a second SIGINT after the stop began kills the workers at once", "[launch][supervision][process][signal]") {
  TempDir t;
  const std::string dir = t.path.string();
  Proc r = run_shell("cd '" + dir + "' || exit 1; (exec env FAULT=stubborn FAULT_READY='" + dir + "/ready' " + kRun +
                     "--nproc-per-node 2 --signals-to-handle SIGINT,SIGTERM --no-append-args " + kFaults +
                     " > out.txt 2>&1) & pid=$!; " + kGuard + " & guard=$!; "
                     "for i in $(seq 600); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.1; done; "
                     "kill -INT $pid; for i in $(seq 600); do grep -q 'SIGINT); forwarding' out.txt && break; "
                     "sleep 0.1; done; sleep 1.5; t0=$(date +%s%N); kill -INT $pid; wait $pid; echo exit=$?; "
                     "echo ms=$(( ($(date +%s%N) - t0) / 1000000 )); kill $guard 2>/dev/null; cat out.txt");
  INFO(r.out);
  CHECK(has(r.out, "exit=130"));
  CHECK(has(r.out, "megatron-run: received signal 2 (SIGINT); forwarding it to the workers; they get 30 s to stop"));
  CHECK(has(r.out, "megatron-run: received signal 2 (SIGINT) again: killing the workers now (SIGKILL; a second stop "
                   "signal ends the grace period of --term-timeout)\n"));
  CHECK_FALSE(has(r.out, "s after the stop signal (--term-timeout); killing them"));
  const size_t ms = r.out.find("ms=");
  REQUIRE(ms != std::string::npos);
  CHECK(std::stol(r.out.substr(ms + 3)) < 10000);  // not the 30 s of --term-timeout
}

namespace {

// Workers that ignore SIGINT and SIGTERM (faults.py stubborn) under a launcher in the background of `dir` that
// catches both (--signals-to-handle: a background job's SIGINT is ignored otherwise); once both are ready it runs
// `signals` (shell, $pid the launcher), then prints exit=<status>, ms=<ms from the start of `signals` to the
// launcher's end> and out.txt.
// `env`: more variables for the launcher (each followed by a space).
Proc stubborn_signals(const std::string& dir, const std::string& signals, const std::string& env = "") {
  return run_shell("cd '" + dir + "' || exit 1; (exec env " + env + "FAULT=stubborn FAULT_READY='" + dir + "/ready' " + kRun +
                   "--nproc-per-node 2 --signals-to-handle SIGINT,SIGTERM --no-append-args " + kFaults +
                   " > out.txt 2>&1) & pid=$!; " + kGuard + " & guard=$!; "
                   "for i in $(seq 600); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.1; done; "
                   "t0=$(date +%s%N); " + signals + "; wait $pid; echo exit=$?; "
                   "echo ms=$(( ($(date +%s%N) - t0) / 1000000 )); kill $guard 2>/dev/null; cat out.txt");
}

// SIGINT (forwarded), SIGTERM once the launcher says so (the second stop signal: the workers killed), and a third
// SIGTERM once MR_TEST_DELAY_AFTER_FORWARDING_S holds the launcher after the workers ended (the late-signal tests).
const std::string kThirdSignalAfterWorkersEnded =
    "kill -INT $pid; for i in $(seq 600); do grep -q 'SIGINT); forwarding' out.txt && break; sleep 0.05; done; "
    "kill -TERM $pid; for i in $(seq 600); do grep -q 'MR_TEST_DELAY_AFTER_FORWARDING_S:' out.txt && break; "
    "sleep 0.05; done; kill -TERM $pid";

long ms_of(const std::string& out) {
  const size_t ms = out.find("ms=");
  return ms == std::string::npos ? -1 : std::stol(out.substr(ms + 3));
}

}  // namespace

// A human's double Ctrl-C lands 0.2-0.8 s apart: the second ends the grace period; it was folded into the first
// by a 1 s "same delivery" window, without a word, and the user waited out --term-timeout (review user40 #3). The
// second goes 0.3 s after the launcher's "forwarding" line (so at least 0.3 s after it took the first: more under
// load, never less).
TEST_CASE("a second SIGINT 0.3 s after the first (a double Ctrl-C) kills the workers at once",
          "[launch][supervision][process][signal]") {
  TempDir t;
  const Proc r = stubborn_signals(t.path.string(), "kill -INT $pid; for i in $(seq 600); do "
                                                   "grep -q 'SIGINT); forwarding' out.txt && break; sleep 0.05; done; "
                                                   "sleep 0.3; kill -INT $pid");
  INFO(r.out);
  CHECK(has(r.out, "exit=130"));
  CHECK(has(r.out, "megatron-run: received signal 2 (SIGINT) again: killing the workers now (SIGKILL; a second stop "
                   "signal ends the grace period of --term-timeout)\n"));
  CHECK_FALSE(has(r.out, "taken as the same delivery"));
  CHECK_FALSE(has(r.out, "s after the stop signal (--term-timeout); killing them"));
  const long ms = ms_of(r.out);
  CHECK(ms >= 0);
  CHECK(ms < 10000);  // not the 30 s of --term-timeout
}

// SIGTERM right after SIGINT (a Ctrl-C just before scancel): another signal, never folded into the first; it is
// the second stop signal, so the workers are killed at once and the exit code stays the first's, 130. It was
// forwarded as a new stop within 1 s of the first, the launcher waited out --term-timeout and exited 143 (review
// user40 #4). Both are sent back to back by one process: the launcher may take them in one pass or two; the
// handler blocks every signal while it runs, so SIGINT (sent first, and the lower number when both are pending) is
// taken first either way.
TEST_CASE("SIGTERM right after SIGINT is the second stop signal: killed at once, exit 130",
          "[launch][supervision][process][signal]") {
  TempDir t;
  const Proc r = stubborn_signals(t.path.string(), "kill -INT $pid; kill -TERM $pid");
  INFO(r.out);
  CHECK(has(r.out, "exit=130"));
  CHECK(has(r.out, "megatron-run: received signal 2 (SIGINT); forwarding it to the workers; they get 30 s to stop"));
  CHECK(has(r.out, "megatron-run: received signal 15 (SIGTERM) after the stop began: killing the workers now "
                   "(SIGKILL; a second stop signal ends the grace period of --term-timeout)\n"));
  CHECK_FALSE(has(r.out, "received signal 15 (SIGTERM); forwarding"));
  CHECK_FALSE(has(r.out, "s after the stop signal (--term-timeout); killing them"));
  const long ms = ms_of(r.out);
  CHECK(ms >= 0);
  CHECK(ms < 10000);
}

// SIGINT twice back to back from one process with kill() (as coreutils' `timeout` sends it): the same delivery,
// folded without a word (or taken as one by the kernel: a standard signal is not queued); a SIGTERM 0.3 s later is
// still the second stop signal.
TEST_CASE("SIGINT twice at once from one sender is one delivery; a stop signal after it ends the grace period",
          "[launch][supervision][process][signal]") {
  TempDir t;
  const Proc r = stubborn_signals(t.path.string(), "kill -INT $pid; kill -INT $pid; for i in $(seq 600); do "
                                                   "grep -q 'SIGINT); forwarding' out.txt && break; sleep 0.05; done; "
                                                   "sleep 0.3; kill -TERM $pid");
  INFO(r.out);
  CHECK(has(r.out, "exit=130"));
  CHECK_FALSE(has(r.out, "taken as the same delivery"));  // one sender: never said
  // The two kills 100 ms or more apart (a shell preempted that long on a loaded machine): the second SIGINT is the
  // second stop signal, and the SIGTERM finds the workers killed already. Otherwise one SIGINT line.
  if (count_of(r.out, "received signal 2 (SIGINT)") == 2) {
    CHECK(has(r.out, "megatron-run: received signal 2 (SIGINT) again: killing the workers now"));
  } else {
    CHECK(count_of(r.out, "received signal 2 (SIGINT)") == 1);
    CHECK(has(r.out, "megatron-run: received signal 15 (SIGTERM) after the stop began: killing the workers now"));
  }
  const long ms = ms_of(r.out);
  CHECK(ms >= 0);
  CHECK(ms < 10000);
}

// A fourth stop signal, once the third was noted: the launcher's last steps may be stuck (a write to a stopped pipe),
// so it takes the signal's default action at once instead of leaving SIGKILL as the only way out (review diff41b #3).
TEST_CASE("a second stop signal after the workers ended ends the launcher as the signal does",
          "[launch][supervision][process][signal]") {
  TempDir t;
  const std::string dir = t.path.string();
  fs::create_directories(t.path / "tmp");
  const Proc r = stubborn_signals(
      dir,
      kThirdSignalAfterWorkersEnded + "; for i in $(seq 600); do grep -q 'after the workers ended' out.txt && break; "
                                      "sleep 0.05; done; kill -TERM $pid",
      "TMPDIR='" + dir + "/tmp' MR_TEST_DELAY_AFTER_FORWARDING_S=20 ");
  INFO(r.out);
  CHECK(has(r.out, "exit=143"));  // SIGTERM's default action, not the 20 s hold and then 130
  CHECK(count_of(r.out, "after the workers ended; not acted on") == 1);
  const long ms = ms_of(r.out);
  CHECK(ms >= 0);
  CHECK(ms < 15000);
}

// A third stop signal right after the second one killed the workers: supervise() has returned, and the launcher
// ended its signal forwarding before its clean-up (the temporary log directory) and its exit. The dispositions
// it restored were the defaults, so that signal killed the launcher (143, the temporary directory left behind:
// review diff40 #1); now they stay caught to the process's exit and the signal is only noted. The test hook
// MR_TEST_DELAY_AFTER_FORWARDING_S holds the launcher in that window (a few ms otherwise) and says so; the third
// signal goes once it has.
TEST_CASE("a stop signal after the second one, once the workers are killed, is noted: exit 130, clean-up done",
          "[launch][supervision][process][signal]") {
  TempDir t;
  const std::string dir = t.path.string();
  fs::create_directories(t.path / "tmp");
  const Proc r = stubborn_signals(
      dir,
      kThirdSignalAfterWorkersEnded, "TMPDIR='" + dir + "/tmp' MR_TEST_DELAY_AFTER_FORWARDING_S=1 ");
  INFO(r.out);
  CHECK(has(r.out, "exit=130"));
  CHECK(has(r.out, "megatron-run: received signal 15 (SIGTERM) after the stop began: killing the workers now"));
  CHECK(has(r.out, "megatron-run: this node's workers after the stop: "));
  CHECK(has(r.out, "megatron-run: received signal 15 (SIGTERM) after the workers ended; not acted on (the launcher "
                   "is finishing; another stop signal ends it at once)\n"));
  // The temporary log directory (torchelastic_*, under TMPDIR) was removed.
  CHECK(fs::is_empty(t.path / "tmp"));
  const long ms = ms_of(r.out);
  CHECK(ms >= 0);
  CHECK(ms < 10000);
}
