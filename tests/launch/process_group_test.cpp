// launch/process_group.h: the processes left in a worker's group, and an exit seen without reaping.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "launch/process_group.h"

using mr::launch::exited_unreaped;
using mr::launch::group_members;
using mr::launch::wait_status;

namespace {

// A child in a process group of its own that starts a grandchild in the same group (sleeping `seconds`) and then
// ends with `code` (or, with code < 0, is killed by signal -code). The grandchild's pid comes back through a pipe.
pid_t leader_with_grandchild(int code, pid_t& grandchild, int seconds = 30) {
  int p[2];
  REQUIRE(pipe(p) == 0);
  const pid_t leader = fork();
  REQUIRE(leader >= 0);
  if (leader == 0) {
    setpgid(0, 0);
    signal(-code > 0 ? -code : SIGTERM, SIG_DFL);  // not the test framework's handler: the signal's own end
    const pid_t g = fork();
    if (g == 0) {
      sleep(static_cast<unsigned>(seconds));
      _exit(0);
    }
    (void)!write(p[1], &g, sizeof g);
    if (code < 0) raise(-code);
    _exit(code);
  }
  setpgid(leader, leader);
  close(p[1]);
  REQUIRE(read(p[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  close(p[0]);
  return leader;
}

// Waits (at most 5 s) until exited_unreaped says the child has exited.
bool wait_exit(pid_t pid, int& status) {
  for (int i = 0; i < 500; ++i) {
    if (exited_unreaped(pid, status)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("process group: an exited leader is held, and what it left in its group is found and stopped",
          "[launch][process_group]") {
  pid_t grandchild = 0;
  const pid_t leader = leader_with_grandchild(7, grandchild);
  int status = 0;
  REQUIRE(wait_exit(leader, status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  // Not reaped: asked again, the same answer (a zombie keeps its pid, and so the group's id).
  int again = 0;
  CHECK(exited_unreaped(leader, again));
  CHECK(again == status);
  // The grandchild is the group's one live member (the zombie leader is left out).
  CHECK(group_members(leader) == std::vector<pid_t>{grandchild});
  kill(-leader, SIGKILL);
  for (int i = 0; i < 500 && !group_members(leader).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(group_members(leader).empty());
  int reaped = 0;
  CHECK(waitpid(leader, &reaped, 0) == leader);
  CHECK(reaped == status);  // what waitpid gives, bit for bit
}

TEST_CASE("process group: the wait status of a killed child, and of one still running", "[launch][process_group]") {
  pid_t grandchild = 0;
  const pid_t leader = leader_with_grandchild(-SIGTERM, grandchild, 0);
  int status = 0;
  REQUIRE(wait_exit(leader, status));
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  int reaped = 0;
  CHECK(waitpid(leader, &reaped, 0) == leader);
  CHECK(reaped == status);
  // A running child: not exited. Not a child at all: not exited either.
  const pid_t running = fork();
  REQUIRE(running >= 0);
  if (running == 0) {
    pause();
    _exit(0);
  }
  CHECK_FALSE(exited_unreaped(running, status));
  kill(running, SIGKILL);
  waitpid(running, &reaped, 0);
  CHECK_FALSE(exited_unreaped(1, status));
  // A group nobody is in.
  CHECK(group_members(running).empty());
  // wait_status follows waitpid's encoding for each kind of exit.
  siginfo_t info{};
  info.si_code = CLD_DUMPED;
  info.si_status = SIGSEGV;
  const int dumped = wait_status(info);
  CHECK(WIFSIGNALED(dumped));
  CHECK(WTERMSIG(dumped) == SIGSEGV);
  CHECK(WCOREDUMP(dumped));
  info.si_code = CLD_EXITED;
  info.si_status = 255;
  CHECK(WEXITSTATUS(wait_status(info)) == 255);
}

// The launcher names who still holds a worker's output pipe after every worker has exited (a process that left the
// worker's group: setsid). A child of this test holds the write end of a pipe; the test (the "launcher") the read
// end, which is left out.
TEST_CASE("process group: the processes holding a pipe are found by its inode, with their name and the end they hold",
          "[launch][process_group]") {
  int p[2], ready[2];
  REQUIRE(pipe(p) == 0);
  REQUIRE(pipe(ready) == 0);
  const pid_t holder = fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    setsid();
    close(p[0]);
    close(ready[0]);
    close(ready[1]);  // the parent sees EOF on `ready` once this child is set up
    sleep(30);
    _exit(0);
  }
  close(p[1]);
  close(ready[1]);
  char c;
  REQUIRE(read(ready[0], &c, 1) == 0);  // the child has closed its copy: its descriptors are as it keeps them
  close(ready[0]);
  struct stat st {};
  REQUIRE(fstat(p[0], &st) == 0);
  const std::vector<mr::launch::PipeHolder> found = mr::launch::pipe_holders({st.st_ino});
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  REQUIRE(found.size() == 1);  // not this process, whose read end is the launcher's own
  CHECK(found[0].pid == holder);
  CHECK(found[0].inode == st.st_ino);
  CHECK(found[0].writes);
  CHECK(!found[0].name.empty());  // the test binary's name, as /proc/<pid>/comm gives it
  // No inode asked for, or a cap of no links: nothing read.
  CHECK(mr::launch::pipe_holders({}).empty());
  CHECK(mr::launch::pipe_holders({st.st_ino}, 0).empty());
  close(p[0]);
}
