// spawn_workers (spawn.h): check the options (check_options), then the attempts (Attempts): build the
// environment, catch the signals to forward, start the workers, supervise them, restart or end. The parts are in
// spawn_detail.h: spawn_env.cpp, spawn_signals.cpp, workers.cpp, supervise.cpp.
#include "launch/spawn.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "launch/event_log.h"
#include "launch/free_port.h"
#include "launch/guardian.h"
#include "launch/launch_env.h"
#include "launch/spawn_detail.h"

namespace mr::launch {

int worker_omp_threads(int cpus, int nproc_per_node) { return std::max(1, cpus / std::max(1, nproc_per_node)); }

namespace {

using Report = SpawnReport;
using Ms = std::chrono::duration<double, std::milli>;

// The options spawn_workers cannot act on: SpawnOptionError, before anything starts.
void check_options(const SpawnOptions& o) {
  if (o.nproc_per_node < 1) throw SpawnOptionError("--nproc-per-node must be at least 1");
  if (o.nnodes < 1) throw SpawnOptionError("--nnodes must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw SpawnOptionError("--node-rank " + std::to_string(o.node_rank) + " is outside 0.." +
                             std::to_string(o.nnodes - 1));
  if (o.max_restarts < 0) throw SpawnOptionError("--max-restarts must be at least 0");
  if (o.argv.empty()) throw SpawnOptionError("no worker command");
  if (o.virtual_local_rank)
    for (int i = 0; i < o.nproc_per_node; ++i) {
      try {
        virtual_local_device(i);
      } catch (const std::invalid_argument& e) {
        throw SpawnOptionError(std::string("--virtual-local-rank: ") + e.what());
      }
    }
}

// The attempts of one spawn_workers call (one each: its restart count names it, attempt_<n>), and what lives
// through all of them: the guardian, the job's current place, the log directory, the signal handlers. Its members
// are made in the order spawn_workers needs them (the guardian first) and go in the reverse order.
class Attempts {
 public:
  explicit Attempts(const SpawnOptions& o)
      : o_(o),
        // Forked first, before any worker (and before the signal handlers): it stops what the workers started in
        // their process groups if this launcher dies without finishing (kill -9; launch/guardian.h).
        guardian_(o.nproc_per_node, o.grace_seconds),
        job_(o),
        launcher_error_file_(own_error_file()),
        env_(detail::shared_worker_env(job_)),
        logs_(o.logs, o.run_id, o.nproc_per_node),  // removes a temporary one last
        host_(host_name()),
        signals_(o.handled_signals),  // the signal handlers live through every attempt (restored last)
        restarts_(o.restart_count),
        rendezvous_ms_(o.first_rendezvous_ms),
        rendezvous_from_(std::chrono::steady_clock::now()) {}

  // Runs the attempts until one ends the job here; the code spawn_workers returns.
  int run();

 private:
  // The launcher's own TORCHELASTIC_ERROR_FILE (a scheduler's, or an enclosing torchrun worker's): the root cause's
  // record goes there when the job fails, as torchrun's @record main copies it. Not the workers' (they get their own).
  static std::string own_error_file() {
    const char* own = std::getenv("TORCHELASTIC_ERROR_FILE");
    return own ? own : "";
  }
  // The attempt's place (in the report), its master port and the time its "rendezvous" took; the port chosen here
  // is returned held, to be held until the attempt ends.
  HeldPort begin_attempt();
  // Starts the attempt's workers, supervises them to their end, and records it (the report, the logs left
  // incomplete).
  detail::AttemptResult run_attempt();
  // --event-log-handler console: the attempt's workers have all started.
  void tell_attempt_start(detail::Workers& workers, double assign_ms) const;
  // --event-log-handler console: how each worker of the attempt ended.
  std::vector<Report::WorkerEnd> worker_ends(detail::Workers& workers, const detail::AttemptResult& r);
  // Another node failed (said on stderr): true when every node restarts together and this one has its place in the
  // next attempt.
  bool restart_with_peers(const detail::AttemptResult& r);
  // This node's group failed: true when a restart is left (and no stop signal came), said, and the next attempt's
  // place is known.
  bool restart_after_failure(const detail::AttemptResult& r);
  // No restart after this node's failure: the failure summary, the root cause's record, the launcher's error file.
  int end_with_failure(const detail::AttemptResult& r);
  // The next attempt runs where the other nodes say (an elastic job's node count and ranks may change); false when
  // there is none. `upcoming`: the restart count of the attempt waited for.
  bool wait_for_next_attempt(int upcoming);
  // No next attempt: this node's code, or 0 when the job ended well without it (an elastic job's spare).
  int ended(int code) const { return o_.watch && o_.watch->ended_without_this_node() ? 0 : code; }
  // A launcher a signal stopped leaves torchrun's record of it (its agent's SignalException, which @record writes)
  // in its own TORCHELASTIC_ERROR_FILE.
  void record_signal(const detail::AttemptResult& r) const;

  const SpawnOptions& o_;
  Guardian guardian_;
  SpawnOptions job_;
  const std::string launcher_error_file_;
  const std::vector<std::string> env_;
  LogDir logs_;
  const std::string host_;
  detail::SignalForwarder signals_;
  int restarts_;  // used up, the job's (an elastic job's new node uses none)
  // --event-log-handler console: the previous attempt's place, the start of this attempt's rendezvous, and
  // whether a failure without an error file and with a code above 0 was seen (worker_raw_error's traits).
  std::optional<int> prev_node_rank_, prev_nnodes_;
  double rendezvous_ms_;
  std::chrono::steady_clock::time_point rendezvous_from_;
  bool error_traits_ = false;
  std::vector<std::string> incomplete_logs_;  // over every attempt (launch.log-write-failed), for the summary
};

int Attempts::run() {
  for (;;) {  // one attempt each: its restart count names it (attempt_<n>)
    const HeldPort held_port = begin_attempt();
    const detail::AttemptResult r = run_attempt();
    if (r.peer) {  // another node failed (said on stderr): every node restarts together, or the job ends
      if (restart_with_peers(r)) continue;
      // A change of the job's nodes that did not happen (code 0 there) ends this node as a failure.
      record_signal(r);
      return ended(r.peer->counted ? r.code : r.signal_received ? 128 + r.signal_received : 1);
    }
    if (r.code == 0) return 0;
    if (!r.failed_first) {  // stopped by a signal: no restart
      record_signal(r);
      return r.code;
    }
    if (restart_after_failure(r)) continue;
    return end_with_failure(r);
  }
}

HeldPort Attempts::begin_attempt() {
  job_.restart_count = restarts_;
  if (o_.report) {  // the attempt's place: a c10d round may renumber the nodes or change their count
    o_.report->restarts = restarts_;
    o_.report->node_rank = job_.node_rank;
    o_.report->nnodes = job_.nnodes;
  }
  // A port chosen here is chosen again for every attempt (the last one's may still be held a moment), and held
  // until the attempt ends (HeldPort: another job started now cannot draw it; rank 0's store binds beside it).
  HeldPort held_port;
  if (!o_.watch && !o_.master_port && o_.nnodes == 1) held_port = hold_free_port();
  if (!o_.watch) job_.master_port = o_.master_port ? o_.master_port : (o_.nnodes == 1 ? held_port.port() : kTorchrunMasterPort);
  if (o_.watch == nullptr && restarts_ != o_.restart_count)  // one node: its "rendezvous" is this loop's turn
    rendezvous_ms_ = Ms(std::chrono::steady_clock::now() - rendezvous_from_).count();
  return held_port;
}

detail::AttemptResult Attempts::run_attempt() {
  const auto assign_from = std::chrono::steady_clock::now();
  const std::string dir = logs_.attempt(job_.restart_count, o_.nproc_per_node);
  // Which node this is: nodes sharing one --log-dir make run directories that do not say it (ops37 #11).
  write_node_record(dir, {host_, job_.node_rank, job_.nnodes, o_.nproc_per_node, job_.restart_count, o_.run_id});
  detail::AttemptResult r;
  std::vector<Report::WorkerEnd> ends;  // --event-log-handler console: each worker's end
  {
    // Destroyed before the next attempt and on every path out of here: any worker still running is killed and
    // reaped.
    detail::Workers workers(o_.nproc_per_node, &guardian_);
    workers.open_filtered(o_, dir);
    const double assign_ms = Ms(std::chrono::steady_clock::now() - assign_from).count();
    for (int i = 0; i < job_.nproc_per_node; ++i) workers.start(i, job_, env_, rank_logs(o_.logs, dir, i));
    if (o_.on_attempt_start) tell_attempt_start(workers, assign_ms);
    prev_node_rank_ = job_.node_rank;
    prev_nnodes_ = job_.nnodes;
    r = detail::supervise(workers, job_, signals_.read_fd());
    if (o_.on_attempt_start) ends = worker_ends(workers, r);
  }
  rendezvous_from_ = std::chrono::steady_clock::now();
  if (o_.report) o_.report->worker_ends = r.signal_received ? std::vector<Report::WorkerEnd>{} : std::move(ends);
  if (o_.report && r.signal_received) o_.report->stop_signal = r.signal_received;
  if (o_.report) o_.report->leftover_scans += r.leftover_scans, o_.report->leftover_passes += r.leftover_passes;
  incomplete_logs_.insert(incomplete_logs_.end(), r.incomplete_logs.begin(), r.incomplete_logs.end());
  return r;
}

void Attempts::tell_attempt_start(detail::Workers& workers, double assign_ms) const {
  AttemptStart a;
  a.node_rank = job_.node_rank;
  a.nnodes = job_.nnodes;
  a.restarts = restarts_;
  a.prev_node_rank = prev_node_rank_;
  a.prev_nnodes = prev_nnodes_;
  a.rendezvous_ms = rendezvous_ms_;
  a.assign_ms = assign_ms;
  for (const detail::Worker& w : workers.all()) a.workers.emplace_back(w.local_rank, w.pid);
  o_.on_attempt_start(a);
}

std::vector<Report::WorkerEnd> Attempts::worker_ends(detail::Workers& workers, const detail::AttemptResult& r) {
  std::vector<Report::WorkerEnd> ends;
  for (const WorkerFailure& f : r.failures)
    error_traits_ = error_traits_ || adds_error_traits(f.error_file, torch_exit_code(f.status));
  for (const detail::Worker& w : workers.all()) {
    Report::WorkerEnd e;
    e.rank = w.rank;
    e.local_rank = w.local_rank;
    e.pid = w.pid;
    e.state = r.failures.empty() ? "SUCCEEDED" : w.code == 0 ? "TERMINATED" : "FAILED";
    if (w.code != 0) {
      e.exit_code = torch_exit_code(w.status);
      e.raw_error = w.error_file;  // read below, once every failure's traits are known
    }
    ends.push_back(e);
  }
  for (Report::WorkerEnd& e : ends)
    if (e.raw_error) e.raw_error = worker_raw_error(*e.raw_error, *e.exit_code, error_traits_);
  return ends;
}

bool Attempts::restart_with_peers(const detail::AttemptResult& r) {
  if (!(r.peer->restart && r.signal_received == 0 && (!r.peer->counted || restarts_ < o_.max_restarts))) return false;
  if (r.peer->counted)  // numbered as TORCHELASTIC_RESTART_COUNT and the attempt_<n> log directories count
    std::cerr << "megatron-run: restart " << restarts_ + 1 << " of " << o_.max_restarts
              << " (--max-restarts): restarting the worker group with the other nodes (TORCHELASTIC_RESTART_COUNT="
              << job_.restart_count + 1 << ")\n";
  else
    std::cerr << "megatron-run: restarting the worker group with the other nodes (not counted as a restart)\n";
  return wait_for_next_attempt(r.peer->counted ? job_.restart_count + 1 : job_.restart_count);
}

bool Attempts::restart_after_failure(const detail::AttemptResult& r) {
  if (!(restarts_ < o_.max_restarts && r.signal_received == 0)) return false;  // a launcher told to stop does not restart
  const WorkerFailure& f = r.failures[find_root_cause(r.failures).index];
  // The attempt as its log directory (attempt_<n>) and TORCHELASTIC_RESTART_COUNT name it; the restart that
  // follows as the one it is of --max-restarts (it uses one up).
  std::cerr << "megatron-run: the worker group failed (attempt_" << job_.restart_count << ", TORCHELASTIC_RESTART_COUNT="
            << job_.restart_count << ": rank " << f.rank << " " << describe_end(f) << "); restart " << restarts_ + 1
            << " of " << o_.max_restarts << " (--max-restarts): restarting the worker group"
            << (o_.watch ? " with the other nodes" : "") << " (TORCHELASTIC_RESTART_COUNT=" << job_.restart_count + 1
            << ")\n";
  if (!o_.watch) {
    ++restarts_;
    return true;
  }
  return wait_for_next_attempt(job_.restart_count + 1);
}

int Attempts::end_with_failure(const detail::AttemptResult& r) {
  print_failure_summary(std::cerr, r.failures, job_.restart_count, o_.max_restarts,
                        r.first_elsewhere ? r.first_elsewhere->message : "", incomplete_logs_, o_.python);
  // The root cause the summary named: the first failure, or the rank its error file says it followed.
  const RootCause cause = find_root_cause(r.failures);
  if (!r.failures.empty() && !r.first_elsewhere && !cause.elsewhere_rank)  // this node's
    logs_.set_root_cause(r.failures[cause.index].rank, r.failures[cause.index].error_file);
  if (!launcher_error_file_.empty() && !r.failures.empty())
    if (const std::string why = write_launcher_error_file(launcher_error_file_, r.failures[cause.index]); !why.empty())
      std::cerr << "megatron-run: cannot write the launcher's error file " << launcher_error_file_
                << " (TORCHELASTIC_ERROR_FILE): " << why << "\n";
  return ended(r.code);
}

bool Attempts::wait_for_next_attempt(int upcoming) {
  signals_.pause();  // no worker runs: a stop signal ends the launcher while it waits for the other nodes
  const auto from = std::chrono::steady_clock::now();
  std::optional<Placement> p;
  {
    WaitingSignalNotice waiting(o_.waiting_record ? o_.waiting_record(job_.node_rank, job_.nnodes, upcoming)
                                                  : std::nullopt,
                                o_.handled_signals);
    p = o_.watch->next_attempt();
  }
  signals_.resume();
  rendezvous_ms_ = Ms(std::chrono::steady_clock::now() - from).count();
  if (!p) return false;
  job_.node_rank = p->node_rank;
  job_.nnodes = p->nnodes;
  job_.master_addr = p->master_addr;
  job_.master_port = p->master_port;
  restarts_ = p->restart_count;
  return true;
}

void Attempts::record_signal(const detail::AttemptResult& r) const {
  if (launcher_error_file_.empty() || r.signal_received == 0) return;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string why = write_error_record(
      launcher_error_file_, launcher_signal_record(r.signal_received, static_cast<long>(getpid()), now));
  if (!why.empty())
    std::cerr << "megatron-run: cannot write the launcher's error file " << launcher_error_file_
              << " (TORCHELASTIC_ERROR_FILE): " << why << "\n";
}

}  // namespace

int spawn_workers(const SpawnOptions& o) {
  check_options(o);
  Attempts attempts(o);
  return attempts.run();
}

}  // namespace mr::launch
