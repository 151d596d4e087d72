// A process's CPU affinity past glibc's 1024-CPU cpu_set_t (launch/cpu_affinity.h): read in full, and masks of
// any size applied (the --numa-binding child's step between fork and exec).
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "launch/cpu_affinity.h"

using mr::launch::CpuMask;
using mr::launch::current_affinity;

namespace {
// Runs f in a forked child (its affinity changes stay there); its exit code.
template <class F>
int in_child(F&& f) {
  const pid_t pid = fork();
  if (pid == 0) _exit(f());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}
}  // namespace

TEST_CASE("this process's CPUs: the kernel's whole mask", "[launch][numa][affinity]") {
  const std::set<int> cpus = current_affinity();
  REQUIRE_FALSE(cpus.empty());
  cpu_set_t set;  // glibc's fixed set agrees on this machine's CPUs below 1024
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  int below = 0;
  for (int c : cpus) {
    if (c < CPU_SETSIZE) {
      CHECK(CPU_ISSET(c, &set));
      ++below;
    }
  }
  CHECK(below == CPU_COUNT(&set));
}

TEST_CASE("a CPU mask of any size binds a process to its CPUs", "[launch][numa][affinity]") {
  const int first = *current_affinity().begin();
  // A mask reaching CPU 5000 (past cpu_set_t's 1024): the kernel binds to the CPUs that exist.
  CHECK(in_child([first] {
          if (CpuMask({first, 5000}).apply() != 0) return 1;
          return current_affinity() == std::set<int>{first} ? 0 : 2;
        }) == 0);
  // Only CPUs that are not there: refused by the kernel (EINVAL), the affinity unchanged.
  const std::set<int> before = current_affinity();
  CHECK(CpuMask({1 << 20}).apply() == EINVAL);
  CHECK(current_affinity() == before);
  // Nothing to bind to.
  CHECK(CpuMask(std::set<int>{}).empty());
  CHECK(CpuMask({-3}).empty());
  CHECK(CpuMask().apply() == EINVAL);
}
