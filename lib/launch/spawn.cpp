#include "launch/spawn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <stdexcept>

extern char** environ;

namespace mr::launch {

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t n = write(g_signal_pipe[1], &b, 1);
  (void)n;
  errno = saved;
}

const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

struct Stream {
  int fd = -1;
  std::string pending;  // a partial line
  bool is_err = false;
};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int code = 0;
  Stream out, err;
};

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

void emit(const Worker& w, Stream& s, const std::string& text, bool prefix, bool flush_all) {
  s.pending += text;
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t nl = s.pending.find('\n', start);
    if (nl == std::string::npos) break;
    if (prefix) out += "[rank " + std::to_string(w.rank) + "] ";
    out += s.pending.substr(start, nl - start + 1);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (flush_all && !s.pending.empty()) {
    if (prefix) out += "[rank " + std::to_string(w.rank) + "] ";
    out += s.pending + "\n";
    s.pending.clear();
  }
  if (!out.empty()) write_all(s.is_err ? 2 : 1, out);
}

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

}  // namespace

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    throw std::runtime_error(std::string("cannot bind a free port: ") + std::strerror(errno));
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

int worker_omp_threads(int cpus, int nproc_per_node) { return std::max(1, cpus / std::max(1, nproc_per_node)); }

int spawn_workers(const SpawnOptions& o) {
  if (o.nproc_per_node < 1) throw std::runtime_error("--nproc-per-node must be at least 1");
  if (o.nnodes < 1) throw std::runtime_error("--nnodes must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw std::runtime_error("--node-rank " + std::to_string(o.node_rank) + " is outside 0.." +
                             std::to_string(o.nnodes - 1));
  if (o.argv.empty()) throw std::runtime_error("no worker command");
  const int port = o.master_port ? o.master_port : (o.nnodes == 1 ? free_port() : 29500);
  const int world = o.nproc_per_node * o.nnodes;

  // The environment shared by every worker (torchrun's variables, minus its agent-store ones).
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    static const char* drop[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                 "GROUP_RANK", "ROLE_RANK", "MR_SPAWNED"};
    bool skip = key.rfind("TORCHELASTIC_", 0) == 0;
    for (const char* d : drop) skip = skip || key == d;
    for (const auto& [k, v] : o.env) skip = skip || key == k;
    if (!skip) base.push_back(kv);
  }
  for (const auto& [k, v] : o.env) base.push_back(k + "=" + v);
  base.push_back("WORLD_SIZE=" + std::to_string(world));
  base.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc_per_node));
  base.push_back("MASTER_ADDR=" + o.master_addr);
  base.push_back("MASTER_PORT=" + std::to_string(port));
  base.push_back("GROUP_RANK=" + std::to_string(o.node_rank));
  if (o.prefix_output) base.push_back("MR_SPAWNED=1");
  if (o.nproc_per_node > 1 && !std::getenv("OMP_NUM_THREADS") && !o.env.count("OMP_NUM_THREADS")) {
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int t = worker_omp_threads(cpus, o.nproc_per_node);
    base.push_back("OMP_NUM_THREADS=" + std::to_string(t));
    std::cerr << "megatron-run: OMP_NUM_THREADS=" << t << " for each of the " << o.nproc_per_node
              << " workers (" << cpus << " processors; set OMP_NUM_THREADS to choose)\n";
  }

  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  struct sigaction sa {}, old[sizeof kForwarded / sizeof kForwarded[0]];
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i) sigaction(kForwarded[i], &sa, &old[i]);
  auto restore = [&] {
    for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i) sigaction(kForwarded[i], &old[i], nullptr);
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  };

  std::vector<Worker> workers(static_cast<size_t>(o.nproc_per_node));
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  auto kill_all = [&](int sig) {
    for (Worker& w : workers)
      if (w.running) kill(-w.pid, sig);  // the worker's process group
  };
  // A terminating signal, then SIGCONT: a stopped worker (SIGSTOP, a debugger detached badly) acts on it too.
  auto terminate_all = [&](int sig) {
    kill_all(sig);
    kill_all(SIGCONT);
  };
  // Every worker started so far is killed and reaped: no path out of here leaves one running.
  auto kill_and_reap = [&] {
    kill_all(SIGKILL);
    for (Worker& w : workers)
      if (w.running) {
        int status = 0;
        while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
        }
        w.running = false;
        w.code = exit_code(status);
      }
  };
  const pid_t launcher = getpid();

  for (int i = 0; i < o.nproc_per_node; ++i) {
    Worker& w = workers[static_cast<size_t>(i)];
    w.rank = o.node_rank * o.nproc_per_node + i;
    std::vector<std::string> env = base;
    env.push_back("RANK=" + std::to_string(w.rank));
    env.push_back("LOCAL_RANK=" + std::to_string(i));
    env.push_back("ROLE_RANK=" + std::to_string(w.rank));
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (o.prefix_output && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
      kill_and_reap();
      restore();
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
      kill_and_reap();
      restore();
      throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
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
      for (int sig : kForwarded) signal(sig, SIG_DFL);
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

  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> kill_at;  // SIGKILL the stragglers at this time
  std::optional<int> first_failure;
  bool failure_before_signal = false;
  int signal_received = 0;
  auto stop_rest = [&](int sig) {
    terminate_all(sig);
    if (!kill_at) kill_at = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.grace_seconds * 1000));
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, Stream*>> owners;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    owners.emplace_back(nullptr, nullptr);
    for (Worker& w : workers)
      for (Stream* s : {&w.out, &w.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          owners.emplace_back(&w, s);
        }
    bool any_running = false;
    for (const Worker& w : workers) any_running = any_running || w.running;
    if (!any_running && fds.size() == 1) break;
    int n = poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR) {
      const int e = errno;
      std::cerr << "megatron-run: poll: " << std::strerror(e) << "; killing the workers\n";
      kill_and_reap();
      restore();
      return first_failure.value_or(1);
    }
    if (n > 0) {
      if (fds[0].revents & POLLIN) {
        unsigned char b;
        while (read(g_signal_pipe[0], &b, 1) == 1) {
          signal_received = b;
          std::cerr << "megatron-run: received signal " << static_cast<int>(b) << " (" << strsignal(b)
                    << "); forwarding it to the workers\n";
          kill_all(b);
          if (b == SIGINT || b == SIGTERM || b == SIGHUP || b == SIGQUIT) {
            kill_all(SIGCONT);
            if (!kill_at)
              kill_at = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.grace_seconds * 1000));
          }
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto [w, s] = owners[i];
        char buf[65536];
        ssize_t r = read(s->fd, buf, sizeof buf);
        if (r > 0) {
          emit(*w, *s, std::string(buf, static_cast<size_t>(r)), true, false);
        } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
          emit(*w, *s, "", true, true);
          close(s->fd);
          s->fd = -1;
        }
      }
    }
    // Reap.
    for (Worker& w : workers) {
      if (!w.running) continue;
      int status = 0;
      pid_t r = waitpid(w.pid, &status, WNOHANG);
      if (r != w.pid) continue;
      w.running = false;
      w.code = exit_code(status);
      if (w.code != 0 && !first_failure) {
        first_failure = w.code;
        failure_before_signal = signal_received == 0;
        bool others = false;
        for (const Worker& x : workers) others = others || x.running;
        std::cerr << "megatron-run: worker rank " << w.rank << " (pid " << w.pid << ") " << describe_status(status)
                  << (others && !signal_received ? "; stopping the other workers" : "") << "\n";
        if (others) stop_rest(SIGTERM);
      }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      bool any = false;
      for (const Worker& w : workers) any = any || w.running;
      if (any) {
        std::cerr << "megatron-run: workers still running " << o.grace_seconds << " s after the stop signal; killing them\n";
        kill_all(SIGKILL);
      }
      kill_at.reset();
      kill_at = Clock::now() + std::chrono::hours(24 * 365);
    }
  }
  kill_and_reap();  // none is left by now; a last guarantee that no worker outlives the launcher
  restore();
  if (first_failure && failure_before_signal) return *first_failure;
  if (signal_received) return 128 + signal_received;
  return first_failure.value_or(0);
}

}  // namespace mr::launch
