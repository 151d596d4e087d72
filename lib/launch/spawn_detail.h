// The parts of spawn_workers (spawn.h), internal to lib/launch:
//   spawn_env.cpp      the workers' environment (torchrun's variables, the OMP_NUM_THREADS share);
//   spawn_signals.cpp  forwarding the launcher's signals (a self-pipe the supervisor polls);
//   workers.cpp        starting the worker processes, signalling, killing and reaping them (and telling the
//                      guardian, launch/guardian.h, of their process groups);
//   supervise.cpp      the supervision loop: relaying output, forwarding signals, reaping, stopping on failure;
//   spawn.cpp          the attempts (--max-restarts) around it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "launch/failure_report.h"
#include "launch/guardian.h"
#include "launch/stderr_tail.h"
#include "launch/log_spec.h"
#include "launch/spawn.h"

namespace mr::launch::detail {

// ---- environment (spawn_env.cpp) ---------------------------------------------------------------------------------

// The environment every worker shares: ours without torchrun's variables (and without the keys of o.env, which
// follow), MR_SPAWNED=1 (when prefixing output) and, for several workers on a node with no OMP_NUM_THREADS set,
// an even share of the processors (said on stderr).
std::vector<std::string> shared_worker_env(const SpawnOptions& o);
// One worker's environment: `shared` plus torchrun's variables for it (launch/torchrun_env.h); o.master_port is
// the job's port (chosen already); `error_file`: its TORCHELASTIC_ERROR_FILE ("" none).
std::vector<std::string> rank_worker_env(const std::vector<std::string>& shared, const SpawnOptions& o,
                                         int local_rank, const std::string& error_file = "");

// ---- signals (spawn_signals.cpp) ----------------------------------------------------------------------------------

// The signals the launcher forwards to its workers by default: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2.
std::span<const int> forwarded_signals();
// Whether `sig`, whose disposition was `before` when the launcher started, stays ignored: it was ignored (nohup's
// SIGHUP, SIGINT in a script's background job) and --signals-to-handle (`handled`) does not name it.
bool ignored_unless_named(int sig, const struct sigaction& before, const std::vector<int>& handled);
// Whether forwarding `sig` also stops the workers (starts the grace period): with `handled` (--signals-to-handle)
// every one of them does; by default the terminating ones (SIGINT, SIGTERM, SIGHUP, SIGQUIT).
bool stops_workers(int sig, const std::vector<int>& handled = {});

// While alive, the forwarded signals (`handled`, else forwarded_signals()) are caught and their numbers written to
// a pipe (read_fd(), non-blocking) for the supervisor to poll, except one that was ignored before and `handled`
// does not name (it stays ignored); SIGPIPE is ignored unless `handled` names it. The destructor restores the
// previous dispositions (after keep_signals_caught_to_exit(), spawn.h: its signals stay caught, only noted) and
// closes the pipe. One at a time per process. Throws std::runtime_error if the pipe
// cannot be made.
class SignalForwarder {
 public:
  explicit SignalForwarder(const std::vector<int>& handled = {});
  ~SignalForwarder();
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;
  int read_fd() const;
  // Between attempts, while no worker runs (an elastic job's rejoin may wait long): the previous dispositions
  // again, so that SIGINT/SIGTERM end the launcher at once; resume() catches them again.
  void pause();
  void resume();

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction> old_;
  std::vector<bool> kept_ignored_;  // signals_[i] was ignored before and is not caught
  bool pipe_named_ = false;         // SIGPIPE is among signals_ (else ignored, old_pipe_ restored at the end)
  struct sigaction old_pipe_ {};
  bool xfsz_named_ = false;         // SIGXFSZ is among signals_ (else ignored, old_xfsz_ restored at the end)
  struct sigaction old_xfsz_ {};
};

// One signal as the handler wrote it to the pipe (one write, atomic): its number and, for one a process sent with
// kill() (si_code SI_USER: `kill`, coreutils' `timeout`, a batch system's daemon), the sender's pid; 0 for one
// the kernel sent (a terminal's Ctrl-C) or sigqueue's.
struct SignalRecord {
  int32_t sig = 0;
  int32_t sender = 0;
};

// The same signal again less than this after the launcher passed it on may be the same event delivered twice:
// coreutils' `timeout` kill()s its child (the launcher) and then its own process group (the launcher's too), two
// syscalls microseconds apart. The launcher usually takes the two as one (a standard signal is not queued), but
// when it is woken in between (about 1 run in 10 on an idle 2-core machine) it reads them apart: one pass apart,
// or a time slice or two on a loaded machine (some ms). 100 ms covers that with room, and stays below a human's
// double Ctrl-C (0.2-0.8 s apart, rarely under 0.15 s), which must end the grace period (review user40 #3; it
// was 1 s, which swallowed most second presses).
inline constexpr std::chrono::milliseconds kSameSignal{100};

// What a signal the launcher receives is to the same signal it passed on last (supervise.cpp).
enum class Repeat {
  no,     // not a repeat: the first of its number, or kSameSignal or more after the last
  quiet,  // within kSameSignal, sent by kill() from the same process as the last: `timeout`'s double delivery,
          // folded into it without a word
  said,   // within kSameSignal otherwise (a Ctrl-C, another sender): folded into it, and said so, so a human's
          // press inside the window is not dropped silently
};

// The signals passed on, each with when the launcher took it and who sent it. Only the same number is a repeat:
// SIGTERM after SIGINT is another signal, however soon (review user40 #4).
class SignalRepeats {
 public:
  using Clock = std::chrono::steady_clock;
  Repeat check(const SignalRecord& s, Clock::time_point now) const;
  void passed(const SignalRecord& s, Clock::time_point now);
  bool seen(int sig) const;  // passed on at least once

 private:
  struct Last {
    Clock::time_point at;
    int32_t sender = 0;
  };
  std::vector<std::optional<Last>> last_ = std::vector<std::optional<Last>>(NSIG);
};

// ---- worker processes (workers.cpp) --------------------------------------------------------------------------------

// The most stderr lines the failure summary shows.
inline constexpr size_t kTailLines = 10;

// The longest partial line (no newline yet) the launcher holds for a worker's stream before it writes it out as a
// line (supervise.cpp, emit): the line-atomic console costs at most this much memory a stream.
inline constexpr size_t kMaxPartialLine = 64 * 1024;

// A file the launcher writes the workers' output into: a rank's log file (--redirects, --tee) or a filtered file
// (--duplicate-std{out,err}-filters). A write that fails (a full disk, ENOSPC; past the file-size limit, EFBIG; an
// I/O error) is said once on the launcher's stderr (rule launch.log-write-failed, supervise.cpp's write_log) and
// nothing more is written to the file: the job goes on (a full log disk does not stop training), the console copy
// of its lines, when there is one, too; the failure summary names the file.
struct LogFile {
  int fd = -1;       // -1: none, or closed at the stream's end
  std::string path;  // for the notice and the summary
  int error = 0;     // errno of its first failed write (0: none); nothing is written after it
  bool writable() const { return fd >= 0 && error == 0; }
};

// One output stream of a worker that goes through the launcher (a pipe): to its log file and/or the console.
struct Stream {
  int fd = -1;          // the pipe's read end; -1: none, or it has ended
  std::string pending;  // a partial line
  size_t shown = 0;     // its first bytes already on the console: a progress bar's line shown as it comes (emit)
  bool bar_broken = false;  // other text ended that line on the console (end_bar): the rest starts a new one
  bool is_err = false;
  bool console = true;  // relayed to the launcher's stdout/stderr (with "[rank R] " when prefixing)
  LogFile file;          // its log file (--redirects, --tee), written as it comes; fd -1: none
  // A tee'd stream with duplicate filters: the filtered file (the workers' Workers holds it, shared by the
  // workers) and the filters; nullptr: none.
  LogFile* filtered = nullptr;
  const std::vector<std::string>* filters = nullptr;
  StderrTail tail{kTailLines};  // the last lines (stderr: for the failure summary), torch's log lines left out

  // As a new Stream (`is_err` for a worker's stderr), field by field: `s = Stream{}` makes GCC 12 see the
  // temporary's strings as maybe uninitialised (-Wmaybe-uninitialized, a false positive that CI's -Werror fails).
  // A new field is reset here too.
  void reset(bool err) {
    fd = -1;
    pending.clear();
    shown = 0;
    bar_broken = false;
    is_err = err;
    console = true;
    file.fd = -1;
    file.path.clear();
    file.error = 0;
    filtered = nullptr;
    filters = nullptr;
    tail = StderrTail{kTailLines};
  }
};

struct Worker {
  int rank = 0, local_rank = 0;
  pid_t pid = -1;
  int pidfd = -1;  // readable once the worker has exited (pidfd_open), so the supervisor wakes at once; -1: none
  bool running = false;
  // It has exited and is not reaped yet (a zombie), so its pid, its process group's id, cannot be reused: what it
  // left in its group can still be signalled (kill_all, stop_leftovers) until the set reaps it (kill_and_reap).
  bool held = false;
  int code = 0, status = 0;
  Stream out, err;
  bool err_piped = false;  // its stderr goes through the launcher
  std::string error_file;  // its TORCHELASTIC_ERROR_FILE
  std::string prefix;      // before each of its console lines ("" none): "[rank R] ", or the template's
  // The read end of a pipe the forked child writes to when it cannot become the program (its exec or CPU binding
  // failed: a tag byte and the errno) and that the exec closes otherwise; read once the worker has exited.
  int start_fd = -1;
  std::string program;        // o.argv[0], for start_failure
  std::string start_failure;  // set at exit: "cannot start PROGRAM: <errno text>" ("" it was started)
};

// The exit code spawn_workers reports for a wait status (128 + signal for a killed worker).
int exit_code(int status);
// Writes all of `s` to fd (retrying after EINTR; gives up on another error): 0, or the errno of the write that
// failed (EIO for one that wrote nothing).
int write_all(int fd, std::string_view s);  // no allocation: safe in a forked child

// The node's workers. No worker outlives the set: the destructor kills (SIGKILL) and reaps what still runs.
class Workers {
 public:
  // `guardian` (may be null): told each worker's process group as it starts and before it is reaped.
  explicit Workers(int count, Guardian* guardian = nullptr) : w_(static_cast<size_t>(count)), guardian_(guardian) {}
  // With duplicate filters (o.logs): makes <attempt_dir>/filtered_stdout.log and/or filtered_stderr.log, which the
  // tee'd streams of the workers started afterwards share. Throws std::runtime_error when a file cannot be made.
  void open_filtered(const SpawnOptions& o, const std::string& attempt_dir);
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // Starts local worker `local_rank` (global rank node_rank * nproc_per_node + local_rank) with `shared` plus
  // its rank variables: its own process group, PR_SET_PDEATHSIG = SIGKILL, default dispositions of the forwarded
  // signals. Each of its streams goes through a pipe when it has a log file or when o.prefix_output and it is
  // shown; straight to the console when shown otherwise; to /dev/null when neither (`logs`, log_spec.h).
  // Throws std::runtime_error (pipe, fork, a log file) after killing and reaping the workers started so far.
  void start(int local_rank, const SpawnOptions& o, const std::vector<std::string>& shared, const RankLogs& logs);

  std::vector<Worker>& all() { return w_; }
  // The filtered files (fd -1: none).
  LogFile& filtered_out() { return filtered_out_; }
  LogFile& filtered_err() { return filtered_err_; }
  bool any_running() const;
  // Whether worker `w` (running) has exited: its status and code are recorded, and it is held, not reaped.
  bool exited(Worker& w);
  // The processes the exited workers left in their process groups, as "rank R: pid P, pid Q" parts ("" none).
  std::string leftovers() const;
  // `sig` to the process group of every worker not yet reaped: a running worker with what it started, and what an
  // exited one left behind.
  void kill_all(int sig);
  // A terminating signal, then SIGCONT: a stopped worker (SIGSTOP, a debugger detached badly) acts on it too.
  void terminate_all(int sig);
  // SIGKILL to the group of every worker not yet reaped, then reap each (its code recorded).
  void kill_and_reap();

 private:
  std::vector<Worker> w_;
  Guardian* guardian_ = nullptr;
  LogFile filtered_out_, filtered_err_;
};

// ---- supervision (supervise.cpp) -----------------------------------------------------------------------------------

// How one attempt of the worker group ended.
struct AttemptResult {
  int code = 0;                           // spawn_workers' exit code for it
  int signal_received = 0;                // the last terminating signal the launcher got (0: none)
  bool failed_first = false;              // a worker failed before any signal: a restart may follow
  std::vector<WorkerFailure> failures;    // the workers that failed, in the order seen (the root cause first)
  std::optional<PeerFailure> peer;        // another node failed first (o.watch): this node's workers were stopped
  // This node's workers failed too, but another node's failure was recorded first (failures at about the same
  // time): the job's root cause, whose code this node exits with.
  std::optional<PeerFailure> first_elsewhere;
  long leftover_scans = 0, leftover_passes = 0;  // SpawnReport's, for this attempt
  // The log files a write to failed (launch.log-write-failed): "PATH: REASON" each, in the order of the workers.
  std::vector<std::string> incomplete_logs;
};

// Runs until every worker has exited and its output is drained: relays output lines (prefixed "[rank R] ")
// and writes the log files, forwards the signals read from `signal_fd`, reaps, stops the others after the first
// failure (SIGTERM + SIGCONT, SIGKILL o.grace_seconds later).
AttemptResult supervise(Workers& workers, const SpawnOptions& o, int signal_fd);

}  // namespace mr::launch::detail
