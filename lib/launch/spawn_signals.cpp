// Forwarding the launcher's signals (spawn_detail.h): the handler only writes the signal's number (and its sender) to a pipe;
// the supervision loop polls the pipe and passes the signal on to the workers.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>

#include "launch/failure_report.h"
#include "launch/spawn_detail.h"
#include "util/decimal.h"

namespace mr::launch::detail {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr size_t kCount = sizeof kForwarded / sizeof kForwarded[0];

int g_signal_pipe[2] = {-1, -1};

// keep_signals_caught_to_exit(): the forwarder's end leaves its signals caught by on_late_signal, which writes the
// notice made for it beforehand (no allocation in the handler) and does nothing else, for the first such signal.
// A second one takes its default action at once: the launcher's last steps (a write to a pipe whose reader stopped,
// a clean-up on a hung file system) must never make it stoppable by SIGKILL alone (review diff41b #3). The handler
// runs with no signal blocked (SA_NODEFER, an empty mask), so that a second one arrives even while the first
// notice's write is blocked.
bool g_keep_to_exit = false;
std::string g_late_notice[NSIG];
volatile sig_atomic_t g_late_signals = 0;

void on_late_signal(int sig) {
  int saved = errno;
  const sig_atomic_t before = g_late_signals;
  g_late_signals = before + 1;
  if (before > 0) {
    signal(sig, SIG_DFL);
    raise(sig);  // the default action: the process ends as the signal ends it (128 + it)
  }
  if (sig > 0 && sig < NSIG) write_all(2, g_late_notice[sig]);
  errno = saved;
}

// MR_TEST_DELAY_AFTER_FORWARDING_S (a test hook): the forwarder's end says so and waits that long before spawn_workers
// goes on to its clean-up (the temporary log directory), so that a test can send a signal in that window.
void test_delay_after_forwarding() {
  const char* v = std::getenv("MR_TEST_DELAY_AFTER_FORWARDING_S");
  if (!v || !*v) return;
  const double secs = std::atof(v);
  if (!(secs > 0)) return;
  std::cerr << "megatron-run: MR_TEST_DELAY_AFTER_FORWARDING_S: the signal forwarding ended; waiting " << v
            << " s before the clean-up" << std::endl;
  timespec left{static_cast<time_t>(secs), static_cast<long>((secs - static_cast<double>(static_cast<time_t>(secs))) * 1e9)};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

void on_signal(int sig, siginfo_t* info, void*) {
  int saved = errno;
  SignalRecord r;
  r.sig = sig;
  r.sender = info && info->si_code == SI_USER ? static_cast<int32_t>(info->si_pid) : 0;
  ssize_t n = write(g_signal_pipe[1], &r, sizeof r);  // under PIPE_BUF: whole or not at all
  (void)n;
  errno = saved;
}

}  // namespace

std::span<const int> forwarded_signals() { return kForwarded; }

bool ignored_unless_named(int sig, const struct sigaction& before, const std::vector<int>& handled) {
  return before.sa_handler == SIG_IGN && std::find(handled.begin(), handled.end(), sig) == handled.end();
}

bool stops_workers(int sig, const std::vector<int>& handled) {
  if (!handled.empty()) return true;  // --signals-to-handle: each one stops the workers, as in torchrun
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

SignalForwarder::SignalForwarder(const std::vector<int>& handled)
    : signals_(handled.empty() ? std::vector<int>(kForwarded, kForwarded + kCount) : handled),
      old_(signals_.size()),
      kept_ignored_(signals_.size(), false) {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  // Every signal blocked while the handler runs: two pending at once (SIGINT, then SIGTERM sent right after it)
  // would otherwise nest, the later-delivered handler writing first, and the pipe would hold them reversed.
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  for (size_t i = 0; i < signals_.size(); ++i) {
    sigaction(signals_[i], &sa, &old_[i]);
    // A signal the launcher was started ignoring (nohup's SIGHUP, a script's background job's SIGINT) stays
    // ignored, as while the launchers wait (WaitingSignalNotice), unless --signals-to-handle names it.
    if (ignored_unless_named(signals_[i], old_[i], handled)) {
      sigaction(signals_[i], &old_[i], nullptr);
      kept_ignored_[i] = true;
    }
  }
  // A write to a stdout pipe whose reader has gone fails with EPIPE (said, and the workers stopped as after a
  // failure: supervise.cpp) instead of killing the launcher, whose workers would then die of PR_SET_PDEATHSIG's
  // SIGKILL with no grace period. The workers get SIGPIPE's default back (workers.cpp). Unless named, it is handled.
  auto ignore = [](int sig, struct sigaction* old) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(sig, &ign, old);
  };
  pipe_named_ = std::find(signals_.begin(), signals_.end(), SIGPIPE) != signals_.end();
  if (!pipe_named_) ignore(SIGPIPE, &old_pipe_);
  // Likewise a log file (--log-dir) or a stdout file past the file-size limit (ulimit -f): its write fails with
  // EFBIG (a stdout line lost is said, as for a full device) instead of SIGXFSZ killing the launcher, and its
  // workers with it; torchrun, a Python program, ignores SIGXFSZ. The workers get its default back (workers.cpp).
  xfsz_named_ = std::find(signals_.begin(), signals_.end(), SIGXFSZ) != signals_.end();
  if (!xfsz_named_) ignore(SIGXFSZ, &old_xfsz_);
}

SignalForwarder::~SignalForwarder() {
  struct sigaction late {};
  late.sa_handler = on_late_signal;
  sigemptyset(&late.sa_mask);  // a second signal reaches its handler even while the first one's write blocks
  late.sa_flags = SA_RESTART | SA_NODEFER;
  for (size_t i = 0; i < signals_.size(); ++i)
    sigaction(signals_[i], g_keep_to_exit && !kept_ignored_[i] ? &late : &old_[i], nullptr);
  if (!pipe_named_) sigaction(SIGPIPE, &old_pipe_, nullptr);
  if (!xfsz_named_) sigaction(SIGXFSZ, &old_xfsz_, nullptr);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
  test_delay_after_forwarding();
}

int SignalForwarder::read_fd() const { return g_signal_pipe[0]; }

Repeat SignalRepeats::check(const SignalRecord& s, Clock::time_point now) const {
  if (s.sig <= 0 || s.sig >= NSIG || !last_[s.sig] || now - last_[s.sig]->at >= kSameSignal) return Repeat::no;
  return s.sender != 0 && s.sender == last_[s.sig]->sender ? Repeat::quiet : Repeat::said;
}

void SignalRepeats::passed(const SignalRecord& s, Clock::time_point now) {
  if (s.sig > 0 && s.sig < NSIG) last_[s.sig] = Last{now, s.sender};
}

bool SignalRepeats::seen(int sig) const { return sig > 0 && sig < NSIG && last_[sig].has_value(); }

void SignalForwarder::pause() {
  for (size_t i = 0; i < signals_.size(); ++i) sigaction(signals_[i], &old_[i], nullptr);
}

void SignalForwarder::resume() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sigfillset(&sa.sa_mask);  // as in the constructor
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  for (size_t i = 0; i < signals_.size(); ++i)
    if (!kept_ignored_[i]) sigaction(signals_[i], &sa, nullptr);
}

}  // namespace mr::launch::detail

namespace mr::launch {

void keep_signals_caught_to_exit() {
  if (detail::g_keep_to_exit) return;
  for (int sig = 1; sig < NSIG; ++sig)
    detail::g_late_notice[sig] = "megatron-run: received signal " + std::to_string(sig) + " (" + signal_name(sig) +
                                 ") after the workers ended; not acted on (the launcher is finishing; another stop signal ends it at once)\n";
  detail::g_keep_to_exit = true;
}

namespace {

constexpr int kWaitStops[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
// Made before the handlers are set: the handler only reads them.
std::string g_wait_notice[4];
bool g_wait_record = false;                      // a record follows the notice
std::string g_record_before[4], g_record_after[4];  // its text around the run time
int64_t g_run_time_ns_at_start = 0;              // the run time when the wait began
timespec g_wait_start{};                         // CLOCK_MONOTONIC then

// Whole seconds since the record's start, and their decimal digits: clock_gettime and arithmetic, no allocation.
void write_run_time(int fd) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t ns = g_run_time_ns_at_start + (static_cast<int64_t>(now.tv_sec) - g_wait_start.tv_sec) * 1000000000 +
               (static_cast<int64_t>(now.tv_nsec) - g_wait_start.tv_nsec);
  char digits[20];
  const size_t n = util::decimal_digits(ns > 0 ? static_cast<unsigned long long>(ns / 1000000000) : 0, digits);
  detail::write_all(fd, std::string_view(digits, n));
}

void on_wait_signal(int sig) {
  for (int i = 0; i < 4; ++i)
    if (kWaitStops[i] == sig) {
      detail::write_all(2, g_wait_notice[i]);  // no allocation: safe in a handler
      if (g_wait_record) {
        detail::write_all(2, g_record_before[i]);
        write_run_time(2);
        detail::write_all(2, g_record_after[i]);
      }
    }
  // Then the signal's own end (an exit status a shell reads as killed by it), here: the other stop signals stay
  // blocked (sa_mask), so a second one that came meanwhile writes no second notice and record after this returns.
  signal(sig, SIG_DFL);
  sigset_t own;
  sigemptyset(&own);
  sigaddset(&own, sig);
  raise(sig);
  sigprocmask(SIG_UNBLOCK, &own, nullptr);
}

}  // namespace

WaitingSignalNotice::WaitingSignalNotice(const std::optional<WaitingRecord>& record, const std::vector<int>& handled) {
  for (int i = 0; i < 4; ++i)
    g_wait_notice[i] = "megatron-run: received signal " + std::to_string(kWaitStops[i]) + " (" +
                       signal_name(kWaitStops[i]) + ") while waiting for the other nodes; exiting\n";
  g_wait_record = record.has_value();
  if (record) {
    for (int i = 0; i < 4; ++i) {
      std::tie(g_record_before[i], g_record_after[i]) = record->text(kWaitStops[i]);
      g_record_after[i] += "\n";
    }
    clock_gettime(CLOCK_MONOTONIC, &g_wait_start);
    g_run_time_ns_at_start =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - record->started).count();
  }
  struct sigaction sa {};
  sa.sa_handler = on_wait_signal;
  sigemptyset(&sa.sa_mask);  // one stop signal's notice and record at a time, never one inside another's
  for (int sig : kWaitStops) sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 4; ++i) {
    sigaction(kWaitStops[i], &sa, &old_[i]);
    // nohup's SIGHUP stays ignored, as while the workers run (SignalForwarder), unless --signals-to-handle names it
    if (detail::ignored_unless_named(kWaitStops[i], old_[i], handled)) sigaction(kWaitStops[i], &old_[i], nullptr);
  }
}

WaitingSignalNotice::~WaitingSignalNotice() {
  for (int i = 0; i < 4; ++i) sigaction(kWaitStops[i], &old_[i], nullptr);
}

}  // namespace mr::launch
