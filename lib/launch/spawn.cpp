// spawn_workers (spawn.h): check the options, build the environment, catch the signals to forward, start the
// workers, supervise them. The parts are in spawn_detail.h: spawn_env.cpp, spawn_signals.cpp, workers.cpp,
// supervise.cpp.
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

int spawn_workers(const SpawnOptions& o) {
  using Report = SpawnReport;
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
  // Forked first, before any worker (and before the signal handlers): it stops what the workers started in their
  // process groups if this launcher dies without finishing (kill -9; launch/guardian.h).
  Guardian guardian(o.nproc_per_node, o.grace_seconds);
  SpawnOptions job = o;
  // The launcher's own TORCHELASTIC_ERROR_FILE (a scheduler's, or an enclosing torchrun worker's): the root cause's
  // record goes there when the job fails, as torchrun's @record main copies it. Not the workers' (they get their own).
  const char* own_error_file = std::getenv("TORCHELASTIC_ERROR_FILE");
  const std::string launcher_error_file = own_error_file ? own_error_file : "";
  const std::vector<std::string> env = detail::shared_worker_env(job);
  LogDir logs(o.logs, o.run_id, o.nproc_per_node);  // removes a temporary one last
  const std::string host = host_name();

  // The signal handlers live through every attempt (restored last).
  detail::SignalForwarder signals(o.handled_signals);
  int restarts = o.restart_count;  // used up, the job's (an elastic job's new node uses none)
  // --event-log-handler console: the previous attempt's place, the start of this attempt's rendezvous, and
  // whether a failure without an error file and with a code above 0 was seen (worker_raw_error's traits).
  std::optional<int> prev_node_rank, prev_nnodes;
  double rendezvous_ms = o.first_rendezvous_ms;
  std::chrono::steady_clock::time_point rendezvous_from = std::chrono::steady_clock::now();
  bool error_traits = false;
  std::vector<std::string> incomplete_logs;  // over every attempt (launch.log-write-failed), for the summary
  using Ms = std::chrono::duration<double, std::milli>;
  for (;;) {  // one attempt each: its restart count names it (attempt_<n>)
    job.restart_count = restarts;
    if (o.report) {  // the attempt's place: a c10d round may renumber the nodes or change their count
      o.report->restarts = restarts;
      o.report->node_rank = job.node_rank;
      o.report->nnodes = job.nnodes;
    }
    // A port chosen here is chosen again for every attempt (the last one's may still be held a moment), and held
    // until the attempt ends (HeldPort: another job started now cannot draw it; rank 0's store binds beside it).
    HeldPort held_port;
    if (!o.watch && !o.master_port && o.nnodes == 1) held_port = hold_free_port();
    if (!o.watch) job.master_port = o.master_port ? o.master_port : (o.nnodes == 1 ? held_port.port() : kTorchrunMasterPort);
    if (o.watch == nullptr && restarts != o.restart_count)  // one node: its "rendezvous" is this loop's turn
      rendezvous_ms = Ms(std::chrono::steady_clock::now() - rendezvous_from).count();
    const auto assign_from = std::chrono::steady_clock::now();
    const std::string dir = logs.attempt(job.restart_count, o.nproc_per_node);
    // Which node this is: nodes sharing one --log-dir make run directories that do not say it (ops37 #11).
    write_node_record(dir, {host, job.node_rank, job.nnodes, o.nproc_per_node, job.restart_count, o.run_id});
    detail::AttemptResult r;
    std::vector<Report::WorkerEnd> ends;  // --event-log-handler console: each worker's end
    {
      // Destroyed before the next attempt and on every path out of here: any worker still running is killed and
      // reaped.
      detail::Workers workers(o.nproc_per_node, &guardian);
      workers.open_filtered(o, dir);
      const double assign_ms = Ms(std::chrono::steady_clock::now() - assign_from).count();
      for (int i = 0; i < job.nproc_per_node; ++i) workers.start(i, job, env, rank_logs(o.logs, dir, i));
      if (o.on_attempt_start) {
        AttemptStart a;
        a.node_rank = job.node_rank;
        a.nnodes = job.nnodes;
        a.restarts = restarts;
        a.prev_node_rank = prev_node_rank;
        a.prev_nnodes = prev_nnodes;
        a.rendezvous_ms = rendezvous_ms;
        a.assign_ms = assign_ms;
        for (const detail::Worker& w : workers.all()) a.workers.emplace_back(w.local_rank, w.pid);
        o.on_attempt_start(a);
      }
      prev_node_rank = job.node_rank;
      prev_nnodes = job.nnodes;
      r = detail::supervise(workers, job, signals.read_fd());
      if (o.on_attempt_start) {
        for (const WorkerFailure& f : r.failures)
          error_traits = error_traits || adds_error_traits(f.error_file, torch_exit_code(f.status));
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
          if (e.raw_error) e.raw_error = worker_raw_error(*e.raw_error, *e.exit_code, error_traits);
      }
    }
    rendezvous_from = std::chrono::steady_clock::now();
    if (o.report) o.report->worker_ends = r.signal_received ? std::vector<Report::WorkerEnd>{} : std::move(ends);
    if (o.report && r.signal_received) o.report->stop_signal = r.signal_received;
    if (o.report) o.report->leftover_scans += r.leftover_scans, o.report->leftover_passes += r.leftover_passes;
    incomplete_logs.insert(incomplete_logs.end(), r.incomplete_logs.begin(), r.incomplete_logs.end());
    // The next attempt runs where the other nodes say (an elastic job's node count and ranks may change).
    // `upcoming`: the restart count of the attempt waited for.
    auto next = [&](int upcoming) {
      signals.pause();  // no worker runs: a stop signal ends the launcher while it waits for the other nodes
      const auto from = std::chrono::steady_clock::now();
      std::optional<Placement> p;
      {
        WaitingSignalNotice waiting(o.waiting_record ? o.waiting_record(job.node_rank, job.nnodes, upcoming)
                                                     : std::nullopt,
                                    o.handled_signals);
        p = o.watch->next_attempt();
      }
      signals.resume();
      rendezvous_ms = Ms(std::chrono::steady_clock::now() - from).count();
      if (!p) return false;
      job.node_rank = p->node_rank;
      job.nnodes = p->nnodes;
      job.master_addr = p->master_addr;
      job.master_port = p->master_port;
      restarts = p->restart_count;
      return true;
    };
    // No next attempt: this node's code, or 0 when the job ended well without it (an elastic job's spare).
    auto ended = [&](int code) { return o.watch && o.watch->ended_without_this_node() ? 0 : code; };
    // A launcher a signal stopped leaves torchrun's record of it (its agent's SignalException, which @record
    // writes) in its own TORCHELASTIC_ERROR_FILE.
    auto record_signal = [&] {
      if (launcher_error_file.empty() || r.signal_received == 0) return;
      const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
      const std::string why = write_error_record(
          launcher_error_file, launcher_signal_record(r.signal_received, static_cast<long>(getpid()), now));
      if (!why.empty())
        std::cerr << "megatron-run: cannot write the launcher's error file " << launcher_error_file
                  << " (TORCHELASTIC_ERROR_FILE): " << why << "\n";
    };
    if (r.peer) {  // another node failed (said on stderr): every node restarts together, or the job ends
      if (r.peer->restart && r.signal_received == 0 && (!r.peer->counted || restarts < o.max_restarts)) {
        if (r.peer->counted)  // numbered as TORCHELASTIC_RESTART_COUNT and the attempt_<n> log directories count
          std::cerr << "megatron-run: restart " << restarts + 1 << " of " << o.max_restarts
                    << " (--max-restarts): restarting the worker group with the other nodes (TORCHELASTIC_RESTART_COUNT="
                    << job.restart_count + 1 << ")\n";
        else
          std::cerr << "megatron-run: restarting the worker group with the other nodes (not counted as a restart)\n";
        if (next(r.peer->counted ? job.restart_count + 1 : job.restart_count)) continue;
      }
      // A change of the job's nodes that did not happen (code 0 there) ends this node as a failure.
      record_signal();
      return ended(r.peer->counted ? r.code : r.signal_received ? 128 + r.signal_received : 1);
    }
    if (r.code == 0) return 0;
    if (!r.failed_first) {  // stopped by a signal: no restart
      record_signal();
      return r.code;
    }
    if (restarts < o.max_restarts && r.signal_received == 0) {  // a launcher told to stop does not restart
      const WorkerFailure& f = r.failures[find_root_cause(r.failures).index];
      // The attempt as its log directory (attempt_<n>) and TORCHELASTIC_RESTART_COUNT name it; the restart that
      // follows as the one it is of --max-restarts (it uses one up).
      std::cerr << "megatron-run: the worker group failed (attempt_" << job.restart_count << ", TORCHELASTIC_RESTART_COUNT="
                << job.restart_count << ": rank " << f.rank << " " << describe_end(f) << "); restart " << restarts + 1
                << " of " << o.max_restarts << " (--max-restarts): restarting the worker group"
                << (o.watch ? " with the other nodes" : "") << " (TORCHELASTIC_RESTART_COUNT=" << job.restart_count + 1
                << ")\n";
      if (!o.watch) {
        ++restarts;
        continue;
      }
      if (next(job.restart_count + 1)) continue;
    }
    print_failure_summary(std::cerr, r.failures, job.restart_count, o.max_restarts,
                          r.first_elsewhere ? r.first_elsewhere->message : "", incomplete_logs, o.python);
    // The root cause the summary named: the first failure, or the rank its error file says it followed.
    const RootCause cause = find_root_cause(r.failures);
    if (!r.failures.empty() && !r.first_elsewhere && !cause.elsewhere_rank)  // this node's
      logs.set_root_cause(r.failures[cause.index].rank, r.failures[cause.index].error_file);
    if (!launcher_error_file.empty() && !r.failures.empty())
      if (const std::string why = write_launcher_error_file(launcher_error_file, r.failures[cause.index]); !why.empty())
        std::cerr << "megatron-run: cannot write the launcher's error file " << launcher_error_file
                  << " (TORCHELASTIC_ERROR_FILE): " << why << "\n";
    return ended(r.code);
  }
}

}  // namespace mr::launch
