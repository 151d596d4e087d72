// A rank's pieces of a checkpoint, written and read back under any layout (run/checkpoint_io.h).
#include "run/checkpoint_io.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "optim/state_codec.h"
#include "run/atomic_dir.h"

namespace mr::run {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// Whether a safetensors entry's shape is the one its piece was written with: the block's shape when the piece is
// the whole block, else (a flattened range, the distributed optimizer's shard) one dimension of its element count;
// a whole block written flat is read too. Anything else (a transposed shape of the same size) is a header that
// does not belong to the metadata: a Python reader would get a tensor of another shape.
bool header_shape_fits(const TensorEntry& e, const Piece& pc) {
  const int64_t n = pc.flat_end - pc.flat_begin;
  if (e.shape == std::vector<int64_t>{n}) return true;
  int64_t whole = 1;  // parse_rank_meta checked the block's size
  for (int64_t x : pc.local_shape) whole *= x;
  return pc.flat_begin == 0 && pc.flat_end == whole && e.shape == pc.local_shape;
}

// A block of a tensor seen as 2-D: rows x cols at (r0, c0) in a rows_total x cols_total tensor (1-D: one row;
// more than 2-D: the dimensions after the first fold into the columns, which holds because only dimensions 0 and 1
// are split, checkpoint_format.h).
struct Box {
  int64_t rows = 1, cols = 1, r0 = 0, c0 = 0;
  bool operator==(const Box&) const = default;
};
Box box_of(const std::vector<int64_t>& local, const std::vector<int64_t>& offset) {
  if (local.size() == 1) return {1, local[0], 0, offset[0]};
  int64_t inner = 1;  // the whole trailing dimensions (sizes already checked to fit in 2^62)
  for (size_t i = 2; i < local.size(); ++i) inner *= local[i];
  return {local[0], local[1] * inner, offset[0], offset[1] * inner};
}

// Parameter k's elements from `lo` on (in this rank's shard) in the state buffer of a checkpoint kind, as they are
// stored: `data` is null where the parameter keeps no such state (the second moment of Muon's and Lion's matrices);
// `fp32` whether that is the fp32 values themselves (else get/put convert).
struct StatePlace {
  using Scaled = FlatBuffers::Scaled;
  const FlatBuffers& b;
  Scaled which;        // the main params ("fp32_param") or a moment
  optim::DType dtype;  // a moment's
  size_t k;
  int64_t lo;
  void* data;
  bool fp32;

  StatePlace(const FlatBuffers& buf, const std::string& kind, size_t param, int64_t first) : b(buf), k(param), lo(first) {
    FlatBuffers& m = const_cast<FlatBuffers&>(b);  // places in the buffers; the writer only reads them
    if (kind == kFp32ParamKind) {
      which = Scaled::Main;
      dtype = optim::DType::F32;
      data = b.main_at(m.main.data(), lo);
      fp32 = b.main_storage == MainStorage::F32;
      return;
    }
    which = kind == kExpAvgKind ? Scaled::ExpAvg : Scaled::ExpAvgSq;
    dtype = which == Scaled::ExpAvg ? b.exp_avg_dtype : b.exp_avg_sq_dtype;
    data = which == Scaled::ExpAvg ? b.exp_avg_at(m.exp_avg.data(), lo) : b.sq_at(m.exp_avg_sq.data(), k, lo);
    fp32 = dtype == optim::DType::F32;
  }
  float* scale() const { return b.scale_at(const_cast<float*>(b.state_scale.data()), which, k); }
  void* model() const {  // the bf16 params beside remainders
    return const_cast<uint8_t*>(b.model.data()) + static_cast<size_t>(lo) * dtype_bytes(b.model_dtype);
  }
  // The fp32 values of the n stored elements from `first` on (after `lo`) into out; n fp32 values stored from `lo`
  // (an fp16 or fp8 state takes its scale anew).
  void get(int64_t first, int64_t n, float* out) const {
    if (which == Scaled::Main)
      return b.decode_main(static_cast<uint8_t*>(data) + first * b.main_bytes(), n, scale(),
                           static_cast<uint8_t*>(model()) + static_cast<size_t>(first) * dtype_bytes(b.model_dtype), out);
    optim::decode_state(static_cast<uint8_t*>(data) + first * optim::dtype_size(dtype), n, dtype, scale(), out);
  }
  void put(int64_t n, const float* x) const {
    if (which == Scaled::Main) return b.encode_main(x, n, data, scale(), model());
    optim::encode_state(x, n, dtype, data, scale());
  }
};

}  // namespace

std::string safetensors_dtype(optim::DType d) {
  switch (d) {
    case optim::DType::F32: return "F32";
    case optim::DType::BF16: return "BF16";
    case optim::DType::F16: return "F16";
    case optim::DType::E4M3: break;  // states are saved as fp32 values (StatePlace); no model is fp8
  }
  return "F32";
}

std::vector<std::string> buffer_kinds(const FlatBuffers& b, bool with_optimizer) {
  std::vector<std::string> k = {kParamKind};
  if (!with_optimizer) return k;
  if (b.has_main) k.push_back(kFp32ParamKind);
  k.push_back(kExpAvgKind);  // allocated for every optimizer the run steps
  if (b.has_exp_avg_sq) k.push_back(kExpAvgSqKind);
  return k;
}

namespace {
// Where the whole shard of `p` on TP rank `tp_rank` starts in the unsharded tensor, per dimension (one block).
std::vector<int64_t> global_offset(const ParamSpec& p, int64_t tp_rank) {
  std::vector<int64_t> off(p.shape.size(), 0);
  if (p.split_dim >= 0) off[static_cast<size_t>(p.split_dim)] = tp_rank * p.shape[static_cast<size_t>(p.split_dim)];
  return off;
}
}  // namespace

std::vector<ShardBlock> blocks_of(const ParamSpec& p, int64_t tp_rank) {
  const ShardIndex s = shard_index(p, tp_rank);
  if (s.nparts == 0) return {{p.shape, global_offset(p, tp_rank), 0, p.numel()}};
  std::vector<ShardBlock> out;
  int64_t local_row = 0, whole_row = 0;
  for (int k = 0; k < s.nparts; ++k) {
    ShardBlock b;
    b.shape = p.shape;
    b.shape[0] = s.part_rows[k];
    b.offset.assign(p.shape.size(), 0);
    b.offset[0] = whole_row + tp_rank * s.part_rows[k];  // this rank's slice of part k
    b.flat_lo = local_row * s.shape1;
    b.flat_hi = (local_row + s.part_rows[k]) * s.shape1;
    out.push_back(std::move(b));
    local_row += s.part_rows[k];
    whole_row += s.part_rows[k] * s.tp_size;
  }
  return out;
}

namespace {
// Which row of a parameter's SOAP preconditioner tensor this rank keeps: its TP shard's, or the only one where the
// parameter is not split over TP (written by the first TP rank: the others hold the same values).
struct KroneckerRow {
  int64_t shards = 1, shard = 0;
  bool writes = true;
};
KroneckerRow kronecker_row(const ParamSpec& p, const RankPlace& at) {
  if (p.split_dim < 0) return {1, 0, p.expert ? at.etp_first : at.tp_first};
  return p.expert ? KroneckerRow{at.etp_size, at.etp_rank, true} : KroneckerRow{at.tp_size, at.tp_rank, true};
}
}  // namespace

RankSave collect_pieces(const ModelPlan& plan, const FlatBuffers& b, const RankPlace& at, bool with_optimizer) {
  RankSave out;
  const size_t w = dtype_bytes(b.model_dtype);
  // Elements [fb, fe) of the rank's shard of p at `data` (or, where data is null, fp32 values that values(first, n,
  // out) gives from element fb + first on, at write time): a piece per block they touch (one, or one per TP-split
  // part, whose entries get the part's index after the name).
  using Values = std::function<void(int64_t first, int64_t n, float* out)>;
  auto add = [&](const ParamSpec& p, int64_t tp_rank, const std::string& kind, int64_t fb, int64_t fe,
                 const void* data, size_t elem, const std::string& dtype, const Values& values = nullptr) {
    const std::vector<ShardBlock> blocks = blocks_of(p, tp_rank);
    for (size_t k = 0; k < blocks.size(); ++k) {
      const ShardBlock& blk = blocks[k];
      const int64_t lo = std::max(fb, blk.flat_lo), hi = std::min(fe, blk.flat_hi);
      if (lo >= hi) continue;
      Piece pc;
      pc.key = p.key;
      pc.kind = kind;
      pc.tensor = (kind == kParamKind ? p.key : "optimizer.state." + kind + "." + p.key) +
                  (blocks.size() > 1 ? ".part" + std::to_string(k) : std::string());
      pc.dtype = dtype;
      pc.global_shape = p.full_shape;
      pc.global_offset = blk.offset;
      pc.local_shape = blk.shape;
      pc.flat_begin = lo - blk.flat_lo;
      pc.flat_end = hi - blk.flat_lo;
      TensorOut t;
      t.name = pc.tensor;
      t.dtype = dtype;
      t.shape = (lo == blk.flat_lo && hi == blk.flat_hi) ? blk.shape : std::vector<int64_t>{hi - lo};
      if (data) {
        t.data = static_cast<const char*>(data) + static_cast<size_t>(lo - fb) * elem;
      } else {
        t.produce = [values, start = lo - fb](size_t off, size_t n, char* dst) {
          values(start + static_cast<int64_t>(off / 4), static_cast<int64_t>(n / 4), reinterpret_cast<float*>(dst));
        };
      }
      t.bytes = static_cast<size_t>(hi - lo) * elem;
      out.bytes += t.bytes;
      out.pieces.push_back(std::move(pc));
      out.tensors.push_back(std::move(t));
    }
  };
  auto writes = [&](const ParamSpec& p) {
    if (p.shared_copy) return false;  // the embedding's copy on the last stage
    if (p.expert) return at.expert_model_writer && (!p.tp_duplicate || at.etp_first);
    return at.model_writer && (!p.tp_duplicate || at.tp_first);
  };
  const std::vector<std::string> kinds = buffer_kinds(b, with_optimizer);
  // Model params first (whole), then each state kind (this rank's shard).
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    if (!writes(p)) continue;
    add(p, p.expert ? at.etp_rank : at.tp_rank, kParamKind, 0, p.numel(),
        b.model.data() + static_cast<size_t>(b.offset[k]) * w, w, safetensors_dtype(b.model_dtype));
  }
  for (size_t i = 1; i < kinds.size(); ++i) {
    b.for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
      const ParamSpec& p = plan.params[k];
      // With the distributed optimizer every data-parallel rank writes its own shard.
      const bool writer = p.shared_copy ? false
                          : b.sharded   ? (!p.tp_duplicate || at.tp_first)
                                        : writes(p);
      const StatePlace place(b, kinds[i], k, lo);
      if (!writer || !place.data) return;
      const int64_t tp = p.expert ? at.etp_rank : at.tp_rank;
      if (place.fp32) return add(p, tp, kinds[i], lo - b.offset[k], hi - b.offset[k], place.data, 4, "F32");
      // Kept below fp32: its fp32 values, converted as the file is written.
      add(p, tp, kinds[i], lo - b.offset[k], hi - b.offset[k], nullptr, 4, "F32",
          [place](int64_t first, int64_t n, float* dst) { place.get(first, n, dst); });
    });
  }
  if (!with_optimizer) return out;
  for (size_t k = 0; k < plan.params.size(); ++k) {  // SOAP's preconditioners, by the ranks that step them
    const ParamSpec& p = plan.params[k];
    if (b.kronecker_at[k] < 0) continue;
    const KroneckerRow row = kronecker_row(p, at);
    if (!row.writes || !(b.sharded || writes(p))) continue;
    const int64_t n = optim::kronecker_floats(p.shape[0], p.shape[1]);
    Piece pc;
    pc.key = p.key;
    pc.kind = kSoapKroneckerKind;
    pc.tensor = std::string("optimizer.state.") + kSoapKroneckerKind + "." + p.key;
    pc.dtype = "F32";
    pc.global_shape = {row.shards, n};
    pc.global_offset = {row.shard, 0};
    pc.local_shape = {1, n};
    pc.flat_begin = 0;
    pc.flat_end = n;
    TensorOut t;
    t.name = pc.tensor;
    t.dtype = "F32";
    t.shape = {1, n};
    t.data = b.kronecker.data() + b.kronecker_at[k];
    t.bytes = static_cast<size_t>(n) * 4;
    out.bytes += t.bytes;
    out.pieces.push_back(std::move(pc));
    out.tensors.push_back(std::move(t));
  }
  return out;
}

void write_rank_files(const std::string& dir, RankMeta meta, const RankSave& save) {
  const std::string stem = rank_stem(meta.rank);
  meta.tensors_file = stem + ".safetensors";
  meta.pieces = save.pieces;
  write_safetensors(dir + "/" + meta.tensors_file, save.tensors);
  write_file_atomic(dir + "/" + stem + ".json", to_json(meta));
}

namespace {
// A group size in a metadata file's layout (parse_rank_meta checked that it is there, an integer 1 to world_size).
int64_t layout_size(const RankMeta& m, std::string_view key) {
  for (const auto& [k, v] : m.layout.as_object())
    if (k == key) return v.as_int();
  return 0;
}
}  // namespace

CheckpointReader::CheckpointReader(std::string dir, std::optional<int64_t> iteration) : dir_(std::move(dir)) {
  const std::string first = dir_ + "/" + rank_stem(0) + ".json";
  metas_.push_back(parse_rank_meta(read_small_file(first, kMaxMetadataBytes), first));
  if (iteration && metas_[0].iteration != *iteration)  // the other ranks are compared with rank 0 below
    throw CheckpointError(kCkptCorrupt, first + ": its iteration " + std::to_string(metas_[0].iteration) +
                                            " disagrees with its directory's (" + dir_ + ", iteration " +
                                            std::to_string(*iteration) + ")");
  const int64_t world = metas_[0].world_size;
  if (world > 1000000) throw CheckpointError(kCkptCorrupt, first + ": world_size " + std::to_string(world) + " is past the limit");
  for (int64_t r = 1; r < world; ++r) {
    const std::string path = dir_ + "/" + rank_stem(r) + ".json";
    metas_.push_back(parse_rank_meta(read_small_file(path, kMaxMetadataBytes), path));
    const RankMeta& m = metas_.back();
    if (m.rank != r || m.world_size != world || m.iteration != metas_[0].iteration)
      throw CheckpointError(kCkptCorrupt, path + ": its rank, world size or iteration disagrees with " + first);
    for (const char* key : {"tp", "pp", "cp", "dp", "ep", "etp", "expert_dp"}) {
      const int64_t here = layout_size(m, key), there = layout_size(metas_[0], key);
      if (here != there)
        throw CheckpointError(kCkptCorrupt, path + ": its layout's \"" + key + "\" (" + std::to_string(here) +
                                                ") disagrees with " + first + " (" + std::to_string(there) + ")");
    }
  }
  files_.resize(metas_.size());
  for (size_t f = 0; f < metas_.size(); ++f)
    for (size_t i = 0; i < metas_[f].pieces.size(); ++i) {
      const Piece& p = metas_[f].pieces[i];
      index_[{p.key, p.kind}].push_back({f, i});
    }
}

CheckpointReader::File& CheckpointReader::file(size_t i) {
  File& f = files_[i];
  if (!f.in) {
    const std::string path = dir_ + "/" + metas_[i].tensors_file;
    f.header = std::make_unique<SafetensorsHeader>(read_safetensors_header(path));
    f.in = std::make_unique<InFile>(path);
  }
  return f;
}

std::vector<std::string> CheckpointReader::param_keys() const {
  std::vector<std::string> out;
  for (const auto& [k, refs] : index_)
    if (k.second == kParamKind) out.push_back(k.first);
  return out;
}

std::vector<int64_t> CheckpointReader::global_shape(const std::string& key) const {
  auto it = index_.find({key, kParamKind});
  if (it == index_.end()) return {};
  const Ref& r = it->second.front();
  return metas_[r.file].pieces[r.piece].global_shape;
}

void CheckpointReader::fill(const ParamSpec& p, int64_t tp_rank, const std::string& kind, const std::string& dtype,
                            int64_t lb, int64_t le, void* dst) {
  if (lb >= le) return;
  auto it = index_.find({p.key, kind});
  const std::string what = kind == kParamKind ? "parameter " + p.key : "the " + kind + " state of " + p.key;
  if (it == index_.end())
    throw CheckpointError(kind == kParamKind ? kCkptModelMismatch : kCkptIncomplete,
                          dir_ + ": the checkpoint has no " + what + " (is it a checkpoint of another model?)");
  const size_t w = safetensors_dtype_bytes(dtype);
  // Each block of this rank's shard (one, or one per TP-split part) from the pieces that overlap it.
  for (const ShardBlock& blk : blocks_of(p, tp_rank))
    if (std::max(lb, blk.flat_lo) < std::min(le, blk.flat_hi))
      fill_block(it->second, p, what, dtype, blk, std::max(lb, blk.flat_lo) - blk.flat_lo,
                 std::min(le, blk.flat_hi) - blk.flat_lo,
                 static_cast<char*>(dst) + static_cast<size_t>(std::max(lb, blk.flat_lo) - lb) * w);
}

void CheckpointReader::fill_block(const std::vector<Ref>& refs, const ParamSpec& p, const std::string& what,
                                  const std::string& dtype, const ShardBlock& block, int64_t lb, int64_t le,
                                  char* out) {
  const size_t w = safetensors_dtype_bytes(dtype);
  const Box d = box_of(block.shape, block.offset);
  std::vector<bool> covered;
  int64_t count = 0;
  std::string whole_from;  // the file the whole range was read from in place ("" none)
  for (const Ref& r : refs) {
    const Piece& pc = metas_[r.file].pieces[r.piece];
    const std::string src = dir_ + "/" + metas_[r.file].tensors_file;
    if (pc.global_shape != p.full_shape)
      throw CheckpointError(kCkptModelMismatch, dir_ + ": the checkpoint is of another model: parameter " + p.key +
                                                    " has shape " + shape_text(pc.global_shape) + " there and " +
                                                    shape_text(p.full_shape) + " here");
    if (pc.dtype != dtype)
      throw CheckpointError(kCkptModelMismatch, dir_ + ": " + what + " is stored as " + pc.dtype + ", this run keeps it as " +
                                                    dtype + " (--bf16, --fp16): the optimizer state does not convert; "
                                                    "--finetune or --no-load-optim loads the weights, converted");
    File& f = file(r.file);
    const TensorEntry* e = f.header->find(pc.tensor);
    if (!e || e->dtype != pc.dtype ||
        e->end - e->begin != static_cast<uint64_t>(pc.flat_end - pc.flat_begin) * w)
      throw CheckpointError(kCkptCorrupt, src + ": tensor \"" + pc.tensor + "\" is missing or does not match " +
                                              rank_stem(metas_[r.file].rank) + ".json");
    if (!header_shape_fits(*e, pc))
      throw CheckpointError(kCkptCorrupt, src + ": tensor \"" + pc.tensor + "\" has shape " + shape_text(e->shape) +
                                              " in the header, but " + rank_stem(metas_[r.file].rank) +
                                              ".json stores elements " + std::to_string(pc.flat_begin) + " to " +
                                              std::to_string(pc.flat_end) + " of a " + shape_text(pc.local_shape) +
                                              " block there");
    const uint64_t base = f.header->data_start + e->begin;
    const Box s = box_of(pc.local_shape, pc.global_offset);
    if (s == d && pc.flat_begin <= lb && le <= pc.flat_end && count == 0) {  // the same block: read it in place
      f.in->read(base + static_cast<uint64_t>(lb - pc.flat_begin) * w, out, static_cast<size_t>(le - lb) * w);
      count = le - lb;
      whole_from = src;
      continue;  // the other pieces must not cover any of it again
    }
    // The global rows both blocks share (of the destination's range), and the shared columns.
    const int64_t dr_lo = d.r0 + lb / d.cols, dr_hi = d.r0 + (le - 1) / d.cols;  // inclusive
    const int64_t g_lo = std::max(dr_lo, s.r0), g_hi = std::min(dr_hi, s.r0 + s.rows - 1);
    const int64_t gc_lo = std::max(d.c0, s.c0), gc_hi = std::min(d.c0 + d.cols, s.c0 + s.cols);
    if (g_lo > g_hi || gc_lo >= gc_hi) continue;
    const int64_t rb = std::max(pc.flat_begin, (g_lo - s.r0) * s.cols);
    const int64_t re = std::min(pc.flat_end, (g_hi - s.r0 + 1) * s.cols);
    if (rb >= re) continue;
    if (!whole_from.empty()) {  // the range is read already: any element this piece has of it is a second copy
      for (int64_t g = g_lo; g <= g_hi; ++g) {
        const int64_t sbase = (g - s.r0) * s.cols - s.c0, dbase = (g - d.r0) * d.cols - d.c0;
        if (std::max({gc_lo, rb - sbase, lb - dbase}) < std::min({gc_hi, re - sbase, le - dbase}))
          throw CheckpointError(kCkptCorrupt, dir_ + ": " + what + " is stored twice (in " + whole_from + " and " +
                                                  src + ")");
      }
      continue;
    }
    std::vector<char> tmp(static_cast<size_t>(re - rb) * w);
    f.in->read(base + static_cast<uint64_t>(rb - pc.flat_begin) * w, tmp.data(), tmp.size());
    if (covered.empty()) covered.assign(static_cast<size_t>(le - lb), false);
    for (int64_t g = g_lo; g <= g_hi; ++g) {
      const int64_t sbase = (g - s.r0) * s.cols - s.c0, dbase = (g - d.r0) * d.cols - d.c0;
      const int64_t a = std::max({gc_lo, rb - sbase, lb - dbase});
      const int64_t z = std::min({gc_hi, re - sbase, le - dbase});
      if (a >= z) continue;
      const int64_t di = dbase + a - lb;
      for (int64_t i = 0; i < z - a; ++i) {
        if (covered[static_cast<size_t>(di + i)])
          throw CheckpointError(kCkptCorrupt, dir_ + ": " + what + " is stored twice (pieces overlap; " + src + ")");
        covered[static_cast<size_t>(di + i)] = true;
      }
      std::memcpy(out + static_cast<size_t>(di) * w, tmp.data() + static_cast<size_t>(sbase + a - rb) * w,
                  static_cast<size_t>(z - a) * w);
      count += z - a;
    }
  }
  if (count != le - lb)
    throw CheckpointError(kCkptIncomplete, dir_ + ": the pieces of " + what + " cover " + std::to_string(count) + " of the " +
                                               std::to_string(le - lb) + " elements this rank needs");
}

std::string CheckpointReader::stored_dtype(const std::string& key, const std::string& kind) const {
  auto it = index_.find({key, kind});
  if (it == index_.end()) return "";
  const Ref& r = it->second.front();
  return metas_[r.file].pieces[r.piece].dtype;
}

namespace {
// A float tensor's safetensors dtype as the buffers' DType (F32 for anything else: float_dtype says which are).
optim::DType float_dtype_of(const std::string& d) {
  return d == "BF16" ? optim::DType::BF16 : d == "F16" ? optim::DType::F16 : optim::DType::F32;
}
bool float_dtype(const std::string& d) { return d == "F32" || d == "BF16" || d == "F16"; }
}  // namespace

void CheckpointReader::load_buffers(const ModelPlan& plan, FlatBuffers& b, const RankPlace& at, bool with_optimizer) {
  const size_t w = dtype_bytes(b.model_dtype);
  const std::string mdt = safetensors_dtype(b.model_dtype);
  std::vector<char> stored;  // a parameter kept in another dtype in the checkpoint, as stored
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    char* dst = reinterpret_cast<char*>(b.model.data()) + static_cast<size_t>(b.offset[k]) * w;
    const std::string sdt = stored_dtype(p.key, kParamKind);
    if (!with_optimizer && sdt != mdt && float_dtype(sdt) && float_dtype(mdt)) {
      const size_t sw = safetensors_dtype_bytes(sdt);
      stored.resize(static_cast<size_t>(p.numel()) * sw);
      fill(p, p.expert ? at.etp_rank : at.tp_rank, kParamKind, sdt, 0, p.numel(), stored.data());
      const optim::DType from = float_dtype_of(sdt);  // to the model's dtype, rounded as torch's copy_ rounds
      for (int64_t i = 0; i < p.numel(); ++i)
        optim::store_element(dst, b.model_dtype, i, optim::load_element(stored.data(), from, i));
      continue;
    }
    fill(p, p.expert ? at.etp_rank : at.tp_rank, kParamKind, mdt, 0, p.numel(), dst);
  }
  const std::vector<std::string> kinds = buffer_kinds(b, with_optimizer);
  std::vector<float> values;  // a state kept below fp32: its fp32 values, then the state they came from
  for (size_t i = 1; i < kinds.size(); ++i) {
    b.for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
      const ParamSpec& p = plan.params[k];
      const StatePlace place(b, kinds[i], k, lo);  // after the model params: remainders set the bf16 params
      if (!place.data) return;
      const int64_t tp = p.expert ? at.etp_rank : at.tp_rank;
      if (place.fp32) return fill(p, tp, kinds[i], "F32", lo - b.offset[k], hi - b.offset[k], place.data);
      values.resize(static_cast<size_t>(hi - lo));
      fill(p, tp, kinds[i], "F32", lo - b.offset[k], hi - b.offset[k], values.data());
      place.put(hi - lo, values.data());
    });
  }
  if (!with_optimizer) return;
  for (size_t k = 0; k < plan.params.size(); ++k) {
    if (b.kronecker_at[k] < 0) continue;
    const KroneckerRow row = kronecker_row(plan.params[k], at);
    read_kronecker(plan.params[k], row.shards, row.shard, b.kronecker.data() + b.kronecker_at[k]);
  }
}

void CheckpointReader::load_main_from_stored_params(const ModelPlan& plan, FlatBuffers& b, const RankPlace& at) {
  if (!b.has_main || b.main_storage != MainStorage::F32) return;
  std::vector<char> stored;
  b.for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
    const ParamSpec& p = plan.params[k];
    const int64_t tp = p.expert ? at.etp_rank : at.tp_rank;
    float* out = static_cast<float*>(b.main_at(b.main.data(), lo));
    const std::string sdt = stored_dtype(p.key, kParamKind);
    if (sdt == "F32" || !float_dtype(sdt)) return fill(p, tp, kParamKind, "F32", lo - b.offset[k], hi - b.offset[k], out);
    stored.resize(static_cast<size_t>(hi - lo) * safetensors_dtype_bytes(sdt));
    fill(p, tp, kParamKind, sdt, lo - b.offset[k], hi - b.offset[k], stored.data());
    const optim::DType from = float_dtype_of(sdt);
    for (int64_t i = 0; i < hi - lo; ++i) out[i] = optim::load_element(stored.data(), from, i);
  });
}

void CheckpointReader::read_kronecker(const ParamSpec& p, int64_t shards, int64_t shard, float* dst) {
  const int64_t n = optim::kronecker_floats(p.shape[0], p.shape[1]);
  const std::string what = "SOAP's preconditioner of " + p.key;
  auto it = index_.find({p.key, kSoapKroneckerKind});
  if (it == index_.end())
    throw CheckpointError(kCkptOptimizerMismatch, dir_ + ": the checkpoint holds no " + what +
                                                      " (--no-load-optim or --finetune loads the weights only)");
  const Ref* found = nullptr;  // the one piece that holds row `shard`
  for (const Ref& r : it->second) {
    const Piece& pc = metas_[r.file].pieces[r.piece];
    const std::string src = dir_ + "/" + metas_[r.file].tensors_file;
    if (pc.global_shape != std::vector<int64_t>{shards, n})
      throw CheckpointError(kCkptModelMismatch,
                            dir_ + ": " + what + " was saved as " + shape_text(pc.global_shape) + " (tensor-parallel shards x " +
                                "floats), this run keeps " + shape_text({shards, n}) + ": SOAP preconditions each tensor-parallel "
                                "shard on its own, so its state does not reshard (resume with the layout it was saved with, "
                                "or --no-load-optim)");
    // Each piece is one whole row: [1, n] at {row, 0}.
    if (pc.global_offset.size() != 2 || pc.global_offset[1] != 0 || pc.local_shape != std::vector<int64_t>{1, n} ||
        pc.global_offset[0] < 0 || pc.global_offset[0] >= shards)
      throw CheckpointError(kCkptCorrupt, src + ": " + what + " is kept as whole rows of " + std::to_string(n) +
                                              " floats; \"" + pc.tensor + "\" in " + rank_stem(metas_[r.file].rank) +
                                              ".json is placed at " + shape_text(pc.global_offset) + " with shape " +
                                              shape_text(pc.local_shape));
    if (pc.global_offset[0] != shard) continue;
    if (found)
      throw CheckpointError(kCkptCorrupt, dir_ + ": row " + std::to_string(shard) + " of " + what + " is saved twice (" +
                                              rank_stem(metas_[found->file].rank) + ".json and " +
                                              rank_stem(metas_[r.file].rank) + ".json)");
    found = &r;
  }
  if (!found)
    throw CheckpointError(kCkptIncomplete, dir_ + ": the checkpoint holds no row " + std::to_string(shard) + " of " + what);
  const Piece& pc = metas_[found->file].pieces[found->piece];
  File& f = file(found->file);
  const TensorEntry* e = f.header->find(pc.tensor);
  if (pc.dtype != "F32" || !e || e->dtype != "F32" || pc.flat_begin != 0 || pc.flat_end != n ||
      e->end - e->begin != static_cast<uint64_t>(n) * 4 || !header_shape_fits(*e, pc))
    throw CheckpointError(kCkptCorrupt, dir_ + "/" + metas_[found->file].tensors_file + ": tensor \"" + pc.tensor +
                                            "\" is missing or does not match " + rank_stem(metas_[found->file].rank) +
                                            ".json");
  f.in->read(f.header->data_start + e->begin, reinterpret_cast<char*>(dst), static_cast<size_t>(n) * 4);
}

}  // namespace mr::run
