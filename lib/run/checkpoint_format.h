// The on-disk format of a megatron-run checkpoint (docs/checkpoints.md), without LibTorch: safetensors files
// (an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw bytes) and the JSON metadata of each rank, which says where each stored piece sits in the *unsharded*
// tensor. Readers validate everything they are given: a truncated or malformed file is a CheckpointError naming
// the file (tests/fuzz/fuzz_checkpoint.cpp), never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/args.h"
#include "config/limits.h"
#include "config/rule.h"
#include "config/value.h"
#include "distributed/collectives.h"
#include "run/model.h"
#include "util/rule_id.h"
#include "util/text.h"

namespace mr::run {

// A refusal of the checkpoint code: a stable id (docs/checkpoints.md lists them) and a message naming the flag
// or the file. what() is "[id] message" (util/rule_id.h), which prints as "error[id]: message".
// The message is cut to kMaxCheckpointMessageBytes: it may quote names and values from a checkpoint's files, which
// can be of any length (a 5 MB tensor name stays out of the error line). The cut is inside it, keeping its last
// kKeptMessageTailBytes: the reason at its end survives a long value before it. A path it echoes goes through
// shown_path (kMaxShownPathBytes), so that the message stays short and whole.
inline constexpr size_t kMaxCheckpointMessageBytes = 4096;
inline constexpr size_t kKeptMessageTailBytes = 1024;
inline constexpr size_t kMaxShownPathBytes = 1024;
inline std::string shown_path(const std::string& path) { return abbreviate(path, kMaxShownPathBytes); }
// A rank that fails only because another rank's load or save failed (every rank learns it from a collective) sets
// root_rank (distributed::FollowsRank): its worker's error file names that rank for the launcher's summary.
struct CheckpointError : RunError, distributed::FollowsRank {
  CheckpointError(const Rule& rule, const std::string& msg, bool foreign_checkpoint = false)
      : RunError(with_rule_id(rule.id, abbreviate_inside(msg, kMaxCheckpointMessageBytes, kKeptMessageTailBytes))),
        id(rule.id),
        foreign(foreign_checkpoint) {}
  std::string id;
  // The iteration directory holds no megatron-run metadata at all (no rank_NNNNN.json: a Megatron checkpoint,
  // mp_rank_00/*.pt, *.distcp): not one of ours, rather than one of ours damaged. A user's program may read it.
  bool foreign = false;
};

// The kinds of a checkpoint piece (Piece::kind). The writer (checkpoint_io.cpp) names its pieces with these, and
// parse_rank_meta refuses a piece of any kind not in kPieceKinds: a new kind of state is a constant here and an
// entry of that table (and its line in docs/checkpoints.md).
inline constexpr const char* kParamKind = "param";           // a parameter in the training dtype
inline constexpr const char* kFp32ParamKind = "fp32_param";  // its fp32 main copy (16-bit training)
inline constexpr const char* kExpAvgKind = "exp_avg";        // first moment (SGD's and Muon's momentum buffer)
inline constexpr const char* kExpAvgSqKind = "exp_avg_sq";   // second moment (Adaptive Muon's moment2 buffer)
// SOAP's preconditioner of one matrix (FlatBuffers::kronecker): a [shards, kronecker_floats] tensor per parameter,
// row s for tensor-parallel shard s (one row where the parameter is not split), written by the rank that keeps it.
inline constexpr const char* kSoapKroneckerKind = "soap_kronecker";
inline constexpr const char* kPieceKinds[] = {kParamKind, kFp32ParamKind, kExpAvgKind, kExpAvgSqKind,
                                              kSoapKroneckerKind};
inline bool is_piece_kind(std::string_view kind) {
  for (const char* k : kPieceKinds)
    if (kind == k) return true;
  return false;
}

// The rules of the checkpoint code (stage "run": `megatron-run rules checkpoint` lists them; docs/checkpoints.md's
// Errors section): defined in checkpoint_format.cpp, which megatron-run links, with checkpoint.integrity
// (checkpoint_integrity.h).
extern const Rule kCkptSaveUnwritable;
extern const Rule kCkptSaveFailed;
extern const Rule kCkptSaveBusy;
extern const Rule kCkptMissing;
extern const Rule kCkptStepMissing;
extern const Rule kCkptCorrupt;
extern const Rule kCkptModelMismatch;
extern const Rule kCkptOptimizerMismatch;
extern const Rule kCkptIncomplete;
extern const Rule kCkptSchedulerMismatch;
extern const Rule kCkptUnsupported;
extern const Rule kCkptArgsMismatch;
extern const Rule kCkptPretrainedMissing;
extern const Rule kCkptNoRngState;
extern const Rule kCkptOverrideIterationBatchSize;
extern const Rule kCkptOverrideScheduler;
extern const Rule kCkptNoLock;
extern const Rule kCkptLeftover;
extern const Rule kCkptAsyncSaveTorchFormat;
extern const Rule kCkptNonPersistentTypeMissing;
// The checkpoint rule with this id (one another rank sent), else checkpoint.corrupt.
const Rule& checkpoint_rule(std::string_view id);

// A save setting the run refuses before it trains, from the arguments alone: the launcher says it before any
// worker starts (and a dry run, where Megatron's own save would fail on it, as a warning), the Checkpointer on
// every rank checks it again.
struct SaveSettingsRefusal {
  const Rule* rule;
  std::string message;
  bool megatron_fails;  // Megatron's own save raises on it too (else only megatron-run's run does not model it)
  std::vector<std::string> flags;  // the flags it is about, for the diagnostic
};
// Only where Megatron's training would save so (never with --skip-train, nor with 0 iterations): --async-save with
// --ckpt-format torch and --save (Megatron's save_checkpoint raises NotImplementedError at its first save, and a
// run that trains saves at least once: validation turns --async-save off only for a distributed format),
// --non-persistent-save-interval N without --non-persistent-ckpt-type (Megatron raises at its first non-persistent
// save), or with type local (not modelled), where some iteration up to --train-iters is a multiple of N and not of
// --save-interval (a resume's start is not known: iterations from 1; with --train-samples, Megatron's
// update_train_iters, any N where that cannot be known); nullopt when none. --async-save with --ckpt-format torch
// is not refused for a resume at or past the last iteration that is a multiple of --save-interval (it trains none,
// and Megatron skips its final save there): the start is resumed_iteration's.
std::optional<SaveSettingsRefusal> save_settings_refusal(const Args& a);
// The iteration Megatron's training loop starts at, from the checkpoint --load names (the tracker, --ckpt-step, a
// newer global non-persistent one): 0 without one, with --finetune or from a release checkpoint,
// --override-ckpt-iteration's N where a checkpoint loads (under --freeze-all-layers, without it, the iteration of
// --save's tracker: run/frozen_layers.h); nullopt where a tracker cannot be read (the load refuses it).
std::optional<int64_t> resumed_iteration(const Args& a);
// The iterations Megatron's training runs up to: --train-iters when not 0, else from --train-samples
// (update_train_iters: whole global batches, or the steps of a batch-size schedule); nullopt when not known here.
std::optional<int64_t> trained_iterations(const Args& a);

// What a reader accepts: header bytes of a safetensors file, and a metadata file.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;  // the safetensors library's own limit
inline constexpr uint64_t kMaxMetadataBytes = 256ull << 20;
// The most values (objects, lists, strings, numbers) a safetensors header or a metadata file may hold: the limit of
// every JSON file read whole into a tree (limits::kMaxJsonValues). A rank's metadata takes about 30 a piece, a header
// about 7 a tensor, so it is far above any model's.
inline constexpr uint64_t kMaxCheckpointJsonValues = limits::kMaxJsonValues;
// The largest count a metadata or scheduler field may hold (iteration, consumed samples, optimizer steps, skipped
// iterations, the scheduler's step counts, the loss scaler's trackers, as a magnitude): the run adds to them, and a
// value near 2^63 would wrap. No real run comes near it.
inline constexpr int64_t kMaxCheckpointCount = int64_t{1} << 62;

// "F32", "BF16", "F16" (the dtypes a run trains in); bytes per element, 0 for any other word.
size_t safetensors_dtype_bytes(std::string_view dtype);

// One tensor to write: `bytes` at `data`, `shape` elements of `dtype`; or, where `data` is null, `bytes` that
// produce(offset, n, dst) writes into dst, n bytes from byte `offset` on, a bounded piece at a time (a state kept
// below fp32 is written as its fp32 values without a whole fp32 copy in memory).
struct TensorOut {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
  std::function<void(size_t offset, size_t n, char* dst)> produce;
};
// The most bytes write_safetensors asks `produce` for at once (a multiple of every element size).
inline constexpr size_t kProduceChunkBytes = 16u << 20;

// Writes a safetensors file at `path` (created or truncated), then fsyncs it. The header lists the tensors in the
// order given and a "__metadata__" of {"format": "pt"}; it is padded with spaces to a multiple of 8 bytes. Equal
// inputs give equal bytes. A failed write is a CheckpointError (checkpoint.save-failed) naming the file.
void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors);

struct TensorEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range relative to the data section
};
struct SafetensorsHeader {
  std::vector<TensorEntry> entries;
  std::map<std::string, size_t> index;  // name -> entries[i]
  uint64_t data_start = 0;              // file offset of the data section (8 + header length)
  const TensorEntry* find(const std::string& name) const;
};

// The header of a safetensors file whose first bytes are `head` (at least the 8-byte length and the JSON, or
// less: then it is truncated) and whose size is `file_size`; `path` names it in errors. Checks: the length fits
// the file and the limit, the JSON is an object, each entry has a known dtype (any safetensors dtype), a shape
// of non-negative ints whose byte size matches its data_offsets, offsets inside the data section, and (the
// safetensors package's rule) the tensors' byte ranges tiling the data section: no overlap, no gap, no byte after
// the last tensor. CheckpointError (checkpoint.corrupt) otherwise.
SafetensorsHeader parse_safetensors(std::string_view head, uint64_t file_size, const std::string& path);
// Reads and parses the header of the file at `path`.
SafetensorsHeader read_safetensors_header(const std::string& path);

// An open file to read byte ranges from (pread); a short read is a CheckpointError naming the file.
class InFile {
 public:
  explicit InFile(const std::string& path);
  ~InFile();
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  void read(uint64_t offset, void* dst, size_t n) const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a (small) file; CheckpointError naming it when it cannot be read or exceeds `limit`.
std::string read_small_file(const std::string& path, uint64_t limit);

// Where a stored piece sits: elements [flat_begin, flat_end) (row-major) of a local block `local_shape` at
// `global_offset` in the unsharded tensor `global_shape` (Megatron's ShardedTensor with a flattened range). Up to
// kMaxPieceDims dimensions (Mamba's conv1d weight has 3); only dimensions 0 and 1 are ever split.
inline constexpr size_t kMaxPieceDims = 8;
struct Piece {
  std::string tensor;  // the safetensors entry
  std::string key;     // the parameter's name (a routed expert's global name)
  std::string kind;    // one of kPieceKinds
  std::string dtype;
  std::vector<int64_t> global_shape, global_offset, local_shape;
  int64_t flat_begin = 0, flat_end = 0;
  Value to_json() const;
};

// The "layout" object of a rank's metadata: its groups' sizes, its rank in each, and the ranges of the flat
// buffers it holds (check_layout says what a load accepts). Defaults: one rank holding everything of nothing.
struct RankLayout {
  int64_t tp = 1, pp = 1, cp = 1, dp = 1, ep = 1, etp = 1, expert_dp = 1;
  int64_t tp_rank = 0, pp_rank = 0, dp_rank = 0, ep_rank = 0, etp_rank = 0, expert_dp_rank = 0;
  int64_t shard_lo = 0, shard_hi = 0, expert_shard_lo = 0, expert_shard_hi = 0;
  Value to_value() const;
};

// One rank's metadata file (rank_NNNNN.json).
struct RankMeta {
  int64_t version = 1;
  int64_t iteration = 0, consumed_samples = 0, skipped_iterations = 0, optimizer_steps = 0;
  int64_t skipped_train_samples = 0;  // Megatron's args.skipped_train_samples (--iterations-to-skip); optional
  int64_t world_size = 1, rank = 0;
  Value layout;      // RankLayout::to_value(): {"tp": .., "pp": .., "dp": .., "cp": .., "ep": .., "tp_rank": .., ...}
  std::string optimizer, params_dtype;
  bool distributed_optimizer = false;
  uint64_t seed = 0;
  Value scheduler;   // ParamScheduler state (Megatron's keys) or None
  Value grad_scaler; // {"scale", "growth_tracker", "hysteresis_tracker"} or None
  Value args;        // the run's arguments, dest -> value
  std::string tensors_file;
  std::vector<Piece> pieces;
};

std::string to_json(const RankMeta& m);
// Parses and checks a metadata file's text; CheckpointError (checkpoint.corrupt) naming `path` otherwise.
RankMeta parse_rank_meta(std::string_view text, const std::string& path);

// Megatron's names: DIR/latest_checkpointed_iteration.txt, DIR/iter_0000010 (or DIR/release).
std::string tracker_path(const std::string& dir);
std::string iteration_dir(const std::string& dir, int64_t iteration, bool release = false);
std::string rank_stem(int64_t rank);  // "rank_00003"

// Whether an iteration directory holds megatron-run metadata (a rank_NNNNN.json).
bool holds_rank_metadata(const std::string& dir);
// What shows an iteration directory to be a checkpoint Megatron saved: "torch_dist (.metadata, *.distcp)" (also
// fsdp_dtensor's layout), "torch (mp_rank_00/)"; "" when nothing does, or at the first rank_NNNNN.json (ours: no
// holds_rank_metadata scan needed before it). The first 10000 entries are looked at.
std::string megatron_checkpoint_kind(const std::string& dir);
// Such a directory refused (checkpoint.unsupported, foreign): "DIR holds a Megatron KIND checkpoint, not
// megatron-run's (no rank_00000.json)"; for megatron-run's own run (`flag`: the flag and value that named it, "--load
// DIR") also that the synthetic run loads only its own checkpoints and a Megatron program loads this one.
CheckpointError megatron_checkpoint_refusal(const std::string& dir, const std::string& kind,
                                            const std::string& flag = "");
// The tracker's text: an iteration (>= 0) or "release"; nullopt when it is neither.
struct TrackerValue {
  int64_t iteration = 0;
  bool release = false;
};
std::optional<TrackerValue> parse_tracker(std::string_view text);

}  // namespace mr::run
