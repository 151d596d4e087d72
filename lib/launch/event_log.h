// torchrun's --event-log-handler console: the agent's event record, one JSON line on stderr when the launch ends,
// as torch.distributed.elastic writes it (events.record(agent.get_event_succeeded() / get_event_failed())). Torch-free.
#pragma once

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

// This machine's name as socket.getfqdn() gives it: the canonical name of gethostname(), else gethostname().
std::string fq_hostname();

}  // namespace mr::launch
