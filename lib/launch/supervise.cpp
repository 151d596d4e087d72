// The supervision loop of spawn_workers (spawn_detail.h): one poll over the signal pipe and every worker's
// output pipes, then the reaping; stops the other workers after the first failure or a terminating signal.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/spawn_detail.h"

namespace mr::launch::detail {

namespace {

using Clock = std::chrono::steady_clock;

// Appends `text` to the stream's partial line and writes out every complete line ("[rank R] " before each when
// `prefix`); `flush_all` also writes the rest (the stream has ended), with a newline.
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

// Reads what is ready on one worker stream; at its end (or on an error) flushes the rest and closes it.
void relay(Worker& w, Stream& s) {
  char buf[65536];
  ssize_t r = read(s.fd, buf, sizeof buf);
  if (r > 0) {
    emit(w, s, std::string(buf, static_cast<size_t>(r)), true, false);
  } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
    emit(w, s, "", true, true);
    close(s.fd);
    s.fd = -1;
  }
}

}  // namespace

int supervise(Workers& workers, const SpawnOptions& o, int signal_fd) {
  std::optional<Clock::time_point> kill_at;  // SIGKILL the stragglers at this time
  std::optional<int> first_failure;
  bool failure_before_signal = false;
  int signal_received = 0;
  const auto grace = std::chrono::milliseconds(static_cast<long>(o.grace_seconds * 1000));
  auto stop_rest = [&](int sig) {
    workers.terminate_all(sig);
    if (!kill_at) kill_at = Clock::now() + grace;
  };

  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, Stream*>> owners;
    fds.push_back({signal_fd, POLLIN, 0});
    owners.emplace_back(nullptr, nullptr);
    for (Worker& w : workers.all())
      for (Stream* s : {&w.out, &w.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          owners.emplace_back(&w, s);
        }
    if (!workers.any_running() && fds.size() == 1) break;
    int n = poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR) {
      const int e = errno;
      std::cerr << "megatron-run: poll: " << std::strerror(e) << "; killing the workers\n";
      workers.kill_and_reap();
      return first_failure.value_or(1);
    }
    if (n > 0) {
      // Signals received by the launcher: passed on to every worker.
      if (fds[0].revents & POLLIN) {
        unsigned char b;
        while (read(signal_fd, &b, 1) == 1) {
          signal_received = b;
          std::cerr << "megatron-run: received signal " << static_cast<int>(b) << " (" << strsignal(b)
                    << "); forwarding it to the workers\n";
          workers.kill_all(b);
          if (stops_workers(b)) {
            workers.kill_all(SIGCONT);
            if (!kill_at) kill_at = Clock::now() + grace;
          }
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto [w, s] = owners[i];
        relay(*w, *s);
      }
    }
    // Reap; the first failure stops the others.
    for (Worker& w : workers.all()) {
      if (!w.running) continue;
      int status = 0;
      pid_t r = waitpid(w.pid, &status, WNOHANG);
      if (r != w.pid) continue;
      w.running = false;
      w.code = exit_code(status);
      if (w.code != 0 && !first_failure) {
        first_failure = w.code;
        failure_before_signal = signal_received == 0;
        bool others = workers.any_running();
        std::cerr << "megatron-run: worker rank " << w.rank << " (pid " << w.pid << ") " << describe_status(status)
                  << (others && !signal_received ? "; stopping the other workers" : "") << "\n";
        if (others) stop_rest(SIGTERM);
      }
    }
    // The grace period is over: SIGKILL what still runs (once).
    if (kill_at && Clock::now() >= *kill_at) {
      if (workers.any_running()) {
        std::cerr << "megatron-run: workers still running " << o.grace_seconds << " s after the stop signal; killing them\n";
        workers.kill_all(SIGKILL);
      }
      kill_at.reset();
      kill_at = Clock::now() + std::chrono::hours(24 * 365);
    }
  }
  if (first_failure && failure_before_signal) return *first_failure;
  if (signal_received) return 128 + signal_received;
  return first_failure.value_or(0);
}

}  // namespace mr::launch::detail
