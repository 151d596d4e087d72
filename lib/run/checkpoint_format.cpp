// The checkpoint's on-disk format (run/checkpoint_format.h).
#include "run/checkpoint_format.h"
#include "run/checkpoint_integrity.h"
#include "run/checkpoint_args.h"
#include "run/batch_schedule.h"
#include "run/frozen_layers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace mr::run {

// The checkpoint code's rules (checkpoint_format.h, checkpoint_integrity.h): here, in the torch-free library that
// megatron-run links, so that `megatron-run rules` lists them; raised by the workers (checkpoint.cpp, checkpoint_save.cpp, checkpoint_load.cpp,
// checkpoint_locate.cpp, checkpoint_resume_args.cpp, checkpoint_io.cpp, checkpoint_integrity.cpp) and, for --use-checkpoint-args, by the launcher.
const Rule kCkptSaveUnwritable{"checkpoint.save-unwritable", Rule::Level::Error,
                       "--save DIR, or the non-persistent directory (--non-persistent-global-ckpt-dir), cannot be created or written (checked before training).",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptSaveFailed{"checkpoint.save-failed", Rule::Level::Error,
                       "A write, fsync or rename failed during a save (that save changed neither the previous checkpoint nor the tracker), or the new checkpoint is in place and a later step (an fsync, the tracker write) failed.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptSaveBusy{"checkpoint.save-busy", Rule::Level::Error,
                       "Another run holds --save DIR, or the non-persistent directory, as its --save or its non-persistent directory (its rank 0's lock on DIR/.megatron-run.lock; checked before training).",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptMissing{"checkpoint.missing", Rule::Level::Error,
                       "--exit-on-missing-checkpoint and no tracker under --load (with --use-checkpoint-args: under --pretrained-checkpoint or --load, before any worker starts).",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptStepMissing{"checkpoint.step-missing", Rule::Level::Error,
                       "--ckpt-step N, or the tracker, names an iteration whose directory does not exist or cannot be opened.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptCorrupt{"checkpoint.corrupt", Rule::Level::Error,
                       "A checkpoint file (a tracker, a rank's metadata or safetensors file, the metadata --use-checkpoint-args reads) is truncated or malformed, or does not fit in memory; the message names the file.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptModelMismatch{"checkpoint.model-mismatch", Rule::Level::Error,
                       "The checkpoint is of another model: a parameter this rank's model lacks, has or shapes differently, or another params dtype when the optimizer state loads too.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptOptimizerMismatch{"checkpoint.optimizer-mismatch", Rule::Level::Error,
                       "The checkpoint holds another --optimizer's state, or none (--no-save-optim), without --no-load-optim or --finetune.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptIncomplete{"checkpoint.incomplete", Rule::Level::Error,
                       "The checkpoint's pieces do not cover a block this rank needs (a parameter's or an optimizer state's elements, or a preconditioner's row).",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptSchedulerMismatch{"checkpoint.scheduler-mismatch", Rule::Level::Error,
                       "Megatron's learning-rate scheduler consistency check failed: a saved scheduler setting differs from this job's and neither --override-opt-param-scheduler nor --use-checkpoint-opt-param-scheduler says which wins.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptUnsupported{"checkpoint.unsupported", Rule::Level::Error,
                       "A checkpoint setting the run does not model: --non-persistent-ckpt-type local with --non-persistent-save-interval (refused before the workers start), a non-persistent directory that is the --save/--load one, --load-main-params-from-ckpt without --use-distributed-optimizer, an --override-ckpt-iteration out of range, a Megatron-format checkpoint.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptIntegrity{"checkpoint.integrity", Rule::Level::Error,
                       "--verify-integrity and the checkpoint's integrity.json is missing, malformed, of another algorithm, does not list a rank file, or a file it lists is missing or has another SHA-256.",
                       __FILE__, __LINE__, kStageRun};

const Rule kCkptArgsMismatch{"checkpoint.args-mismatch", Rule::Level::Error,
                       "Megatron's check_checkpoint_args, its conditional comparisons (not with --finetune): with --phase-transition-iterations the global batch size, with --data-parallel-random-init that flag, with --ckpt-format torch the TP and PP sizes, differ from the checkpoint's.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptPretrainedMissing{"checkpoint.pretrained-missing", Rule::Level::Error,
                       "--pretrained-checkpoint DIR is given, --load holds no checkpoint (no tracker) and DIR holds none either (Megatron's FileNotFoundError).",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptNoRngState{"checkpoint.no-rng-state", Rule::Level::Warning,
                       "The loaded checkpoint was saved with --no-save-rng: it holds no RNG state, so the run keeps this run's --seed, as Megatron ignores the RNG state then.",
                       __FILE__, __LINE__, kStageRun};
// The save's and the load's other warnings (checkpoint_save.cpp, checkpoint_load.cpp, rank 0): printed as "warning[ID]: ...", not fatal.
const Rule kCkptOverrideIterationBatchSize{"checkpoint.override-iteration-batch-size", Rule::Level::Warning,
                       "--override-ckpt-iteration N and the checkpoint was written with another --global-batch-size: the consumed samples are counted at this run's (N x --global-batch-size, as Megatron), so an iteration counted in that run's batches starts from other samples.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptOverrideScheduler{"checkpoint.override-scheduler", Rule::Level::Warning,
                       "--override-opt-param-scheduler and the loaded scheduler's step count is not the run's consumed samples: the scheduler is moved to the consumed samples, as Megatron's.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptNoLock{"checkpoint.no-lock", Rule::Level::Warning,
                       "--save DIR, or the non-persistent directory, cannot be locked (DIR/.megatron-run.lock cannot be opened, or the file system has no flock): the run saves there, but nothing keeps another run from saving there too (checkpoint.save-busy).",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptLeftover{"checkpoint.leftover", Rule::Level::Warning,
                       "A save's clean-up left a directory behind that could not be removed (the new checkpoint is saved): a stale iter_N.tmp (moved aside to iter_N.tmp.stale-K), the previous copy of iter_N it replaced, an older non-persistent checkpoint, or the checkpoint --save-retain-interval removes.",
                       __FILE__, __LINE__, kStageRun};

const Rule kCkptAsyncSaveTorchFormat{"checkpoint.async-save-torch-format", Rule::Level::Error,
                       "--async-save with --ckpt-format torch and --save, in a run that trains (not --skip-train, not 0 iterations): Megatron's save_checkpoint raises NotImplementedError ('Async checkpoint save not implemented for legacy checkpoints') at its first save, and such a run saves at least once (at --save-interval, or after training); validation turns --async-save off only for a distributed format without --use-persistent-ckpt-worker. Refused before the workers start.",
                       __FILE__, __LINE__, kStageRun};
const Rule kCkptNonPersistentTypeMissing{"checkpoint.non-persistent-type-missing", Rule::Level::Error,
                       "--non-persistent-save-interval N with --save but no --non-persistent-ckpt-type, where Megatron's training makes a non-persistent save: some iteration up to --train-iters (from 1: a resume's start is not known) is a multiple of N and not of --save-interval, not with --skip-train. Megatron's save_checkpoint raises NotImplementedError ('Please use local or global non-persistent checkpoints (got: None)') there; refused before the workers start.",
                       __FILE__, __LINE__, kStageRun};

const Rule& checkpoint_rule(std::string_view id) {
  for (const Rule* r : {&kCkptSaveUnwritable, &kCkptSaveFailed, &kCkptSaveBusy, &kCkptMissing, &kCkptStepMissing,
                        &kCkptCorrupt, &kCkptModelMismatch, &kCkptOptimizerMismatch, &kCkptIncomplete,
                        &kCkptSchedulerMismatch, &kCkptUnsupported, &kCkptIntegrity, &kCkptArgsMismatch,
                        &kCkptPretrainedMissing, &kCkptAsyncSaveTorchFormat, &kCkptNonPersistentTypeMissing})
    if (id == r->id) return *r;
  return kCkptCorrupt;
}

std::optional<int64_t> trained_iterations(const Args& a) {
  // Megatron's update_train_iters: `if args.train_iters: return`, else from --train-samples (whole constant batches,
  // or the steps of a batch-size schedule).
  if (a.train_iters && *a.train_iters != 0) return *a.train_iters;
  if (a.train_samples) {
    if (!a.step_batch_size_schedule && a.global_batch_size <= 0) return std::nullopt;
    try {
      return BatchSchedule::from(a).iterations_for(*a.train_samples);
    } catch (const std::exception&) {
      return std::nullopt;  // a schedule Megatron refuses at initialisation: not known here
    }
  }
  if (a.train_iters) return 0;
  return std::nullopt;
}

std::optional<int64_t> resumed_iteration(const Args& given) {
  // No checkpoint under --load (from scratch, or --pretrained-checkpoint's fine-tune): iteration 0.
  if (!given.load) return 0;
  try {
    // --freeze-all-layers: a fine-tune, at the iteration of --save's tracker unless --override-ckpt-iteration
    // (run/frozen_layers.h).
    const Args a = frozen_load_args(given);
    if (a.finetune && !a.override_ckpt_iteration) return 0;  // --finetune: iteration 0
    LoadQuery q;
    q.load = *a.load;
    q.ckpt_step = a.ckpt_step.value_or(0);
    q.non_persistent_global = a.non_persistent_ckpt_type == arg::NonPersistentCkptType::global;
    q.non_persistent_dir = a.non_persistent_global_ckpt_dir;
    const std::optional<CheckpointPlace> place = locate_checkpoint(q);
    if (!place) return 0;
    if (a.override_ckpt_iteration) return *a.override_ckpt_iteration;
    return place->release ? 0 : place->iteration;  // a release checkpoint: iteration 0
  } catch (const std::exception&) {
    return std::nullopt;  // a tracker the load refuses (checkpoint.corrupt, checkpoint.step-missing): said there
  }
}

std::optional<SaveSettingsRefusal> save_settings_refusal(const Args& a) {
  if (!a.save) return std::nullopt;
  // --skip-train runs no training loop: nothing is saved (Megatron's pretrain saves only in train() and after it,
  // both under `not skip_train`).
  if (a.skip_train) return std::nullopt;
  const std::optional<int64_t> iters = trained_iterations(a);
  // Megatron's pretrain calls train() only `if args.do_train and args.train_iters > 0`: with 0 iterations it
  // saves nothing (the final save needs `iteration != 0`, and iteration stays 0).
  if (iters && *iters <= 0) return std::nullopt;
  // Megatron's save_checkpoint: `if args.async_save: if ckpt_type == CheckpointType.LEGACY: raise
  // NotImplementedError(...)`, LEGACY being --ckpt-format torch (use_dist_ckpt false); validate_args turns
  // --async-save off only `if args.use_dist_ckpt and args.async_save and not args.use_persistent_ckpt_worker`.
  // (A global non-persistent save is GLOBAL whatever the format: it does not raise.) A run whose training loop runs
  // an iteration saves persistently at least once: at a multiple of --save-interval (validation requires it with
  // --save), else after training (`iteration != 0 and iteration % save_interval != 0`), at an exit (--exit-interval,
  // --exit-duration-in-mins, a signal) when it has not saved at that iteration. A resume at or past the last
  // iteration (`while iteration < args.train_iters` runs none) makes only the final save, which Megatron skips at a
  // multiple of --save-interval: that run saves nothing and is not refused (resumed_iteration reads the start from
  // the checkpoint --load names; where it cannot, the run is refused).
  const bool async_legacy_save = [&] {
    if (!a.async_save || a.ckpt_format != arg::CkptFormat::torch) return false;
    if (!iters || !a.save_interval || *a.save_interval == 0) return true;
    const std::optional<int64_t> start = resumed_iteration(a);
    return !(start && *start >= *iters && *start % *a.save_interval == 0);
  }();
  if (async_legacy_save)
    return SaveSettingsRefusal{
        &kCkptAsyncSaveTorchFormat,
        "--async-save with --ckpt-format torch: Megatron's save_checkpoint raises NotImplementedError ('Async "
        "checkpoint save not implemented for legacy checkpoints') at its first save to --save " +
            shown_path(*a.save) + ", after training up to it (validation turns --async-save off only for a "
            "distributed format without --use-persistent-ckpt-worker); leave --async-save out, or save in a "
            "distributed format (--ckpt-format torch_dist)",
        true,
        {"--async-save", "--ckpt-format"}};
  // Megatron's save_checkpoint with non_persistent_ckpt: 'global' and 'local' are saved, any other type raises
  // NotImplementedError at the first non-persistent save. checkpoint_and_decide_exit makes one only in its `elif`:
  // `iteration % non_persistent_save_interval == 0` where no persistent save is due (`iteration % save_interval
  // != 0`); the other saves (after training, at an exit or a signal) are persistent. So one comes iff some
  // iteration in the run is a multiple of N and not of --save-interval S: with the start not known here (a resume
  // starts later), iterations 1 to --train-iters, where N itself is one iff N <= --train-iters and N is not a
  // multiple of S (every multiple of N is one of S then). With --train-samples the iterations are Megatron's
  // update_train_iters'; where they cannot be known (a schedule refused at initialisation) any N counts.
  // The run saves global ones only.
  if (a.non_persistent_save_interval && *a.non_persistent_save_interval > 0 &&
      a.non_persistent_ckpt_type != arg::NonPersistentCkptType::global) {
    const int64_t n = *a.non_persistent_save_interval;
    const int64_t persistent = a.save_interval ? *a.save_interval : 0;
    if (persistent > 0 && n % persistent == 0) return std::nullopt;  // every multiple of N saves persistently
    if (iters && n > *iters) return std::nullopt;                    // no multiple of N is trained
    const std::string interval = std::to_string(n);
    const std::string when =
        "at its first non-persistent save (iteration " + interval + " of a run from the start" +
        (iters ? " up to iteration " + std::to_string(*iters) : std::string()) +
        (persistent > 0 ? ", where no --save-interval " + std::to_string(persistent) + " save is due" : "") + ")";
    if (!a.non_persistent_ckpt_type)
      return SaveSettingsRefusal{
          &kCkptNonPersistentTypeMissing,
          "--non-persistent-save-interval " + interval + " without --non-persistent-ckpt-type: Megatron's "
          "save_checkpoint raises NotImplementedError ('Please use local or global non-persistent checkpoints (got: "
          "None)') " + when + "; give --non-persistent-ckpt-type global (megatron-run's run saves global ones), or "
          "leave --non-persistent-save-interval out",
          true,
          {"--non-persistent-save-interval", "--non-persistent-ckpt-type"}};
    return SaveSettingsRefusal{
        &kCkptUnsupported,
        "--non-persistent-save-interval " + interval + " needs --non-persistent-ckpt-type global in megatron-run's "
        "run (got " + std::string(arg::to_string(*a.non_persistent_ckpt_type)) + ": local non-persistent "
        "checkpoints are not modelled), " + when,
        false,
        {"--non-persistent-save-interval", "--non-persistent-ckpt-type"}};
  }
  return std::nullopt;
}

namespace {

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw CheckpointError(kCkptCorrupt, path + ": " + what);
}

const Value* field(const Value& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  for (const auto& [k, v] : obj.as_object())
    if (k == key) return &v;
  return nullptr;
}

const Value& need(const Value& obj, std::string_view key, const std::string& path, const std::string& where) {
  const Value* v = field(obj, key);
  if (!v) corrupt(path, where + " has no \"" + std::string(key) + "\"");
  return *v;
}
int64_t need_int(const Value& obj, std::string_view key, const std::string& path, const std::string& where,
                 int64_t lo = 0) {
  const Value& v = need(obj, key, path, where);
  if (!v.is_int() || v.is_bool() || v.as_int() < lo)
    corrupt(path, where + ": \"" + std::string(key) + "\" is not an integer >= " + std::to_string(lo));
  return v.as_int();
}
// A counter the run goes on adding to: 0 to kMaxCheckpointCount.
int64_t need_count(const Value& obj, std::string_view key, const std::string& path, const std::string& where) {
  const int64_t v = need_int(obj, key, path, where);
  if (v > kMaxCheckpointCount)
    corrupt(path, where + ": \"" + std::string(key) + "\" is " + std::to_string(v) + ", past the limit 2^62");
  return v;
}
// The document `json` of file `path` as a tree. A document past kMaxCheckpointJsonValues is refused as the parser
// reaches the limit: its tree would take far more memory than its bytes (a 92 MB safetensors header of 1.3 million
// tiny tensors took 2 GB). `what`: "the header", "the metadata"; `invalid`: the message's start for bad JSON.
Value parse_checkpoint_json(std::string_view json, const std::string& path, const std::string& what,
                            const std::string& invalid) {
  try {
    return Value::parse_json(json, kMaxCheckpointJsonValues);
  } catch (const JsonTooManyValues& e) {
    corrupt(path, what + " holds more than " + std::to_string(e.limit) + " JSON values");
  } catch (const std::exception& e) {
    corrupt(path, invalid + e.what());
  }
}

const std::string& need_str(const Value& obj, std::string_view key, const std::string& path, const std::string& where) {
  const Value& v = need(obj, key, path, where);
  if (!v.is_str()) corrupt(path, where + ": \"" + std::string(key) + "\" is not a string");
  return v.as_str();
}
std::vector<int64_t> need_ints(const Value& obj, std::string_view key, const std::string& path,
                               const std::string& where, size_t max_len = 8) {
  const Value& v = need(obj, key, path, where);
  if (!v.is_list() || v.as_list().size() > max_len)
    corrupt(path, where + ": \"" + std::string(key) + "\" is not a list of at most " + std::to_string(max_len) +
                      " integers");
  std::vector<int64_t> out;
  for (const Value& x : v.as_list()) {
    if (!x.is_int() || x.is_bool() || x.as_int() < 0)
      corrupt(path, where + ": \"" + std::string(key) + "\" holds a value that is not an integer >= 0");
    out.push_back(x.as_int());
  }
  return out;
}

// Product of non-negative dims, nullopt on overflow past 2^62.
std::optional<uint64_t> product(const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    const uint64_t u = static_cast<uint64_t>(d);
    if (u != 0 && n > (1ull << 62) / u) return std::nullopt;
    n *= u;
  }
  return n;
}

Value ints(const std::vector<int64_t>& v) {
  List l;
  for (int64_t x : v) l.emplace_back(static_cast<long long>(x));
  return Value(std::move(l));
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t chunk = std::min<size_t>(n, 1u << 30);
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw CheckpointError(kCkptSaveFailed, path + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The "layout" object: every group size 1 to world_size; tp·pp·dp, tp·pp·cp and ep·etp·expert_dp·pp each a divisor
// of world_size (the rank generators' products; "dp" is the data-parallel group the run shards over, which holds
// the context-parallel ranks too: TP=1 PP=2 CP=2 on 4 ranks saves dp 2); every
// "*_rank" below its group's size, and "shard" (and "expert_shard", absent from the earliest checkpoints) a range
// [lo, hi] with 0 <= lo <= hi <= 2^62. Loading reads the pieces, not these; they are checked so that a damaged
// file is named as such rather than shown (the (TP, PP) notice) or passed on.
void check_layout(const Value& layout, int64_t world_size, const std::string& path) {
  if (!layout.is_object()) corrupt(path, "\"layout\" is not an object");
  const std::string where = "\"layout\"";
  auto size_of = [&](const char* key) {
    const int64_t v = need_int(layout, key, path, where, 1);
    if (v > world_size)
      corrupt(path, where + ": \"" + key + "\" is " + std::to_string(v) + ", past world_size " +
                        std::to_string(world_size));
    return v;
  };
  const int64_t tp = size_of("tp"), pp = size_of("pp"), cp = size_of("cp"), dp = size_of("dp"), ep = size_of("ep"),
                etp = size_of("etp"), edp = size_of("expert_dp");
  auto divides_world = [&](std::initializer_list<int64_t> sizes, const char* what) {
    int64_t n = 1;  // each size is at most world_size: stop once the product passes it (no overflow)
    for (int64_t s : sizes) {
      if (n > world_size / s) { n = 0; break; }
      n *= s;
    }
    if (n == 0 || world_size % n != 0)
      corrupt(path, where + ": " + what + " do not multiply to a divisor of world_size " + std::to_string(world_size));
  };
  divides_world({tp, pp, dp}, "tp, pp and dp");
  divides_world({tp, pp, cp}, "tp, pp and cp");
  divides_world({ep, etp, edp, pp}, "ep, etp, expert_dp and pp");
  for (const auto& [key, size] : {std::pair{"tp_rank", tp}, std::pair{"pp_rank", pp}, std::pair{"dp_rank", dp},
                                  std::pair{"ep_rank", ep}, std::pair{"etp_rank", etp},
                                  std::pair{"expert_dp_rank", edp}}) {
    const int64_t r = need_int(layout, key, path, where);
    if (r >= size)
      corrupt(path, where + ": \"" + key + "\" is " + std::to_string(r) + ", not below its group's size " +
                        std::to_string(size));
  }
  for (const char* key : {"shard", "expert_shard"}) {
    if (!field(layout, key) && std::string_view(key) == "expert_shard") continue;
    const std::vector<int64_t> r = need_ints(layout, key, path, where, 2);
    if (r.size() != 2 || r[0] > r[1] || r[1] > kMaxCheckpointCount)
      corrupt(path, where + ": \"" + key + "\" is not a range [lo, hi] with 0 <= lo <= hi <= 2^62");
  }
}

}  // namespace

Value RankLayout::to_value() const {
  auto i = [](int64_t x) { return Value(static_cast<long long>(x)); };
  return Value::object({{"tp", i(tp)},
                        {"pp", i(pp)},
                        {"cp", i(cp)},
                        {"dp", i(dp)},
                        {"ep", i(ep)},
                        {"etp", i(etp)},
                        {"expert_dp", i(expert_dp)},
                        {"tp_rank", i(tp_rank)},
                        {"pp_rank", i(pp_rank)},
                        {"dp_rank", i(dp_rank)},
                        {"ep_rank", i(ep_rank)},
                        {"etp_rank", i(etp_rank)},
                        {"expert_dp_rank", i(expert_dp_rank)},
                        {"shard", Value(List{i(shard_lo), i(shard_hi)})},
                        {"expert_shard", Value(List{i(expert_shard_lo), i(expert_shard_hi)})}});
}

size_t safetensors_dtype_bytes(std::string_view d) {
  if (d == "F32") return 4;
  if (d == "BF16" || d == "F16") return 2;
  return 0;
}

namespace {
size_t any_dtype_bytes(std::string_view d) {
  static const std::pair<const char*, size_t> kAll[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2},
      {"BF16", 2}, {"U32", 4}, {"I32", 4}, {"F32", 4},     {"U64", 8},     {"I64", 8}, {"F64", 8}};
  for (const auto& [n, b] : kAll)
    if (d == n) return b;
  return 0;
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors) {
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t at = 0;
  for (const TensorOut& t : tensors) {
    h += "," + json_quote(t.name) + ":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + ints(t.shape).json() +
         ",\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + t.bytes) + "]}";
    at += t.bytes;
  }
  h += "}";
  while ((h.size() + 8) % 8 != 0) h += ' ';
  unsigned char len[8];
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw CheckpointError(kCkptSaveFailed, path + ": cannot create: " + std::strerror(errno));
  try {
    write_all(fd, len, 8, path);
    write_all(fd, h.data(), h.size(), path);
    std::vector<char> chunk;  // for the produced tensors
    for (const TensorOut& t : tensors) {
      if (!t.bytes) continue;
      if (t.data) {
        write_all(fd, t.data, t.bytes, path);
        continue;
      }
      chunk.resize(std::min(t.bytes, kProduceChunkBytes));
      for (size_t off = 0; off < t.bytes; off += chunk.size()) {
        const size_t n = std::min(chunk.size(), t.bytes - off);
        t.produce(off, n, chunk.data());
        write_all(fd, chunk.data(), n, path);
      }
    }
    if (::fsync(fd) != 0) throw CheckpointError(kCkptSaveFailed, path + ": fsync failed: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw CheckpointError(kCkptSaveFailed, path + ": close failed: " + std::strerror(errno));
}

const TensorEntry* SafetensorsHeader::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &entries[it->second];
}

SafetensorsHeader parse_safetensors(std::string_view head, uint64_t file_size, const std::string& path) {
  if (head.size() < 8 || file_size < 8) corrupt(path, "truncated: shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(head[static_cast<size_t>(i)])) << (8 * i);
  if (n > kMaxSafetensorsHeaderBytes) corrupt(path, "header length " + std::to_string(n) + " is past the limit");
  if (n > file_size - 8 || n > head.size() - 8)
    corrupt(path, "truncated: the header says " + std::to_string(n) + " bytes of JSON, the file has " +
                      std::to_string(file_size - 8));
  const std::string_view json = head.substr(8, static_cast<size_t>(n));
  if (json.empty() || json[0] != '{') corrupt(path, "the header is not a JSON object");
  const Value root = parse_checkpoint_json(json, path, "the header", "the header is not valid JSON: ");
  if (!root.is_object()) corrupt(path, "the header is not a JSON object");
  SafetensorsHeader out;
  out.data_start = 8 + n;
  const uint64_t data_bytes = file_size - out.data_start;
  for (const auto& [name, v] : root.as_object()) {
    if (name == "__metadata__") {
      if (!v.is_object()) corrupt(path, "__metadata__ is not an object");
      for (const auto& [k, s] : v.as_object())
        if (!s.is_str()) corrupt(path, "__metadata__[\"" + k + "\"] is not a string");
      continue;
    }
    const std::string where = "tensor \"" + name + "\"";
    if (!v.is_object()) corrupt(path, where + " is not an object");
    TensorEntry e;
    e.name = name;
    e.dtype = need_str(v, "dtype", path, where);
    const size_t w = any_dtype_bytes(e.dtype);
    if (w == 0) corrupt(path, where + " has an unknown dtype \"" + e.dtype + "\"");
    e.shape = need_ints(v, "shape", path, where, 16);
    const std::vector<int64_t> off = need_ints(v, "data_offsets", path, where, 2);
    if (off.size() != 2 || off[0] > off[1]) corrupt(path, where + ": data_offsets is not [begin, end]");
    e.begin = static_cast<uint64_t>(off[0]);
    e.end = static_cast<uint64_t>(off[1]);
    const auto numel = product(e.shape);
    if (!numel || *numel > (1ull << 62) / w || *numel * w != e.end - e.begin)
      corrupt(path, where + ": its shape does not match its data_offsets");
    if (e.end > data_bytes)
      corrupt(path, "truncated: " + where + " ends at byte " + std::to_string(e.end) + " of a data section of " +
                        std::to_string(data_bytes));
    if (out.index.count(name)) corrupt(path, where + " appears twice");
    out.index.emplace(name, out.entries.size());
    out.entries.push_back(std::move(e));
  }
  // The safetensors package's rule: in the order of their offsets, each tensor starts where the one before ends
  // (the first at 0), and the last one ends where the file does. A gap, an overlap or bytes after the data (a file
  // appended to, a bad copy) are refused as it refuses them.
  std::vector<const TensorEntry*> sorted;
  for (const TensorEntry& e : out.entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](auto* a, auto* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  uint64_t at = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const TensorEntry& e = *sorted[i];
    if (e.begin < at)
      corrupt(path, "tensors \"" + sorted[i - 1]->name + "\" and \"" + e.name + "\" overlap");
    if (e.begin > at)
      corrupt(path, "tensor \"" + e.name + "\" starts at byte " + std::to_string(e.begin) + " of the data section, " +
                        (i ? "after a gap of " + std::to_string(e.begin - at) + " bytes behind \"" + sorted[i - 1]->name + "\""
                           : std::string("not at 0")) +
                        " (the safetensors format has none)");
    at = e.end;
  }
  if (at != data_bytes)
    corrupt(path, std::to_string(data_bytes - at) + " bytes follow the last tensor's data (its data section is " +
                      std::to_string(data_bytes) + " bytes, the tensors end at byte " + std::to_string(at) +
                      "): the file was appended to or is not one safetensors file");
  return out;
}

InFile::InFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO in the file's place opens at once (and is refused below) instead of waiting for a writer;
  // on a regular file it changes nothing.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) corrupt(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    corrupt(path, "not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}
InFile::~InFile() {
  if (fd_ >= 0) ::close(fd_);
}
void InFile::read(uint64_t offset, void* dst, size_t n) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, std::min<size_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) corrupt(path_, std::string("read failed: ") + std::strerror(errno));
    if (r == 0) corrupt(path_, "truncated: ends at byte " + std::to_string(offset));
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  InFile f(path);
  if (f.size() < 8) corrupt(path, "truncated: shorter than the 8-byte header length");
  std::string head(8, '\0');
  f.read(0, head.data(), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(head[static_cast<size_t>(i)])) << (8 * i);
  if (n <= kMaxSafetensorsHeaderBytes && n <= f.size() - 8) {
    head.resize(8 + n);
    f.read(8, head.data() + 8, static_cast<size_t>(n));
  }
  return parse_safetensors(head, f.size(), path);
}

std::string read_small_file(const std::string& path, uint64_t limit) {
  InFile f(path);
  if (f.size() > limit) corrupt(path, "larger than " + std::to_string(limit) + " bytes");
  std::string s(static_cast<size_t>(f.size()), '\0');
  f.read(0, s.data(), s.size());
  return s;
}

Value Piece::to_json() const {
  return Value::object({{"tensor", tensor},
                        {"key", key},
                        {"kind", kind},
                        {"dtype", dtype},
                        {"global_shape", ints(global_shape)},
                        {"global_offset", ints(global_offset)},
                        {"local_shape", ints(local_shape)},
                        {"flattened_range", ints({flat_begin, flat_end})}});
}

std::string to_json(const RankMeta& m) {
  List pieces;
  for (const Piece& p : m.pieces) pieces.push_back(p.to_json());
  Value v = Value::object({{"format", "megatron-run checkpoint"},
                           {"version", static_cast<long long>(m.version)},
                           {"iteration", static_cast<long long>(m.iteration)},
                           {"consumed_samples", static_cast<long long>(m.consumed_samples)},
                           {"skipped_iterations", static_cast<long long>(m.skipped_iterations)},
                           {"optimizer_steps", static_cast<long long>(m.optimizer_steps)},
                           {"skipped_train_samples", static_cast<long long>(m.skipped_train_samples)},
                           {"world_size", static_cast<long long>(m.world_size)},
                           {"rank", static_cast<long long>(m.rank)},
                           {"layout", m.layout},
                           {"optimizer", m.optimizer},
                           {"params_dtype", m.params_dtype},
                           {"distributed_optimizer", m.distributed_optimizer},
                           {"rng", Value::object({{"seed", std::to_string(m.seed)}})},
                           {"opt_param_scheduler", m.scheduler},
                           {"grad_scaler", m.grad_scaler},
                           {"tensors", m.tensors_file},
                           {"pieces", Value(std::move(pieces))},
                           {"args", m.args}});
  return v.json() + "\n";
}

RankMeta parse_rank_meta(std::string_view text, const std::string& path) {
  const Value root = parse_checkpoint_json(text, path, "the metadata", "not valid JSON: ");
  if (!root.is_object()) corrupt(path, "not a JSON object");
  const std::string top = "the metadata";
  RankMeta m;
  if (need_str(root, "format", path, top) != "megatron-run checkpoint") corrupt(path, "not a megatron-run checkpoint");
  m.version = need_int(root, "version", path, top);
  if (m.version != 1) corrupt(path, "format version " + std::to_string(m.version) + " (this megatron-run reads 1)");
  m.iteration = need_count(root, "iteration", path, top);
  m.consumed_samples = need_count(root, "consumed_samples", path, top);
  m.skipped_iterations = need_count(root, "skipped_iterations", path, top);
  m.optimizer_steps = need_count(root, "optimizer_steps", path, top);
  // Written since --iterations-to-skip was acted on; an older checkpoint skipped none.
  if (field(root, "skipped_train_samples")) m.skipped_train_samples = need_count(root, "skipped_train_samples", path, top);
  m.world_size = need_int(root, "world_size", path, top, 1);
  m.rank = need_int(root, "rank", path, top);
  if (m.rank >= m.world_size) corrupt(path, "rank " + std::to_string(m.rank) + " is not below world_size");
  m.layout = need(root, "layout", path, top);
  check_layout(m.layout, m.world_size, path);
  m.optimizer = need_str(root, "optimizer", path, top);
  m.params_dtype = need_str(root, "params_dtype", path, top);
  const Value& d = need(root, "distributed_optimizer", path, top);
  if (!d.is_bool()) corrupt(path, "\"distributed_optimizer\" is not a bool");
  m.distributed_optimizer = d.as_bool();
  const std::string& seed = need_str(need(root, "rng", path, top), "seed", path, "\"rng\"");
  char* end = nullptr;
  errno = 0;
  m.seed = std::strtoull(seed.c_str(), &end, 10);
  if (seed.empty() || errno != 0 || *end != '\0' || seed[0] == '-') corrupt(path, "\"rng\": \"seed\" is not a number");
  m.scheduler = need(root, "opt_param_scheduler", path, top);
  m.grad_scaler = need(root, "grad_scaler", path, top);
  m.args = need(root, "args", path, top);
  m.tensors_file = need_str(root, "tensors", path, top);
  if (m.tensors_file.empty() || m.tensors_file.find('/') != std::string::npos || m.tensors_file[0] == '.')
    corrupt(path, "\"tensors\" is not a file name in the checkpoint directory");
  const Value& pieces = need(root, "pieces", path, top);
  if (!pieces.is_list()) corrupt(path, "\"pieces\" is not a list");
  for (const Value& pv : pieces.as_list()) {
    const std::string where = "a piece";
    if (!pv.is_object()) corrupt(path, "a piece is not an object");
    Piece p;
    p.tensor = need_str(pv, "tensor", path, where);
    p.key = need_str(pv, "key", path, where);
    p.kind = need_str(pv, "kind", path, where);
    p.dtype = need_str(pv, "dtype", path, where);
    const std::string w = "piece \"" + p.tensor + "\"";
    if (!is_piece_kind(p.kind))
      corrupt(path, w + ": unknown kind \"" + p.kind + "\"");
    if (safetensors_dtype_bytes(p.dtype) == 0) corrupt(path, w + ": dtype \"" + p.dtype + "\" is not F32, BF16 or F16");
    p.global_shape = need_ints(pv, "global_shape", path, w, kMaxPieceDims);
    p.global_offset = need_ints(pv, "global_offset", path, w, kMaxPieceDims);
    p.local_shape = need_ints(pv, "local_shape", path, w, kMaxPieceDims);
    const std::vector<int64_t> r = need_ints(pv, "flattened_range", path, w, 2);
    if (p.global_shape.empty() || p.global_offset.size() != p.global_shape.size() ||
        p.local_shape.size() != p.global_shape.size() || r.size() != 2)
      corrupt(path, w + ": global_shape, global_offset, local_shape must have the same length (1 to " +
                        std::to_string(kMaxPieceDims) + "), flattened_range two values");
    for (size_t i = 0; i < p.global_shape.size(); ++i) {
      if (p.global_offset[i] > p.global_shape[i] || p.local_shape[i] > p.global_shape[i] - p.global_offset[i])
        corrupt(path, w + ": the local block does not fit in the global shape");
      // Tensor parallelism splits dimension 0 or 1; the dimensions after those are whole in every block.
      if (i >= 2 && (p.global_offset[i] != 0 || p.local_shape[i] != p.global_shape[i]))
        corrupt(path, w + ": a block split along dimension " + std::to_string(i) + " (only 0 and 1 are split)");
    }
    const auto numel = product(p.local_shape);
    if (!numel || !product(p.global_shape)) corrupt(path, w + ": the shape is too large");
    p.flat_begin = r[0];
    p.flat_end = r[1];
    if (p.flat_begin > p.flat_end || static_cast<uint64_t>(p.flat_end) > *numel)
      corrupt(path, w + ": flattened_range is outside the local block");
    m.pieces.push_back(std::move(p));
  }
  return m;
}

namespace {
// Python's os.path.join(dir, name), as Megatron builds its paths: an empty dir is the working directory.
std::string joined(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}
}  // namespace

std::string tracker_path(const std::string& dir) { return joined(dir, "latest_checkpointed_iteration.txt"); }
std::string iteration_dir(const std::string& dir, int64_t iteration, bool release) {
  if (release) return joined(dir, "release");
  char b[32];
  std::snprintf(b, sizeof b, "iter_%07lld", static_cast<long long>(iteration));
  return joined(dir, b);
}
bool holds_rank_metadata(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank_", 0) == 0 && name.size() > 10 && name.compare(name.size() - 5, 5, ".json") == 0) return true;
  }
  return false;
}

std::string megatron_checkpoint_kind(const std::string& dir) {
  constexpr int kLooked = 10000;
  bool metadata = false, distcp = false, common = false, mp_rank = false;
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end && n < kLooked; it.increment(ec), ++n) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank_", 0) == 0 && name.size() > 10 && name.compare(name.size() - 5, 5, ".json") == 0) return "";
    metadata = metadata || name == ".metadata";
    distcp = distcp || (name.size() > 7 && name.compare(name.size() - 7, 7, ".distcp") == 0);
    common = common || name == "common.pt";
    std::error_code dir_ec;
    mp_rank = mp_rank || (name.rfind("mp_rank_", 0) == 0 && it->is_directory(dir_ec));
  }
  if (metadata || distcp || common) {
    std::string seen;
    for (const auto& [on, what] : {std::pair{metadata, ".metadata"}, {distcp, "*.distcp"}, {common, "common.pt"}})
      if (on) seen += (seen.empty() ? "" : ", ") + std::string(what);
    return "torch_dist (" + seen + ")";
  }
  if (mp_rank) return "torch (mp_rank_*/)";
  return "";
}

CheckpointError megatron_checkpoint_refusal(const std::string& dir, const std::string& kind, const std::string& flag) {
  std::string m = shown_path(dir) + " holds a Megatron " + kind + " checkpoint, not megatron-run's (no " + rank_stem(0) +
                  ".json)";
  if (!flag.empty())
    m = flag + ": " + m + ": megatron-run's own (synthetic) run loads only the checkpoints it saved; a Megatron "
                          "program loads this one (megatron-run [launch options] pretrain_gpt.py ... " + flag + ")";
  return CheckpointError(kCkptUnsupported, m, /*foreign_checkpoint=*/true);
}

std::string rank_stem(int64_t rank) {
  char b[32];
  std::snprintf(b, sizeof b, "rank_%05lld", static_cast<long long>(rank));
  return b;
}

std::optional<TrackerValue> parse_tracker(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  if (text == "release") return TrackerValue{0, true};
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);  // Python's int() takes a sign
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return TrackerValue{v, false};
}

}  // namespace mr::run
