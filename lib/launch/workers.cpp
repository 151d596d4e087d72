// Starting, signalling, killing and reaping the worker processes (spawn_detail.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/spawn_detail.h"

namespace mr::launch::detail {

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(n);
  }
}

void Workers::start(int local_rank, const SpawnOptions& o, const std::vector<std::string>& shared) {
  Worker& w = w_[static_cast<size_t>(local_rank)];
  w.rank = o.node_rank * o.nproc_per_node + local_rank;
  // Everything the child needs is built before fork: after it, the child only makes system calls.
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env = rank_worker_env(shared, o, local_rank);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t launcher = getpid();
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (o.prefix_output && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
    const int e = errno;
    kill_and_reap();
    throw std::runtime_error(std::string("pipe: ") + std::strerror(e));
  }
  pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    kill_and_reap();
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    setpgid(0, 0);
    // The worker dies with the launcher, however the launcher ends (kill -9 included): the kernel sends it
    // SIGKILL when the launcher's thread that forked it exits (spawn_workers runs on the launcher's only
    // thread). The death signal survives the exec of megatron-run and its exec of megatron-run-worker. If the
    // launcher died before prctl took effect, this child is already orphaned: stop now.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(128 + SIGKILL);
    // Default dispositions (not the inherited ones: a background job starts with SIGINT ignored), so that the
    // signals we forward reach the worker.
    for (int sig : forwarded_signals()) signal(sig, SIG_DFL);
    if (o.prefix_output) {
      dup2(out[1], 1);
      dup2(err[1], 2);
    }
    execve(argv[0], argv.data(), envp.data());
    std::string msg = std::string("megatron-run: cannot start ") + argv[0] + ": " + std::strerror(errno) + "\n";
    write_all(2, msg);
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with kill(-pid) before the child ran setpgid
  w.pid = pid;
  w.running = true;
  if (o.prefix_output) {
    close(out[1]);
    close(err[1]);
    w.out = Stream{out[0], {}, false};
    w.err = Stream{err[0], {}, true};
  }
}

bool Workers::any_running() const {
  for (const Worker& w : w_)
    if (w.running) return true;
  return false;
}

void Workers::kill_all(int sig) {
  for (Worker& w : w_)
    if (w.running) kill(-w.pid, sig);  // the worker's process group
}

void Workers::terminate_all(int sig) {
  kill_all(sig);
  kill_all(SIGCONT);
}

void Workers::kill_and_reap() {
  kill_all(SIGKILL);
  for (Worker& w : w_)
    if (w.running) {
      int status = 0;
      while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      w.running = false;
      w.code = exit_code(status);
    }
}

}  // namespace mr::launch::detail
