// launch/guardian.h: the process that stops the workers' process groups when the launcher dies without finishing.
// Unit tests with a forked "launcher", and megatron-run itself killed with SIGKILL.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "launch/guardian.h"
#include "launch_test_util.h"

using mr::launch::Guardian;
using namespace mrtest::launcher;

namespace {

using Clock = std::chrono::steady_clock;
using mrtest::Proc;

// Whether `pid` is gone, or a zombie (where this machine's init does not reap orphans at once).
bool gone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return true;
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' || line[paren + 2] == 'X';
}

// Waits until `pid` is gone (at most `seconds`); true if it is.
bool wait_gone(pid_t pid, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    if (gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return gone(pid);
}

// A process group of its own (its leader sleeps) with two more members: one that ignores SIGTERM and one that
// does not, each sleeping 60 s. Each member writes {its index, its pid} to `fd` once its SIGTERM disposition is
// set (a SIGTERM before that would end the one meant to ignore it).
[[noreturn]] void group_with_members(int fd) {
  setpgid(0, 0);
  signal(SIGTERM, SIG_DFL);
  for (int i = 0; i < 2; ++i) {
    if (fork() == 0) {
      signal(SIGTERM, i == 0 ? SIG_IGN : SIG_DFL);
      const pid_t said[2] = {i, getpid()};
      (void)!write(fd, said, sizeof said);
      sleep(60);
      _exit(0);
    }
  }
  sleep(60);
  _exit(0);
}

}  // namespace

TEST_CASE("guardian: a launcher killed with SIGKILL leaves nothing running in its workers' process groups",
          "[launch][guardian]") {
  int p[2], told[2];
  REQUIRE(pipe(p) == 0);
  REQUIRE(pipe(told) == 0);
  const pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    // The "launcher": a worker group, then the guardian (1 s grace), told of it (a byte on `told` once it is);
    // then it waits for its SIGKILL. (megatron-run forks the guardian first: its workers exec, which closes the
    // launcher's end of the guardian's socket; this group does not exec, so it must not inherit that end.)
    close(p[0]);
    close(told[0]);
    const pid_t leader = fork();
    if (leader == 0) {
      close(told[1]);
      group_with_members(p[1]);
    }
    setpgid(leader, leader);
    Guardian guardian(4, 1.0);
    guardian.add(leader);
    (void)!write(told[1], "t", 1);
    for (;;) pause();
  }
  close(p[1]);
  close(told[1]);
  pid_t members[2] = {0, 0};
  for (int n = 0; n < 2; ++n) {
    pid_t said[2] = {0, 0};
    REQUIRE(read(p[0], said, sizeof said) == sizeof said);
    REQUIRE((said[0] == 0 || said[0] == 1));
    members[said[0]] = said[1];
  }
  close(p[0]);
  // The guardian has the group once the "launcher" says it told it (not a guessed 200 ms after the members exist:
  // a loaded machine may run the launcher later, and a SIGKILL before its add() would leave the group alone).
  char byte = 0;
  REQUIRE(read(told[0], &byte, 1) == 1);
  close(told[0]);
  const auto killed_at = Clock::now();
  REQUIRE(kill(launcher, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(launcher, &status, 0) == launcher);
  // The member that acts on SIGTERM ends at once; the one that ignores it lives through the grace period, then
  // gets SIGKILL. Generous bounds: the machine may be busy.
  CHECK(wait_gone(members[1], 10));
  const double early = std::chrono::duration<double>(Clock::now() - killed_at).count();
  if (early < 0.5) CHECK_FALSE(gone(members[0]));  // not killed before the grace period (when we look in time)
  CHECK(wait_gone(members[0], 20));
  if (!gone(members[0])) kill(members[0], SIGKILL);
  if (!gone(members[1])) kill(members[1], SIGKILL);
}

TEST_CASE("guardian: a launcher that finishes says done, and the groups are left alone; Ctrl-C does not end it",
          "[launch][guardian]") {
  const pid_t leader = fork();
  REQUIRE(leader >= 0);
  if (leader == 0) {
    setpgid(0, 0);
    sleep(60);
    _exit(0);
  }
  setpgid(leader, leader);
  pid_t guardian_pid = 0;
  {
    Guardian guardian(2, 1.0);
    guardian_pid = guardian.pid();
    REQUIRE(guardian_pid > 0);
    guardian.add(leader);
    // The terminal's signals to the launcher's process group reach the guardian too: it ignores them.
    CHECK(kill(guardian_pid, SIGINT) == 0);
    CHECK(kill(guardian_pid, SIGTERM) == 0);
    CHECK(kill(guardian_pid, SIGHUP) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int status = 0;
    CHECK(waitpid(guardian_pid, &status, WNOHANG) == 0);  // still running
    guardian.remove(leader);
    guardian.add(leader);
  }  // done, and reaped
  CHECK(kill(guardian_pid, 0) != 0);  // reaped: no such process (its pid is not reused this soon)
  CHECK_FALSE(gone(leader));          // the group was not touched
  kill(leader, SIGKILL);
  int status = 0;
  CHECK(waitpid(leader, &status, 0) == leader);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

// With stdout and stderr closed, socketpair's lowest free numbers are 1 and 2: the socket must not take them (the
// launcher's output would go into it and be read as the guardian's messages). The launcher's 1 and 2 stay closed,
// the guardian's socket is above 2, and it still does its work when the launcher dies.
TEST_CASE("guardian: its socket never takes fd 1 or 2 when stdout and stderr are closed", "[launch][guardian]") {
  const pid_t leader = fork();
  REQUIRE(leader >= 0);
  if (leader == 0) {
    setpgid(0, 0);
    signal(SIGTERM, SIG_DFL);  // not Catch's handler, which would report into the test's output and run on
    sleep(60);
    _exit(0);
  }
  setpgid(leader, leader);
  int p[2];
  REQUIRE(pipe(p) == 0);
  const pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    close(p[0]);
    close(1);
    close(2);
    try {  // nothing of Catch's may run on in this child
    // Never destroyed (its destructor would say "done"): the launcher "dies" with it alive, at _exit below.
    Guardian& guardian = *new Guardian(1, 1.0);
    // 1: fds 1 and 2 still closed here; 2: every socket of the guardian's is above 2; 3: it has one.
    char found[3] = {fcntl(1, F_GETFD) == -1 && fcntl(2, F_GETFD) == -1, 1, 0};
    const std::string dir = "/proc/" + std::to_string(guardian.pid()) + "/fd";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
      if (target.rfind("socket:", 0) != 0) continue;
      found[2] = 1;
      if (std::stoi(e.path().filename().string()) < 3) found[1] = 0;
    }
    guardian.add(leader);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)!write(p[1], found, sizeof found);
    } catch (...) {
      _exit(2);
    }
    _exit(0);  // no "done": the guardian stops the group
  }
  close(p[1]);
  char found[3] = {0, 0, 0};
  CHECK(read(p[0], found, sizeof found) == 3);
  close(p[0]);
  int status = 0;
  CHECK(waitpid(launcher, &status, 0) == launcher);
  CHECK(found[0] == 1);
  CHECK(found[1] == 1);
  CHECK(found[2] == 1);
  CHECK(wait_gone(leader, 10));
  if (!gone(leader)) kill(leader, SIGKILL);
  waitpid(leader, &status, 0);
}

TEST_CASE("guardian: kill -9 of megatron-run stops what its workers started in their process groups",
          "[launch][guardian][process]") {
  // Each rank (a shell, no job control) starts `sleep 1000` in its own process group, records its pid and waits.
  // The launcher is SIGKILLed: the workers die with it (PR_SET_PDEATHSIG), and the guardian stops the sleeps.
  ScratchDir dir("mr-guardian");
  const fs::path script = dir.path / "kill9.sh", pids = dir.path / "pids";
  std::ofstream(script) << kBin << " --config " << kConfig
                        << " --nproc-per-node 2 --term-timeout 3 --no-append-args -- /bin/sh -c 'sleep 1000 & echo $! >> "
                        << pids.string() << "; wait' 2>&1 & L=$!\n"
                        << "while [ \"$(wc -l < " << pids.string() << " 2>/dev/null)\" != 2 ]; do sleep 0.05; done\n"
                        << "kill -KILL $L; wait $L; echo launcher $?\n";
  // The launcher is the script's child (not under `timeout`, which would only forward the signal).
  Proc r = sh("/bin/sh " + script.string());
  INFO(r.out);
  CHECK(has(r.out, "launcher 137"));
  CHECK(has(r.out, "ended without stopping its workers; its guardian stops what they started in their process "
                   "groups (SIGTERM, SIGKILL 3 s later, --term-timeout)"));
  std::ifstream in(pids);
  int n = 0;
  for (pid_t pid; in >> pid; ++n) {
    INFO("sleep pid " << pid);
    CHECK(wait_gone(pid, 20));
    if (!gone(pid)) kill(pid, SIGKILL);
  }
  CHECK(n == 2);
}

namespace {

// The processes whose command line holds `marker` (starting "--"; pgrep -f), one "pid command" a line; "" when
// none. The pattern's "[-]" keeps the shell running pgrep, whose command line holds the pattern, out of it.
std::string running_with(const std::string& marker) {
  return mrtest::run_shell("pgrep -a -f -- '[-]" + marker.substr(1) + "' || true").out;
}

// Waits until no process's command line holds `marker` (at most `seconds`); true if none does.
bool wait_none_with(const std::string& marker, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (!running_with(marker).empty()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

}  // namespace

// The guardian has a process group of its own: an enclosing launcher that ends its stop with SIGKILL to the inner
// launcher's whole group (torchrun's os.killpg; megatron-run itself here) or a `kill -9 -PGID` leaves it alive to
// stop what the inner workers started, and it exits afterwards (review 29b F2: it died with the group, and a child
// ignoring SIGTERM ran on under init).
TEST_CASE("guardian: a SIGKILL to the launcher's whole process group (an enclosing launcher's stop) stops what its workers started",
          "[launch][guardian][process]") {
  ScratchDir dir("mr-guardian");
  const fs::path pids = dir.path / "pids", inner = dir.path / "inner.sh", mid = dir.path / "mid.sh";
  // The inner worker ignores SIGTERM, and so does the `sleep` it starts in its process group (its output elsewhere:
  // a sleep left behind must not hold the test's pipe open).
  std::ofstream(inner) << "trap '' TERM; sleep 1000 >/dev/null 2>&1 & echo $! >> " << pids.string() << "; wait\n";
  const std::string inner_launch = "--nproc-per-node 1 --term-timeout 3 --no-append-args -- /bin/sh " + inner.string();
  std::ofstream(mid) << "exec " << kBin << " --config " << kConfig << " " << inner_launch << "\n";
  const std::string wait_pid = "while [ \"$(wc -l < " + pids.string() + " 2>/dev/null)\" != 1 ]; do sleep 0.05; done\n";
  SECTION("an outer megatron-run stopped with SIGTERM: SIGKILL to the inner launcher's group after its 1 s") {
    std::ofstream(dir.path / "run.sh") << kBin << " --config " << kConfig << " --nproc-per-node 1 --term-timeout 1 "
                                       << "--no-append-args -- /bin/sh " << mid.string() << " 2>&1 & L=$!\n"
                                       << wait_pid << "sleep 0.5; kill -TERM $L; wait $L; echo outer $?\n";
    Proc r = sh("/bin/sh " + (dir.path / "run.sh").string());
    INFO(r.out);
    CHECK(has(r.out, "outer 143"));
    CHECK(has(r.out, "still running 1 s after the stop signal (--term-timeout); killing them"));
  }
  SECTION("kill -9 -PGID of the launcher (setsid: a group of its own)") {
    std::ofstream(dir.path / "run.sh") << "setsid /bin/sh " << mid.string() << " 2>&1 & L=$!\n"
                                       << wait_pid << "kill -KILL -$L; wait $L; echo launcher $?\n";
    Proc r = sh("/bin/sh " + (dir.path / "run.sh").string());
    INFO(r.out);
    CHECK(has(r.out, "launcher 137"));
    CHECK(has(r.out, "ended without stopping its workers; its guardian stops what they started"));
  }
  std::ifstream in(pids);
  pid_t pid = 0;
  REQUIRE(in >> pid);
  INFO("sleep pid " << pid);
  CHECK(wait_gone(pid, 20));  // SIGKILLed by the guardian 3 s after the inner launcher's death
  if (!gone(pid)) kill(pid, SIGKILL);
  // No guardian left (its command line is the inner launcher's).
  CHECK(wait_none_with(inner_launch, 10));
}
