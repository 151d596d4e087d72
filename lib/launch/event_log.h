// torchrun's --event-log-handler console: torch.distributed.elastic's event records, one JSON line each on stderr,
// as torchrun 2.x writes them: per attempt RENDEZVOUS and ASSIGN_WORKER_RANKS (source AGENT, with duration_ms:
// its record_duration) and one START per worker (source WORKER); when the run returns, one record per worker of
// the last attempt (SUCCEEDED, FAILED or TERMINATED: its _record_worker_events); last the agent's SUCCEEDED or
// FAILED (events.record(agent.get_event_succeeded() / get_event_failed())). Torch-free.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace mr::launch {

// What the record says. torchrun records SUCCEEDED when its agent's run returns, whatever the workers did (it
// says that the launcher ran, not that the job succeeded), and FAILED when the launcher is stopped by a signal
// or cannot run (a rendezvous error, workers that cannot start).
struct AgentEvent {
  bool succeeded = true;
  std::string run_id = "none";     // --rdzv-id
  // This node's rank and the nodes of the job; null (nullopt) before the launchers have met, as torchrun's worker
  // group holds None for both until its first rendezvous returns.
  std::optional<int> group_rank = 0;
  std::optional<int> group_world_size = 1;
  std::string role = "default";    // --role
  std::string hostname;            // fully qualified (fq_hostname())
  int64_t total_run_time = 0;      // whole seconds since the launch started (the rendezvous included)
  std::string rdzv_backend = "static";
  std::optional<std::string> raw_error;  // FAILED: what stopped it (torchrun: the Python traceback)
  std::string entry_point;         // the workers' program, its file name only (torchrun: the interpreter's)
  int agent_restarts = 0;          // restarts used
  // Another record than the agent's final one: its state ("RENDEZVOUS", "ASSIGN_WORKER_RANKS", "START",
  // "SUCCEEDED", "FAILED", "TERMINATED"); "" the agent's final record (SUCCEEDED or FAILED, from `succeeded`).
  std::string state;
  // A worker's record (source WORKER): torchrun's Worker fields. global_rank and worker_id (its pid, a string) in
  // the outer metadata; local_rank, role_rank, role_world_size, exit_code and worker_pid in the inner one, each as
  // a one-element list (torchrun's _construct_event makes them tuples).
  struct WorkerFields {
    int global_rank = 0;
    pid_t pid = -1;                   // worker_id
    int local_rank = 0;
    int role_rank = 0;
    int role_world_size = 1;
    std::optional<int> exit_code;     // FAILED: torchrun's exit code (minus the signal that killed it)
    std::optional<pid_t> worker_pid;  // FAILED: its pid again
  };
  std::optional<WorkerFields> worker;
  std::optional<double> duration_ms;  // RENDEZVOUS, ASSIGN_WORKER_RANKS: how long the step took
};

// The record as Python's json.dumps writes it: ", " and ": " separators, every character outside printable
// ASCII escaped (\uXXXX, surrogate pairs above U+FFFF; a byte that is not UTF-8 as \udcXX, as Python holds an
// argument decoded with surrogateescape), the inner
// "metadata" a JSON string of its own. No newline.
std::string agent_event_json(const AgentEvent& e);

// agent_event_json's text split where total_run_time's digits go (e.total_run_time is not used): for a record
// written from a signal handler, which knows the run time only then.
struct AgentEventParts {
  std::string before, after;
};
AgentEventParts agent_event_json_parts(const AgentEvent& e);

// This machine's name as Python's socket.getfqdn() gives it: gethostbyaddr() of gethostname()'s first address, then
// the first of its name and aliases that contains a dot, else its name; gethostname() when a lookup fails.
std::string fq_hostname();

// Whether torch's events logger writes a record at INFO under the environment's LOGLEVEL (`loglevel`, nullptr
// when unset): its logger level is LOGLEVEL's (default INFO), a name of Python's logging. DEBUG and INFO: yes;
// WARN, WARNING, ERROR, CRITICAL, FATAL and NOTSET (the root logger's WARNING then): no. Any other value (a
// number, lower case, empty) makes torchrun fail at import (ValueError: Unknown level); megatron-run keeps INFO.
bool events_logged(const char* loglevel);

// A failed worker's raw_error as torchrun's record has it: json.dumps of its error file's JSON (`error_file`, read
// as ProcessFailure reads it), or, for a worker that wrote none (or no JSON), {"message": "<NONE>"} with
// "errorTraits" {"category": "system_terminated_error", "retryability": "False"} when `traits` (torch adds that
// to one dictionary it shares between every such failure once one exited with a code above 0, so every such
// record of the launcher shows it from then on). `exit_code`: torchrun's (minus the signal); a file whose
// "message" is empty gets the traits itself when it is above 0.
std::string worker_raw_error(const std::string& error_file, int exit_code, bool traits);
// Whether a failure counts for worker_raw_error's `traits`: no error file (or no JSON in it) and an exit code > 0.
bool adds_error_traits(const std::string& error_file, int exit_code);

}  // namespace mr::launch
