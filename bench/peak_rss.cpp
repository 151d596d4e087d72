// mr-peak-rss OUT CMD ARGS...: runs CMD, writes its peak resident set in KiB to the file OUT and exits with
// CMD's exit code (128+signal when killed).
//
// Why a separate small process: Linux carries a process's high-water RSS across exec, and posix_spawn shares
// the parent's memory until the exec (vfork), so a child spawned by the benchmark runner reports the runner's
// own RSS (hundreds of MiB after the optimizer benchmarks). Forked from this small program, the child starts
// from a copy of a few MiB, the same for every measurement.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mr-peak-rss OUT CMD [ARGS...]\n");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    execv(argv[2], argv + 2);
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) < 0) return 2;
  if (FILE* f = std::fopen(argv[1], "w")) {
    std::fprintf(f, "%ld\n", ru.ru_maxrss);
    std::fclose(f);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
