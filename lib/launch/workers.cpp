// Starting, signalling, killing and reaping the worker processes (spawn_detail.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "launch/cpu_affinity.h"
#include "launch/line_prefix.h"
#include "launch/process_group.h"
#include "launch/spawn_detail.h"
#include "util/exit_signal.h"
#include "util/resources.h"

namespace mr::launch::detail {

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int write_all(int fd, std::string_view s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;  // 0 for a non-empty write: no progress, never retried forever
    off += static_cast<size_t>(n);
  }
  return 0;
}

namespace {

// The forked child's exit codes when it cannot become the program (with a note on the `started` pipe).
constexpr int kExecFailedCode = 127;  // its execve failed
constexpr int kBindFailedCode = 1;    // its CPU binding (--numa-binding) failed

// The description of errno `e` without allocating or locking (for the forked child, whose parent has threads):
// glibc's untranslated text, else "errno N".
void write_errno(int fd, int e) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* d = strerrordesc_np(e)) {
    write_all(fd, d);
    return;
  }
#endif
  char digits[16];
  int n = 0;
  unsigned v = e < 0 ? 0u - static_cast<unsigned>(e) : static_cast<unsigned>(e);
  do digits[n++] = static_cast<char>('0' + v % 10); while ((v /= 10) != 0 && n < 15);
  char text[24] = "errno ";
  int at = 6;
  if (e < 0) text[at++] = '-';
  while (n > 0) text[at++] = digits[--n];
  write_all(fd, std::string_view(text, static_cast<size_t>(at)));
}

// A pipe whose ends are closed on exec (the child dups its write end onto 1 or 2).
void make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(util::system_failure("pipe", errno));
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

void open_log(LogFile& f, const std::string& path) {
  close_fd(f.fd);
  f = LogFile{};
  f.fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (f.fd < 0) throw std::runtime_error(util::system_failure("cannot write the log file " + path, errno));
  f.path = path;
}

}  // namespace

void Workers::open_filtered(const SpawnOptions& o, const std::string& attempt_dir) {
  if (attempt_dir.empty()) return;  // --log-dir /dev/null: no files
  if (!o.logs.duplicate_stdout_filters.empty() && filtered_out_.fd < 0)
    open_log(filtered_out_, attempt_dir + "/filtered_stdout.log");
  if (!o.logs.duplicate_stderr_filters.empty() && filtered_err_.fd < 0)
    open_log(filtered_err_, attempt_dir + "/filtered_stderr.log");
}

Workers::~Workers() {
  kill_and_reap();
  close_fd(filtered_out_.fd);
  close_fd(filtered_err_.fd);
  for (Worker& w : w_) {
    for (Stream* s : {&w.out, &w.err}) {
      close_fd(s->fd);
      close_fd(s->file.fd);
    }
    close_fd(w.pidfd);
    close_fd(w.start_fd);
  }
}

void Workers::start(int local_rank, const SpawnOptions& o, const std::vector<std::string>& shared,
                    const RankLogs& logs) {
  Worker& w = w_[static_cast<size_t>(local_rank)];
  w.rank = o.node_rank * o.nproc_per_node + local_rank;
  w.local_rank = local_rank;
  w.error_file = logs.error_file;
  w.prefix.clear();
  if (o.prefix_output)
    w.prefix = o.line_prefix_template.empty()
                   ? "[rank " + std::to_string(w.rank) + "] "
                   : expand_line_prefix(o.line_prefix_template, {o.role, w.rank, local_rank, local_hostname()});
  // Everything the child needs is built before fork: after it, the child only makes system calls.
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env = rank_worker_env(shared, o, local_rank, logs.error_file);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t launcher = getpid();
  // --numa-binding: this rank's CPUs, as the kernel takes them.
  const bool bind = static_cast<size_t>(local_rank) < o.cpu_binding.size() && !o.cpu_binding[static_cast<size_t>(local_rank)].empty();
  const CpuMask cpus = bind ? CpuMask(o.cpu_binding[static_cast<size_t>(local_rank)]) : CpuMask();
  const std::string bind_error = "megatron-run: cannot bind local rank " + std::to_string(local_rank) +
                                 " to its CPUs (--numa-binding): ";
  const std::string start_error = std::string("megatron-run: cannot start ") + argv[0] + ": ";
  // Each stream: a pipe (a log file, or prefixed console lines), the console itself, or /dev/null.
  int out[2] = {-1, -1}, err[2] = {-1, -1}, null_fd = -1, started[2] = {-1, -1};
  close_fd(w.start_fd);
  w.program = o.argv.empty() ? std::string() : o.argv[0];
  w.start_failure.clear();
  w.out.reset(false);
  w.err.reset(true);
  try {
    for (auto [dest, fds, s, filtered, filters] :
         {std::tuple{&logs.out, out, &w.out, &filtered_out_, &o.logs.duplicate_stdout_filters},
          std::tuple{&logs.err, err, &w.err, &filtered_err_, &o.logs.duplicate_stderr_filters}}) {
      s->console = dest->console;
      if (!dest->file.empty()) open_log(s->file, dest->file);
      if (!dest->file.empty() && dest->console && filtered->fd >= 0) {  // tee'd: its lines may be duplicated
        s->filtered = filtered;
        s->filters = filters;
      }
      // A stderr kept off the console (--local-ranks-filter) without a log file goes through the launcher too,
      // shown nowhere: its last lines are kept for the failure summary (review launch37 #9: a filtered root
      // cause's error was lost, /dev/null, while the summary said it had gone to the console).
      if (!dest->file.empty() || (dest->console && !w.prefix.empty()) || (s->is_err && !dest->console)) make_pipe(fds);
      if (dest->file.empty() && !dest->console && null_fd < 0) null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    }
    make_pipe(started);
    fcntl(started[0], F_SETFL, O_NONBLOCK);  // read at the worker's exit: never waits
  } catch (const std::exception&) {
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &null_fd, &started[0], &started[1]}) close_fd(*fd);
    kill_and_reap();
    throw;
  }
  // The forwarded signals are blocked across the fork: until the child has its default dispositions back, the
  // launcher's handler (which writes the signal to the launcher's self-pipe, inherited) must not run in it. A stop
  // of the group sent right after the fork (a sibling that failed at once) would otherwise read, in the launcher,
  // as a signal the launcher itself received.
  // The user's own open-file limit for what the worker runs (the launcher raised its soft one: util/resources.h).
  const std::optional<uint64_t> user_nofile = util::original_open_file_limit();
  sigset_t forwarded, before;
  sigemptyset(&forwarded);
  for (int sig : forwarded_signals()) sigaddset(&forwarded, sig);
  for (int sig : o.handled_signals) sigaddset(&forwarded, sig);
  // --exit-signal-handler (megatron-run's own worker, util/exit_signal.h): that signal stays blocked across the
  // exec, so that one sent before the worker's latch is in place waits for it instead of killing the worker.
  sigset_t child_mask;
  sigemptyset(&child_mask);
  sigprocmask(SIG_BLOCK, nullptr, &child_mask);
  if (const char* v = std::getenv(util::kExitSignalEnv); v && *v) {
    const int sig = std::atoi(v);
    if (sig > 0 && sig < 65) sigaddset(&child_mask, sig);
  }
  sigprocmask(SIG_BLOCK, &forwarded, &before);
  pid_t pid = fork();
  if (pid != 0) sigprocmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) {
    const int e = errno;
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &null_fd, &started[0], &started[1]}) close_fd(*fd);
    kill_and_reap();
    throw std::runtime_error(util::system_failure("fork", e));
  }
  if (pid == 0) {
    // Default dispositions (not the launcher's handlers, nor the inherited ignored ones: a background job starts
    // with SIGINT ignored), so that the signals we forward reach the worker; then a signal pending since the fork
    // acts on the worker as it should. SIGPIPE and SIGXFSZ too, which the launcher ignores: a program expects their
    // defaults (CPython's subprocess restores both for torchrun's workers).
    for (int sig : forwarded_signals()) signal(sig, SIG_DFL);
    for (int sig : o.handled_signals) signal(sig, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    // A session of its own (torchrun 2.x's start_new_session=True), not only a process group: the worker, its
    // group id its pid (kill(-pid) stops it and what it started), has no controlling terminal, so a read of the
    // inherited terminal (breakpoint(), pdb, input()) or readline's tcsetattr is not job-controlled. In the
    // terminal's session, a group of its own is a background group there: such a read stopped it (SIGTTIN) and
    // the job hung silently. Before the signals are unblocked: one the launcher sent (kill(pid), kill_all) while
    // the child was not yet a group of its own waits pending until now.
    setsid();
    sigprocmask(SIG_SETMASK, &child_mask, nullptr);  // `before`, with the --exit-signal-handler signal blocked
    // The worker dies with the launcher, however the launcher ends (kill -9 included): the kernel sends it
    // SIGKILL when the launcher's thread that forked it exits (spawn_workers runs on the launcher's only
    // thread). The death signal survives the exec of megatron-run and its exec of megatron-run-worker. If the
    // launcher died before prctl took effect, this child is already orphaned: stop now.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(128 + SIGKILL);
    if (out[1] >= 0) dup2(out[1], 1);
    else if (!logs.out.console) dup2(null_fd, 1);
    if (err[1] >= 0) dup2(err[1], 2);
    else if (!logs.err.console) dup2(null_fd, 2);
    // The messages below were built before the fork: the child allocates nothing (write_errno). The launcher
    // learns of such a failure from `started` (a tag and the errno), so that the child's exit code is not taken
    // for the program's: 1 for the CPU binding (a launcher failure, as --numa-binding's others), 127 for the exec
    // (a shell's code for a program it cannot run). The launcher trusts the note only with that exit code.
    auto failed = [&](char tag, int e) {
      char note[1 + sizeof(int)];
      note[0] = tag;
      std::memcpy(note + 1, &e, sizeof e);
      write_all(started[1], std::string_view(note, sizeof note));
    };
    if (int e = bind ? cpus.apply() : 0; e != 0) {
      write_all(2, bind_error);
      write_errno(2, e);
      write_all(2, "\n");
      failed('b', e);
      _exit(kBindFailedCode);
    }
    if (user_nofile) {
      rlimit nofile{};
      if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
        nofile.rlim_cur = static_cast<rlim_t>(*user_nofile);
        setrlimit(RLIMIT_NOFILE, &nofile);
      }
    }
    execve(argv[0], argv.data(), envp.data());
    const int e = errno;
    write_all(2, start_error);
    write_errno(2, e);
    write_all(2, "\n");
    failed('e', e);
    _exit(kExecFailedCode);
  }
  // No setpgid(pid, pid) here: a process group leader cannot call setsid. Until the child has, its group does not
  // exist, and kill_all sends to its pid instead.
  if (guardian_) guardian_->add(pid);  // its group is stopped by the guardian if the launcher dies
  w.pid = pid;
  w.running = true;
#ifdef SYS_pidfd_open
  w.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // Linux 5.3+; else -1: the 100 ms poll finds it
  if (w.pidfd >= 0) fcntl(w.pidfd, F_SETFD, FD_CLOEXEC);
#endif
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(null_fd);
  close_fd(started[1]);
  w.start_fd = started[0];
  w.out.fd = out[0];
  w.err.fd = err[0];
  w.err_piped = err[0] >= 0;
}

bool Workers::any_running() const {
  for (const Worker& w : w_)
    if (w.running) return true;
  return false;
}

bool Workers::exited(Worker& w) {
  int status = 0;
  if (!w.running || !exited_unreaped(w.pid, status)) return false;
  w.running = false;
  w.held = true;
  w.status = status;
  w.code = exit_code(status);
  // The child has ended, so the pipe's write end is closed: at its end, or with a note before it.
  if (w.start_fd >= 0) {
    char note[1 + sizeof(int)];
    ssize_t n;
    while ((n = read(w.start_fd, note, sizeof note)) < 0 && errno == EINTR) {
    }
    // Only a child that then exited with the code its note goes with: one killed between the note and its
    // _exit (SIGKILL from outside, the OOM killer, a seccomp filter) ended by that signal, which is said instead.
    const int expected = n > 0 && note[0] == 'b' ? kBindFailedCode : kExecFailedCode;
    if (n == static_cast<ssize_t>(sizeof note) && WIFEXITED(status) && WEXITSTATUS(status) == expected) {
      int e = 0;
      std::memcpy(&e, note + 1, sizeof e);
      w.start_failure = (note[0] == 'b' ? "cannot bind local rank " + std::to_string(w.local_rank) +
                                              " to its CPUs (--numa-binding): "
                                        : "cannot start " + w.program + ": ") +
                        std::strerror(e);
      // execve's ENOENT for a file that is there: what it names to run it is missing.
      if (note[0] == 'e' && e == ENOENT && access(w.program.c_str(), F_OK) == 0)
        w.start_failure += " (the file is there: the interpreter its #! line names, or its ELF loader, is not)";
    }
    close_fd(w.start_fd);
  }
  return true;
}

std::string Workers::leftovers() const {
  std::string out;
  for (const Worker& w : w_) {
    if (!w.held) continue;
    const std::vector<pid_t> pids = group_members(w.pid);
    if (pids.empty()) continue;
    out += (out.empty() ? "rank " : "; rank ") + std::to_string(w.rank) + ":";
    for (size_t i = 0; i < pids.size(); ++i) out += (i ? ", pid " : " pid ") + std::to_string(pids[i]);
  }
  return out;
}

void Workers::kill_all(int sig) {
  for (Worker& w : w_)
    if (w.running || w.held) {
      // The worker's process group (its session: setsid in the child). ESRCH while it is unreaped: the child has
      // not run setsid yet (just forked), and its pid alone is the worker; the signal waits, blocked, until then.
      if (kill(-w.pid, sig) != 0 && errno == ESRCH) kill(w.pid, sig);
    }
}

void Workers::terminate_all(int sig) {
  kill_all(sig);
  kill_all(SIGCONT);
}

void Workers::kill_and_reap() {
  kill_all(SIGKILL);
  for (Worker& w : w_)
    if (w.running || w.held) {
      if (guardian_) guardian_->remove(w.pid);  // before the reaping frees the group's id for another process
      int status = 0;
      while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      w.running = false;
      w.held = false;
      w.status = status;
      w.code = exit_code(status);
    }
}

}  // namespace mr::launch::detail
