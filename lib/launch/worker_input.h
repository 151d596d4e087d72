// What megatron-run hands the torch-linked worker (megatron-run-worker): the resolved namespace and the few
// launcher facts it needs, as one JSON document (passed through an inherited memfd or a file). Also the config
// fingerprint every rank publishes to the store so that ranks started with different configs are caught.
// Torch-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/args.h"
#include "config/namespace.h"
#include "config/target_env.h"
#include "launch/launch_env.h"

namespace mr::launch {

struct WorkerInput {
  Namespace ns;                     // the validated arguments, as they travel (values and provenance)
  Args args;                        // their typed view: what the runtime reads (decode() builds it from ns)
  bool backend_explicit = false;    // --distributed-backend given (else: nccl with a GPU, gloo without)
  std::string log_level = "warning";
  bool train = true;                // false: stop after the bring-up self-check (--bring-up-only)
  std::vector<std::string> argv;    // megatron-run's command line (after the program name), for messages
  std::vector<std::string> given;   // the dests the user set (a config file or the command line), sorted
  // The dests validation derived and the user did not set, with how ("derived by model-dimensions"): named as such
  // when ranks resolve different configs (fingerprint_differences).
  std::map<std::string, std::string> derived;
  std::optional<double> heartbeat_timeout_s;  // the launcher option --heartbeat-timeout SECONDS
  // The flags the training run's start notice named (run::unacted_flags, printed by the spawner or by rank 0 under
  // another launcher), spelled as there (`--inprocess-heartbeat-timeout`): the runtime's notice of the timeout-like
  // flags it ignores (JobTimeouts::ignored) leaves these out, so that no flag is named twice. Empty with
  // --bring-up-only (no such notice).
  std::vector<std::string> noticed;
  // The target the arguments were validated for. Only its Transformer Engine version travels (the run keeps the
  // fp32 masters as remainders where that TE does: run/model.h's keeps_param_remainders); the rest stays default.
  TargetEnv target;

  std::string encode() const;                           // {"version": 1, ..., "namespace": {...}}
  static WorkerInput decode(const std::string& json);   // throws std::runtime_error (ArgsError for a bad value)
};

// The time limits a rank runs under, read from the resolved arguments, the launcher options and the environment
// (docs/distributed.md, "Timeouts"):
//   startup            --distributed-timeout-minutes (default 10); MR_DIST_TIMEOUT_S=S overrides it. Bounds
//                      connecting to the store, the rendezvous, communicator creation and every collective until
//                      initialisation is over.
//   after_init         --distributed-timeout-seconds-after-init: every collective's timeout once the bring-up
//                      (rendezvous, groups, self-check) has passed; unset: startup stays.
//   heartbeat          MR_DIST_HEARTBEAT_S (default 1 s): heartbeat and abort-check period.
//   heartbeat_timeout  --heartbeat-timeout S (launcher option), else MR_DIST_HEARTBEAT_TIMEOUT_S, else 30 s: a rank
//                      whose heartbeat has not changed for this long (or a store that has not answered for this long)
//                      fails the job. At least twice the heartbeat period.
// `ignored` names each timeout-like flag the user set that the runtime does not act on, with why
// ("--inprocess-heartbeat-timeout (in-process restart is not implemented ...)"), unless the run's start notice
// named it already (WorkerInput::noticed): rank 0 prints it at start.
struct JobTimeouts {
  std::chrono::milliseconds startup{std::chrono::minutes(10)};
  std::optional<std::chrono::milliseconds> after_init;
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds heartbeat_timeout{30000};
  std::string heartbeat_source = "--heartbeat-timeout's default";  // HeartbeatLimits::timeout_source
  std::vector<std::string> ignored;
};
// Throws std::runtime_error naming the flag or variable whose value cannot be used (zero, negative, not a number,
// a heartbeat timeout shorter than two heartbeat periods); its message carries rule dist.time-limits ("[id] text",
// util/rule_id.h). `heartbeat` false: the heartbeat values are left at their defaults, unread and unchecked (a
// user program on one node has no heartbeat: megatron-run's launcher checks them only where they are used).
JobTimeouts job_timeouts(const WorkerInput& in, const EnvLookup& env = process_env(),
                         bool heartbeat = true);  // reads in.args

// The heartbeat period and bound alone (job_timeouts' heartbeat and heartbeat_timeout): `option_s` is
// --heartbeat-timeout, else MR_DIST_HEARTBEAT_TIMEOUT_S, else 30 s; the period MR_DIST_HEARTBEAT_S, else 1 s. The one
// reader of these two variables: the launchers bound each other with the same timeout their workers get
// (launch/node_group.h's RendezvousOptions::heartbeat_timeout). Throws as job_timeouts does.
struct HeartbeatLimits {
  std::chrono::milliseconds period{1000};
  std::chrono::milliseconds timeout{30000};
  // Where the timeout came from, for messages: "--heartbeat-timeout", "MR_DIST_HEARTBEAT_TIMEOUT_S" or its default.
  std::string timeout_source = "--heartbeat-timeout's default";
};
HeartbeatLimits heartbeat_limits(std::optional<double> option_s, const EnvLookup& env = process_env());

// Writes `text` to an anonymous in-memory file that survives exec (no close-on-exec); returns its fd.
int memfd_with(const std::string& text);
// The worker's input, bounded (limits::kMaxInputFileBytes) and never blocking: read_fd reads a regular file's fd
// from offset 0 to the end, read_file a regular file (util/bounded_file.h; its refusals in file_refusal_text's
// words, as the parser says an input file's). Throw std::runtime_error saying what is wrong (a pipe, /dev/zero, a
// directory, too large). parse_input_fd reads --input-fd's value: digits only.
std::string read_fd(int fd);
std::string read_file(const std::string& path);
int parse_input_fd(const std::string& word);

// The config as ranks compare it: every resolved dest except the rank-specific ones (rank, local_rank), as
// {"dest": value, ...} with keys sorted.
std::string config_fingerprint(const Namespace& ns);
uint64_t fingerprint_hash(const std::string& fingerprint);  // FNV-1a 64
// The dests whose values differ between two fingerprints (present in one only counts as different).
std::vector<std::string> fingerprint_diff(const std::string& a, const std::string& b);
// What rank `rank` says when its fingerprint `mine` differs from rank 0's `rank0`: "--num-layers (4 on rank 1, 2
// on rank 0), ...", each value named by its rank (the text is relayed to rank 0's console too, where "here" would
// read wrong). `derived`: this rank's dests that validation derived and the user did not set, with how
// (Provenance::describe, "derived by model-dimensions"): listed after the others, marked so (review firsthour36
// #13: --encoder-num-layers follows --num-layers). At most 12 arguments, then how many in all.
std::string fingerprint_differences(int rank, const std::string& mine, const std::string& rank0,
                                    const std::map<std::string, std::string>& derived);

}  // namespace mr::launch
