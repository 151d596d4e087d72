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

#include "launch/free_port.h"
#include "launch/guardian.h"
#include "launch/spawn_detail.h"

namespace mr::launch {

int worker_omp_threads(int cpus, int nproc_per_node) { return std::max(1, cpus / std::max(1, nproc_per_node)); }

int spawn_workers(const SpawnOptions& o) {
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

  // The signal handlers live through every attempt (restored last).
  detail::SignalForwarder signals(o.handled_signals);
  int restarts = o.restart_count;  // used up, the job's (an elastic job's new node uses none)
  for (;;) {  // one attempt each: its restart count names it (attempt_<n>)
    job.restart_count = restarts;
    if (o.report) {  // the attempt's place: a c10d round may renumber the nodes or change their count
      o.report->restarts = restarts;
      o.report->node_rank = job.node_rank;
      o.report->nnodes = job.nnodes;
    }
    // A port chosen here is chosen again for every attempt (the last one's may still be held a moment).
    if (!o.watch) job.master_port = o.master_port ? o.master_port : (o.nnodes == 1 ? free_port() : 29500);
    const std::string dir = logs.attempt(job.restart_count, o.nproc_per_node);
    detail::AttemptResult r;
    {
      // Destroyed before the next attempt and on every path out of here: any worker still running is killed and
      // reaped.
      detail::Workers workers(o.nproc_per_node, &guardian);
      workers.open_filtered(o, dir);
      for (int i = 0; i < job.nproc_per_node; ++i) workers.start(i, job, env, rank_logs(o.logs, dir, i));
      r = detail::supervise(workers, job, signals.read_fd());
    }
    if (o.report && r.signal_received) o.report->stop_signal = r.signal_received;
    if (o.report) o.report->leftover_scans += r.leftover_scans, o.report->leftover_passes += r.leftover_passes;
    // The next attempt runs where the other nodes say (an elastic job's node count and ranks may change).
    // `upcoming`: the restart count of the attempt waited for.
    auto next = [&](int upcoming) {
      signals.pause();  // no worker runs: a stop signal ends the launcher while it waits for the other nodes
      std::optional<Placement> p;
      {
        WaitingSignalNotice waiting(o.waiting_record ? o.waiting_record(job.node_rank, job.nnodes, upcoming)
                                                     : std::nullopt,
                                    o.handled_signals);
        p = o.watch->next_attempt();
      }
      signals.resume();
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
      const WorkerFailure& f = r.failures.front();
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
                          r.first_elsewhere ? r.first_elsewhere->message : "");
    if (!launcher_error_file.empty() && !r.failures.empty())
      if (const std::string why = write_launcher_error_file(launcher_error_file, r.failures.front()); !why.empty())
        std::cerr << "megatron-run: cannot write the launcher's error file " << launcher_error_file
                  << " (TORCHELASTIC_ERROR_FILE): " << why << "\n";
    return ended(r.code);
  }
}

}  // namespace mr::launch
