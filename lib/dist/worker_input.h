// What megatron-run hands the torch-linked worker (megatron-run-worker): the resolved namespace and the few
// launcher facts it needs, as one JSON document (passed through an inherited memfd or a file). Also the config
// fingerprint every rank publishes to the store so that ranks started with different configs are caught.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/namespace.h"

namespace mr::dist {

struct WorkerInput {
  Namespace ns;                     // the validated arguments
  bool backend_explicit = false;    // --distributed-backend given (else: nccl with a GPU, gloo without)
  std::string log_level = "warning";
  bool train = true;                // false: stop after the bring-up self-check (--bring-up-only)
  std::vector<std::string> argv;    // megatron-run's command line (after the program name), for messages

  std::string encode() const;                           // {"version": 1, ..., "namespace": {...}}
  static WorkerInput decode(const std::string& json);   // throws std::runtime_error
};

// Writes `text` to an anonymous in-memory file that survives exec (no close-on-exec); returns its fd.
int memfd_with(const std::string& text);
std::string read_fd(int fd);      // from offset 0 to the end
std::string read_file(const std::string& path);

// The config as ranks compare it: every resolved dest except the rank-specific ones (rank, local_rank), as
// {"dest": value, ...} with keys sorted.
std::string config_fingerprint(const Namespace& ns);
uint64_t fingerprint_hash(const std::string& fingerprint);  // FNV-1a 64
// The dests whose values differ between two fingerprints (present in one only counts as different).
std::vector<std::string> fingerprint_diff(const std::string& a, const std::string& b);
// "--tensor-model-parallel-size" for a dest (the first option string writing it), else the dest itself.
std::string flag_for_dest(const std::string& dest);

}  // namespace mr::dist
