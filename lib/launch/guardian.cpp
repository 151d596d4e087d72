// The guardian (guardian.h): a forked process that reads the launcher's messages until "done" or the socket's end,
// and on the end stops the process groups it was told of.
#include "launch/guardian.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace mr::launch {

namespace {

// One message: 'a' (add), 'r' (remove) or 'd' (done), and a process group id. Fixed size: each is one write.
struct Message {
  int32_t op = 0;
  int32_t pgid = 0;
};

void write_text(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Reads one whole message; false at the end of the socket (the launcher is gone) or on an error.
bool read_message(int fd, Message& m) {
  char* p = reinterpret_cast<char*>(&m);
  size_t got = 0;
  while (got < sizeof m) {
    const ssize_t n = read(fd, p + got, sizeof m - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// close_range(lo, ~0U, 0) as a system call: glibc declares close_range only from 2.34 (a GPU cluster's older
// distribution may have less), and the kernel's ENOSYS before 5.9 takes the loop instead.
int close_from(unsigned lo) {
#ifdef SYS_close_range
  return static_cast<int>(syscall(SYS_close_range, lo, ~0U, 0));
#else
  (void)lo;
  errno = ENOSYS;
  return -1;
#endif
}

double now_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The guardian's life, in the forked child: system calls only (`groups` and `notice` were made before the fork).
constexpr int kIgnored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTTOU};

[[noreturn]] void guard(int fd, std::vector<pid_t>& groups, double grace, const std::string& notice) {
  // A process group of its own (the parent sets it too, before the launcher goes on, so that no killpg can come
  // between): an enclosing launcher (torchrun's os.killpg, megatron-run's kill(-pid)) ends its stop with SIGKILL to
  // the launcher's whole group, and the guardian must outlive exactly that. In a background group it never reads
  // the terminal (stdin is /dev/null below) and ignores SIGTTOU, so its one notice is written even under
  // `stty tostop`.
  setpgid(0, 0);
  // A stop sent to the launcher's process group (a Ctrl-C, `kill -TERM -PGID`) no longer reaches the guardian, but
  // one sent to it or its group by pid might: the launcher acts on its own and ends the guardian with "done". They
  // were blocked across the fork: ignored before they are let through (one sent meanwhile is dropped), so that none
  // ends the guardian early.
  for (int sig : kIgnored) signal(sig, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing of the launcher's is kept open (a pipe the launcher's reader waits on, a listening socket, a log
  // file): only the socket and stderr, for the notice; stdin and stdout read and write /dev/null.
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    if (null_fd != 0 && fd != 0) dup2(null_fd, 0);
    if (null_fd != 1 && fd != 1) dup2(null_fd, 1);
  }
  for (int other = 3; other < fd; ++other) close(other);  // the few below the socket; then all above it
  const int above = fd < 3 ? 3 : fd + 1;
  if (close_from(static_cast<unsigned>(above)) != 0) {
    const long max = sysconf(_SC_OPEN_MAX);
    for (long other = above; other < (max > 0 && max < (1L << 20) ? max : 65536); ++other)
      if (other != fd) close(static_cast<int>(other));
  }
  size_t count = 0;
  Message m;
  while (read_message(fd, m)) {
    if (m.op == 'd') _exit(0);
    if (m.op == 'a' && m.pgid > 0 && count < groups.size()) groups[count++] = m.pgid;
    if (m.op == 'r')
      for (size_t i = 0; i < count; ++i)
        if (groups[i] == m.pgid) {
          groups[i] = groups[--count];
          break;
        }
  }
  // The launcher died without saying "done": its workers died with it (PR_SET_PDEATHSIG), what they started in
  // their groups is stopped as the launcher would have stopped it.
  if (count == 0) _exit(0);
  write_text(2, notice);
  for (size_t i = 0; i < count; ++i) {
    kill(-groups[i], SIGTERM);
    kill(-groups[i], SIGCONT);
  }
  // With the launcher gone nothing keeps an emptied group's id reserved (the launcher held its workers unreaped
  // for that): an id is dropped the first time its group is found empty, so a later SIGKILL cannot reach a group
  // that reused it. EPERM means the group still has a member (one we may not signal), so it is kept.
  const auto drop_empty = [&] {
    for (size_t i = 0; i < count;)
      if (kill(-groups[i], 0) != 0 && errno == ESRCH)
        groups[i] = groups[--count];
      else
        ++i;
  };
  const double end = now_seconds() + grace;
  while (now_seconds() < end) {
    drop_empty();
    if (count == 0) _exit(0);  // every group is empty (or holds zombies only until their new parent reaps them)
    timespec pause{0, 50 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
  drop_empty();
  for (size_t i = 0; i < count; ++i) kill(-groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

Guardian::Guardian(int max_groups, double grace_seconds) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  // Never fd 0, 1 or 2: with stdout or stderr closed the socket would take its number, and the launcher's output
  // (the workers' lines) would be read as the guardian's messages. main fills them (util/std_fds.h); this holds
  // for any caller.
  for (int& end : sv)
    if (end < 3) {
      const int moved = fcntl(end, F_DUPFD_CLOEXEC, 3);
      const int e = errno;
      if (moved < 0) {
        close(sv[0]);
        close(sv[1]);
        throw std::runtime_error(std::string("socketpair: ") + std::strerror(e));
      }
      close(end);
      end = moved;
    }
  // Made before the fork: the guardian allocates nothing.
  std::vector<pid_t> groups(static_cast<size_t>(max_groups > 0 ? max_groups : 1), 0);
  char grace_text[32];
  std::snprintf(grace_text, sizeof grace_text, "%g", grace_seconds);
  const std::string notice = "megatron-run: the launcher (pid " + std::to_string(getpid()) +
                             ") ended without stopping its workers; its guardian stops what they started in their "
                             "process groups (SIGTERM, SIGKILL " + grace_text + " s later, --term-timeout)\n";
  sigset_t blocked, old;
  sigemptyset(&blocked);
  for (int sig : kIgnored) sigaddset(&blocked, sig);
  sigprocmask(SIG_BLOCK, &blocked, &old);
  const pid_t pid = fork();
  if (pid > 0) setpgid(pid, pid);  // as the child does (guard): whichever runs first
  if (pid != 0) sigprocmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    const int e = errno;
    close(sv[0]);
    close(sv[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    close(sv[0]);
    guard(sv[1], groups, grace_seconds, notice);
  }
  close(sv[1]);
  pid_ = pid;
  fd_ = sv[0];
}

Guardian::~Guardian() {
  done();
  if (pid_ > 0) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void Guardian::send(char op, pid_t pgid) {
  if (fd_ < 0) return;
  Message m;
  m.op = op;
  m.pgid = static_cast<int32_t>(pgid);
  // Never SIGPIPE (a guardian killed by someone), never blocking: the launcher goes on without it.
  ssize_t n;
  do n = ::send(fd_, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
}

void Guardian::add(pid_t pgid) { send('a', pgid); }

void Guardian::remove(pid_t pgid) { send('r', pgid); }

void Guardian::done() {
  if (fd_ < 0) return;
  send('d', 0);
  close(fd_);
  fd_ = -1;
}

}  // namespace mr::launch
