// How many file descriptors a launch needs on this node (RLIMIT_NOFILE, `ulimit -n`), and the refusal of a limit
// too low for it, said before any worker starts instead of a failed pipe(), socket() or accept() later. The counts
// were measured on Linux (docs/robustness.md, "Process and file limits"): the launcher's output pipes, log files and
// start pipes per worker, megatron-run's own worker's store, Gloo and library descriptors per peer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/rule.h"

namespace mr::launch {

// The launcher's open-file limit too low for the workers it starts (open_file_refusal; apps/megatron-run/launch.cpp).
extern const Rule kOpenFileLimitRule;
// A worker's own: too low for its world size at start (lib/distributed/worker.cpp), or a descriptor that could not
// be opened later (lib/distributed/torch_backend.cpp).
extern const Rule kWorkerOpenFileLimitRule;

// Descriptors this process has open now, those numbered below `below` only (the open-file limit bounds the
// numbers a new descriptor may take: one inherited above it takes none of them); /proc/self/fd, or where /proc is
// not mounted those fcntl finds open, up to 65536.
int open_descriptors(std::optional<uint64_t> below = std::nullopt);

// What the launcher itself needs to start and watch `nproc` workers: `open_now` (its descriptors before it
// starts), a fixed part (the guardian's socket, the signal pipe, the MASTER_PORT it holds, ...), and when the
// workers' output goes through it (`piped`: prefixed lines or log files) one more and, per worker, its output and
// start pipes, plus the `log_files` all the workers write (stdout.log, stderr.log).
uint64_t launcher_files_needed(uint64_t open_now, int nproc, bool piped, int log_files);

// What megatron-run's own worker needs in a job of `world_size` ranks, beyond the descriptors it starts with
// (`open_at_start`): its store (server and clients), Gloo's connections to each peer, its libraries'.
uint64_t worker_files_needed(uint64_t open_at_start, int world_size);

// The one-line refusal of a launch whose open-file limit `limit` (the soft limit once raised to the hard one;
// nullopt: unlimited) is below the launcher's need `launcher`, or below `worker` (0: a user's program, whose need
// is unknown) for each of `nproc` workers; nullopt when it is enough. Carries the rule id launch.open-file-limit.
std::optional<std::string> open_file_refusal(std::optional<uint64_t> limit, int nproc, uint64_t launcher,
                                             uint64_t worker);

}  // namespace mr::launch
