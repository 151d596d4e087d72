// megatron-run's own local spawner (torchrun's job for one node): starts N workers with torchrun's environment,
// forwards signals, prefixes every output line with the worker's rank, writes torchrun's per-rank logs, restarts
// the whole group after a failure (--max-restarts), and returns the first failing worker's exit code after
// terminating the rest, with a summary naming the root cause. Torch-free.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launch/log_spec.h"

namespace mr::launch {

// Another node of the job failed: its code (this node's launcher exits with it) and what happened there.
// `restart`: a worker failed there with restarts left; every node stops its workers and starts them again.
// `counted`: the restart uses up one of --max-restarts (an elastic job's new node does not: torchrun's
// membership change).
struct PeerFailure {
  int code = 1;
  std::string message;
  bool restart = false;
  bool counted = true;
  // Not a failure: another node's launcher was told to stop by this signal (its code is 128 + it). This node's
  // workers get the same signal, and when every one of them exits 0 after it this node exits 0 too.
  int stop_signal = 0;
};

// Where this node's workers run in an attempt: the job's node count, this node's rank, the workers' master.
struct Placement {
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;  // restarts used up before it, the job's (TORCHELASTIC_RESTART_COUNT)
};

// The other nodes of a multi-node job, as the supervisor sees them (launch/node_group.h).
class JobWatch {
 public:
  virtual ~JobWatch() = default;
  // Called by the supervisor about every 200 ms (it is also this node's heartbeat): another node's failure, once
  // there is one. Must not block for long.
  virtual std::optional<PeerFailure> poll() = 0;
  // This node's first failing worker (its exit code, and a line saying who and how), for the other nodes. Returns
  // another node's failure when the job's first failure, the one it ends with, was recorded there before this one
  // (failures on several nodes at once: every node then names the same root cause and exits with its code).
  virtual std::optional<PeerFailure> local_failure(int code, const std::string& what) = 0;
  // This node's launcher was told to stop by `sig` (a terminating signal): the job ends on every node, without a
  // restart, with 128 + sig and `what` as its cause unless a failure was recorded first; the other nodes pass `sig`
  // on to their workers (PeerFailure::stop_signal).
  virtual void local_stop(int sig, const std::string& what) = 0;
  // After an attempt ended in a failure with restarts left (here, or a peer's restart): waits until every node's
  // workers have stopped, then returns where the next attempt runs (an elastic job's nodes may have changed).
  // nullopt when the job cannot go on (a node failed for good, finished, or did not stop in time); the reason is
  // on stderr and poll() reports it.
  virtual std::optional<Placement> next_attempt() = 0;
  // After next_attempt() returned nullopt: true when the job ended well without this node (an elastic job's
  // spare), so that this node exits 0.
  virtual bool ended_without_this_node() const { return false; }
};

// A line for WaitingSignalNotice to write after its notice (--event-log-handler console: the launcher's FAILED
// record), made before the wait for each stop signal: `text(sig)` gives the line's text before and after a
// number of whole seconds, which the handler fills in: the seconds since `started` when the signal came.
struct WaitingRecord {
  std::function<std::pair<std::string, std::string>(int sig)> text;
  std::chrono::steady_clock::time_point started;
};

// What ended spawn_workers, for the caller's record (--event-log-handler console): the terminating signal the
// launcher got (0: none) and the restarts the job had used. Kept up to date through every attempt.
struct SpawnReport {
  int stop_signal = 0;
  int restarts = 0;
  // This node's rank and the node count of the last attempt started (torchrun's record gives the worker group's
  // as the last rendezvous left them).
  int node_rank = 0;
  int nnodes = 1;
  // Once every worker of an attempt has exited, /proc is scanned for what they left in their process groups: at once
  // after each worker's exit, then at most every 100 ms while something is left, not on every pass of the
  // supervision loop (each scan reads every process's stat file). Over every attempt: the scans, and the passes that
  // could have scanned (every worker exited, nothing killed yet).
  long leftover_scans = 0;
  long leftover_passes = 0;
  // --event-log-handler console: how each worker of the last attempt ended, when that attempt ended without a stop
  // signal to the launcher (torchrun's _record_worker_events; a signal raises in its agent and records none).
  // `state`: SUCCEEDED when no worker failed, else FAILED for each failed worker and TERMINATED for one that
  // exited 0; exit_code (torchrun's: minus the signal) and raw_error (launch/event_log.h) for a failed one.
  struct WorkerEnd {
    int rank = 0, local_rank = 0;
    pid_t pid = -1;
    std::string state;
    std::optional<int> exit_code;
    std::optional<std::string> raw_error;
  };
  std::vector<WorkerEnd> worker_ends;
};

// --event-log-handler console: an attempt's workers have started (SpawnOptions::on_attempt_start).
struct AttemptStart {
  // The attempt's place, and the one before it (nullopt before the first: torchrun's records of its rendezvous
  // and rank assignment hold the worker group's previous rank and size, None before the first rendezvous).
  int node_rank = 0, nnodes = 1, restarts = 0;
  std::optional<int> prev_node_rank, prev_nnodes;
  double rendezvous_ms = 0;  // the launchers meeting (again) for it; ~0 on one node
  double assign_ms = 0;      // the workers' ranks and environment made
  std::vector<std::pair<int, pid_t>> workers;  // local rank, pid
};

struct SpawnOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port when nnodes == 1, else 29500 (torchrun's default)
  std::vector<std::string> argv;             // the worker command (argv[0] a path), the same for every rank
  // The Python that runs the program and how it was chosen ("/usr/bin/python3 (the first python3 on PATH)"), named
  // by the failure summary when a module could not be imported (failure_report.h); "" not a Python program.
  std::string python;
  std::map<std::string, std::string> env;    // extra environment for every worker
  double grace_seconds = 30;                 // SIGTERM -> SIGKILL delay when stopping workers (torchrun's 30 s)
  // A worker that exited 0 while others still run this long after it: said once (which ranks finished, how many
  // still run), so that a job left waiting for a finished rank is not silent. Ranks of a job that ends normally
  // finish within seconds of each other and never see it. <= 0: never said.
  double finished_notice_seconds = 30;
  bool prefix_output = true;                 // "[rank R] " before every line of the workers' stdout/stderr
  // torchrun 2.x's --log-line-prefix-template (launch/line_prefix.h): with prefix_output, the prefix instead of
  // "[rank R] ".
  std::string line_prefix_template;
  // torchrun 2.x's --virtual-local-rank: each worker gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES (and
  // HIP_VISIBLE_DEVICES when the launcher has it) naming its own GPU only (virtual_local_device), and
  // MR_VIRTUAL_LOCAL_RANK=1 (megatron-run's worker then counts one rank per visible GPU).
  bool virtual_local_rank = false;
  // torchrun 2.x's --numa-binding: local rank i's CPUs (cpu_binding[i], launch/numa_binding.h), set with
  // sched_setaffinity between fork and exec, as `numactl --physcpubind` would. Empty: no binding.
  std::vector<std::set<int>> cpu_binding;
  // torchrun 2.x's --signals-to-handle: the signals the launcher catches; each is passed on to the workers and
  // stops them (SIGKILL after grace_seconds), as torchrun does. Empty: megatron-run's default, SIGINT, SIGTERM,
  // SIGHUP and SIGQUIT stop the workers, SIGUSR1 and SIGUSR2 are passed on only.
  std::vector<int> handled_signals;
  // torchrun's TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_MAX_RESTARTS for the workers.
  std::string run_id = "none";
  std::string role = "default";  // torchrun's --role: the workers' ROLE_NAME
  // max_restarts: how often the whole local group is started again after a worker fails (each attempt gets
  // TORCHELASTIC_RESTART_COUNT = its number, from restart_count up).
  int restart_count = 0;
  int max_restarts = 0;
  LogOptions logs;  // --log-dir, --redirects, --tee, --local-ranks-filter (launch/log_spec.h)
  // The other nodes (nullptr: a one-node job). A failure there stops this node's workers (SIGTERM, grace,
  // SIGKILL) and spawn_workers returns its code; this node's first failure is told to them. With max_restarts,
  // a failure on any node restarts every node's group together (torchrun's behaviour), through next_attempt().
  JobWatch* watch = nullptr;
  SpawnReport* report = nullptr;  // when set: filled as the attempts go
  // Between attempts of a job of several nodes (no worker runs) a stop signal ends the launcher as WaitingSignalNotice
  // says; when set, this gives its record line (--event-log-handler console): from this node's rank and the node
  // count of the attempt that ended, and the restart count of the one waited for.
  std::function<std::optional<WaitingRecord>(int node_rank, int nnodes, int restarts)> waiting_record;
  // When set: called once each attempt's workers have all started (--event-log-handler console's RENDEZVOUS,
  // ASSIGN_WORKER_RANKS and START records), and report->worker_ends filled at the end.
  std::function<void(const AttemptStart&)> on_attempt_start;
  double first_rendezvous_ms = 0;  // the first attempt's rendezvous (the launchers' meeting, by the caller)
};

// Runs the workers to completion. Returns 0 when all exit 0, else the first failing worker's exit code
// (128 + signal number for a worker killed by a signal) once no restart is left, after printing the failure
// summary (launch/failure_report.h) on stderr. A worker failure with restarts left stops the whole group (as
// below), says so on stderr and starts it again; a signal to the launcher is never followed by a restart.
// Throws SpawnOptionError for options it cannot act on (a usage error), std::runtime_error if a worker or its log
// directory cannot be made (a system failure: a descriptor, process or directory could not be had).
// No worker outlives it: each is started with PR_SET_PDEATHSIG = SIGKILL (it dies with the calling thread, even
// after kill -9 of the launcher; call this from the thread that lives longest, e.g. the main thread); after the
// first failure the others' process groups get SIGTERM and SIGCONT (a stopped worker acts on it too), then SIGKILL
// `grace_seconds` later; every path out of here kills and reaps what is still running. A guardian process
// (launch/guardian.h), forked before the first worker, stops what the workers started in their process groups if
// the launcher dies without returning from here (kill -9).
int spawn_workers(const SpawnOptions& opts);

// Called once before spawn_workers by a process that exits after it (the launcher): from the end of its signal
// forwarding (the last attempt's workers have ended) to the process's exit, the signals it forwarded stay caught
// and are only noted ("megatron-run: received signal 15 (SIGTERM) after the workers ended; not acted on (the
// launcher is finishing)"), so that a late stop signal (a third Ctrl-C) cannot end the launcher before its
// clean-up (a temporary log directory), its summary and its exit code (128 + the first stop signal), as torchrun
// keeps its handlers until its agent exits. Without it, spawn_workers restores the dispositions it found.
void keep_signals_caught_to_exit();

// spawn_workers' refusal of its options (--nproc-per-node 0, --node-rank outside the nodes, ...).
struct SpawnOptionError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// OMP_NUM_THREADS for each of `nproc_per_node` workers sharing `cpus` processors when the user set none: an
// even share, at least 1 (torchrun sets 1; an even share keeps a CPU job's optimizer kernels on every core).
// Applied by spawn_workers when nproc_per_node > 1 and OMP_NUM_THREADS is neither in the environment nor in `env`.
int worker_omp_threads(int cpus, int nproc_per_node);

// --virtual-local-rank: the one GPU local rank `local_rank` sees, as torchrun picks it: the local_rank-th entry of
// HIP_VISIBLE_DEVICES when set and non-empty, else of CUDA_VISIBLE_DEVICES when set, else the local rank itself.
// Throws std::invalid_argument naming the variable when the list is too short.
std::string virtual_local_device(int local_rank);

// While alive (the launchers meeting, or node 0 waiting for the others at the end; no worker runs): SIGINT,
// SIGTERM, SIGHUP and SIGQUIT print "megatron-run: received signal N (NAME) while waiting for the other nodes;
// exiting" on stderr (then `record`'s line, when given), then end the process as the signal does (the other nodes
// see this launcher gone). A signal ignored before (nohup's SIGHUP) stays ignored unless `handled`
// (--signals-to-handle) names it, as while the workers run. The dispositions it replaced come back with its end.
// One at a time per process.
class WaitingSignalNotice {
 public:
  explicit WaitingSignalNotice(const std::optional<WaitingRecord>& record = std::nullopt,
                               const std::vector<int>& handled = {});
  ~WaitingSignalNotice();
  WaitingSignalNotice(const WaitingSignalNotice&) = delete;
  WaitingSignalNotice& operator=(const WaitingSignalNotice&) = delete;

 private:
  struct sigaction old_[4];
};

}  // namespace mr::launch
