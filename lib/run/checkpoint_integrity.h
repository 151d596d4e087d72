// --verify-integrity (docs/checkpoints.md): Megatron's integrity manifest, for megatron-run's own checkpoint
// format. A save writes DIR/iter_N/integrity.json, {"algorithm": "sha256", "files": {NAME: HEX, ...}}: the SHA-256
// of every regular file of the checkpoint directory but the manifest itself (Megatron's file name and fields; in
// Megatron only its torch_dist format writes and checks it). A load with the flag recomputes each digest and
// refuses a checkpoint without a manifest, with another algorithm, with a file missing or changed, or with a rank
// file (rank_N.json, rank_N.safetensors: what the load reads) the manifest does not list (CheckpointError
// checkpoint.integrity, naming the file). Internal to lib/run.
#pragma once

#include <string>

#include "config/rule.h"

namespace mr::run {

extern const Rule kCkptIntegrity;  // defined in checkpoint_format.cpp
inline constexpr const char* kIntegrityManifest = "integrity.json";

// Hashes every regular file of `dir` (sorted by name, the manifest excluded) and writes `dir`/integrity.json
// (through a temporary file, fsynced, renamed). Equal files give equal bytes. CheckpointError checkpoint.save-failed
// naming the file that could not be read or written. `threads`: files hashed at once (0: the CPUs this process
// may run on, at most 8); the manifest is the same for every count.
void write_integrity_manifest(const std::string& dir, unsigned threads = 0);
// Checks `dir` against its manifest; returns the number of files checked. CheckpointError checkpoint.integrity
// naming the manifest (absent, unreadable, not Megatron's form, another algorithm), the first rank file of `dir`
// (by name) it does not list, or the first file in the manifest's order that is missing or whose digest differs
// (and how many differ), for every `threads` (as above).
size_t verify_integrity_manifest(const std::string& dir, unsigned threads = 0);

}  // namespace mr::run
