// What one rank writes into a checkpoint and how any rank, under any layout, reads its part back
// (docs/checkpoints.md). No process groups here: run/checkpoint.h drives these from the training run, the
// benchmarks call them directly. Internal to lib/run.
//
// Each rank stores the pieces it alone holds, each with its place in the unsharded tensor: model params (the
// training dtype) from the first data-parallel rank; fp32 main params and optimizer state (exp_avg, exp_avg_sq)
// from the first data-parallel rank, or every rank's shard [lo, hi) with the distributed optimizer; a TP
// duplicate from TP rank 0 only, the tied output copy of the last pipeline stage never (it is the embedding).
// The reader assembles whatever local block a rank needs from the pieces of all files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "run/buffers.h"
#include "run/checkpoint_format.h"
#include "run/model.h"

namespace mr::run {

// The blocks of `p`'s shard on TP rank `tp_rank` in the unsharded tensor: one, or one per part where TP splits the
// rows part by part (ParamSpec::split_parts); each the shard's row-major elements [flat_lo, flat_hi).
struct ShardBlock {
  std::vector<int64_t> shape, offset;
  int64_t flat_lo = 0, flat_hi = 0;
};
std::vector<ShardBlock> blocks_of(const ParamSpec& p, int64_t tp_rank);

struct RankPlace {
  int64_t tp_rank = 0, etp_rank = 0;  // the TP rank, and the expert-TP rank (routed experts)
  int64_t tp_size = 1, etp_size = 1;
  bool model_writer = true;           // the first data-parallel rank (expert-dp for routed experts: same here)
  bool expert_model_writer = true;
  bool tp_first = true, etp_first = true;
};

// The kinds of state a run's buffers hold: "param" always; "fp32_param" with 16-bit training; "exp_avg" and
// "exp_avg_sq" as allocated (for sgd and muon's matrices exp_avg is the momentum buffer).
std::vector<std::string> buffer_kinds(const FlatBuffers& b, bool with_optimizer);
std::string safetensors_dtype(optim::DType d);  // "F32", "BF16", "F16"

struct RankSave {
  std::vector<Piece> pieces;
  // The same order; pointing into the buffers. The states kept below fp32 (the precision-aware optimizer's moments,
  // fp16 or remainder main params) are written as their fp32 values, converted from the buffers as the file is
  // written (TensorOut::produce), so a save holds no fp32 copy of them.
  std::vector<TensorOut> tensors;
  uint64_t bytes = 0;
};
RankSave collect_pieces(const ModelPlan& plan, const FlatBuffers& b, const RankPlace& at, bool with_optimizer);
// Writes dir/rank_NNNNN.safetensors and dir/rank_NNNNN.json (each fsynced); `meta` gets the pieces.
void write_rank_files(const std::string& dir, RankMeta meta, const RankSave& save);

// A checkpoint directory opened for reading: every rank's metadata (small), the tensor files opened on demand.
// `iteration`: the one the directory's name gives (iter_N), which every rank's metadata must hold (checkpoint.corrupt
// naming rank_00000.json otherwise); none for a release checkpoint or a directory read on its own.
class CheckpointReader {
 public:
  explicit CheckpointReader(std::string dir, std::optional<int64_t> iteration = std::nullopt);
  const std::string& dir() const { return dir_; }
  const RankMeta& meta() const { return metas_.front(); }
  const std::vector<RankMeta>& metas() const { return metas_; }
  bool has(const std::string& key, const std::string& kind) const { return index_.count({key, kind}) > 0; }
  // Distinct parameter keys with a "param" piece, sorted.
  std::vector<std::string> param_keys() const;
  // The global shape the checkpoint gives `key` (empty when absent).
  std::vector<int64_t> global_shape(const std::string& key) const;

  // Fills elements [local_begin, local_end) (row-major) of the local block of `p` on TP rank `tp_rank` with the
  // checkpoint's `kind` of `p.key`, in `dtype`, at `dst`. CheckpointError: checkpoint.model-mismatch (no such
  // parameter, another shape or dtype; names it), checkpoint.incomplete (the pieces do not cover the block),
  // checkpoint.corrupt (a file).
  void fill(const ParamSpec& p, int64_t tp_rank, const std::string& kind, const std::string& dtype,
            int64_t local_begin, int64_t local_end, void* dst);
  // SOAP's preconditioner of `p` (FlatBuffers::kronecker) into `dst`: kronecker_floats of its local shape, the
  // `shard`-th of `shards` tensor-parallel shards. CheckpointError: checkpoint.optimizer-mismatch (none saved),
  // checkpoint.model-mismatch (saved for another TP size or shape: it does not reshard), checkpoint.corrupt.
  void read_kronecker(const ParamSpec& p, int64_t shards, int64_t shard, float* dst);
  // Reads the buffers of this rank: params whole, the state kinds in [lo, hi), SOAP's preconditioners. Without the
  // optimizer (--finetune, --no-load-optim) the params may be stored in another of fp32, bf16 and fp16 than the
  // run keeps: they are converted as torch's copy_ does (round to nearest even), as Megatron loads a checkpoint
  // of another precision.
  void load_buffers(const ModelPlan& plan, FlatBuffers& b, const RankPlace& at, bool with_optimizer);
  // --load-main-params-from-ckpt (Megatron's reload_model_params(state_dict)): this rank's main params (fp32,
  // [lo, hi) of each parameter) from the checkpoint's stored params, at the precision they were stored in (an fp32
  // checkpoint's exact values, not the values rounded to this run's bf16/fp16 model params). Only for fp32 main params.
  void load_main_from_stored_params(const ModelPlan& plan, FlatBuffers& b, const RankPlace& at);
  // The dtype the checkpoint stores `kind` of `key` in ("F32", "BF16", "F16"; "" when it has none).
  std::string stored_dtype(const std::string& key, const std::string& kind) const;

 private:
  struct Ref {
    size_t file = 0, piece = 0;
  };
  struct File {
    std::unique_ptr<InFile> in;
    std::unique_ptr<SafetensorsHeader> header;
  };
  File& file(size_t i);
  // fill() for one block: elements [lb, le) of the block `block`, from the pieces `refs`.
  void fill_block(const std::vector<Ref>& refs, const ParamSpec& p, const std::string& what, const std::string& dtype,
                  const ShardBlock& block, int64_t lb, int64_t le, char* out);
  std::string dir_;
  std::vector<RankMeta> metas_;
  std::vector<File> files_;
  std::map<std::pair<std::string, std::string>, std::vector<Ref>> index_;
};


}  // namespace mr::run
