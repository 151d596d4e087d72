// Checkpointer::save (run/checkpoint.h): one save, every rank together, in steps (OneSave: the directory cleared,
// each rank's files written, rank 0's rename into place, the tracker, the non-persistent clean-up), and
// --save-retain-interval's removal after it (Checkpointer::retain).
#include "run/host_collectives.h"
#include "run/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <set>
#include <thread>
#include <vector>

#include "config/schema.h"
#include "run/atomic_dir.h"
#include "run/checkpoint_args.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_integrity.h"
#include "run/checkpoint_io.h"
#include "run/checkpoint_locate.h"
#include "run/checkpoint_resume_args.h"
#include "run/checkpoint_shared.h"
#include "run/run_scope.h"
#include "run/tokenizer_vocab.h"
#include "util/exit_signal.h"
#include "util/rule_id.h"
#include "util/text.h"

namespace mr::run {

using namespace ckpt_detail;

namespace {

std::string fmt7(int64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%7lld", static_cast<long long>(v));
  return b;
}

// "ITER:SECONDS" / "ITER" knobs.
std::optional<std::pair<int64_t, double>> knob(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  long long it = 0;
  double s = 0;
  const int n = std::sscanf(v, "%lld:%lf", &it, &s);
  if (n < 1) throw RunError(std::string(name) + "='" + v + "' is not ITER[:SECONDS]");
  return std::make_pair(static_cast<int64_t>(it), s);
}

Value sched_json(const optim::ScheduleState& s) {
  return Value::object({{"max_lr", s.max_lr},
                        {"min_lr", s.min_lr},
                        {"lr_warmup_steps", s.lr_warmup_steps},
                        {"lr_decay_steps", static_cast<long long>(s.lr_decay_steps)},
                        {"lr_decay_style", std::string(optim::to_string(s.lr_decay_style))},
                        {"num_steps", static_cast<long long>(s.num_steps)},
                        {"start_wd", s.start_wd ? Value(*s.start_wd) : Value()},
                        {"end_wd", s.end_wd ? Value(*s.end_wd) : Value()},
                        {"wd_incr_steps", s.wd_incr_steps ? Value(static_cast<long long>(*s.wd_incr_steps)) : Value()},
                        {"wd_incr_style", s.wd_incr_style ? Value(std::string(optim::to_string(*s.wd_incr_style))) : Value()}});
}

// A failure after the rename travels to every rank with this mark before its text (only rank 0 renames).
constexpr char kPlaced = '\x1d';

// Whether `name` is an interrupted save's directory: iter_ and digits, then .tmp.
bool stale_tmp_name(const std::string& name) {
  return name.size() > 9 && name.rfind("iter_", 0) == 0 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
         name.find_first_not_of("0123456789", 5) == name.size() - 4;
}

// The iter_M.tmp of other iterations than `tmp`'s in `base`, left by saves that were interrupted (this run holds the
// directory's lock: no other run is writing one): removed, and named in `removed`; one that cannot be removed is
// a warning, not a failure (its reason in `left`).
void remove_other_stale_tmps(const std::string& base, const std::string& tmp, std::vector<std::string>& removed,
                             std::vector<std::string>& left) {
  for (const auto& e : std::filesystem::directory_iterator(base)) {
    const std::string name = e.path().filename().string();
    if (!stale_tmp_name(name) || e.is_symlink() || !e.is_directory() || e.path().string() == tmp) continue;
    try {
      remove_tree(e.path().string());
      removed.push_back(name);
    } catch (const std::exception& x) {
      left.push_back(message_of(x));
    }
  }
}

// This rank's place in the parallel groups and its shard of the buffers, as the rank's metadata records it.
RankLayout rank_layout(const RunContext& c) {
  const auto& L = c.rt.layout();
  RankLayout rl;
  rl.tp = L.spec.tp;
  rl.pp = L.spec.pp;
  rl.cp = L.spec.cp;
  rl.dp = c.dp.size();
  rl.ep = L.spec.ep;
  rl.etp = c.etp.size();
  rl.expert_dp = c.edp.size();
  rl.tp_rank = c.tp.rank();
  rl.pp_rank = c.pp.rank();
  rl.dp_rank = c.dp.rank();
  rl.ep_rank = c.rt.group("ep").rank();
  rl.etp_rank = c.etp.rank();
  rl.expert_dp_rank = c.edp.rank();
  rl.shard_lo = static_cast<int64_t>(c.buf.lo);
  rl.shard_hi = static_cast<int64_t>(c.buf.hi);
  rl.expert_shard_lo = static_cast<int64_t>(c.buf.elo);
  rl.expert_shard_hi = static_cast<int64_t>(c.buf.ehi);
  return rl;
}

// One save of Checkpointer::save: where it goes (base_, its iter_N final_dir_, written first as tmp_), and its steps,
// which save() calls in their order. A step that writes runs on every rank through all_ranks(), so that a failure on
// any rank is every rank's CheckpointError.
class OneSave {
 public:
  OneSave(RunContext& c, std::ostream& log, const std::string& prefix, const Progress& p, bool non_persistent)
      : c_(c), log_(log), prefix_(prefix), a_(c.args), p_(p), non_persistent_(non_persistent),
        rank0_(c.rt.rank() == 0), base_(non_persistent ? non_persistent_dir(a_, *a_.save) : *a_.save),
        final_dir_(iteration_dir(base_, p.iteration)), tmp_(final_dir_ + ".tmp") {}

  // --freeze-all-layers: Megatron's save_checkpoint (skip_weight_ckpt) writes neither the checkpoint nor the tracker
  // (only a --logits-save-dir dump records its progress in the tracker, which the synthetic run does not make).
  // True (and said) when so: nothing is written.
  bool skipped_for_frozen_layers() const;
  void say_start() const;
  // Step 1: --save (or the non-persistent directory) made, a stale iter_N.tmp of this iteration cleared, other
  // iterations' removed, and an empty iter_N.tmp made; what was left or removed is said.
  void prepare_directory();
  // Step 2: each rank writes its files (its metadata and its tensors) into iter_N.tmp.
  void write_files();
  // Step 3: rank 0 renames iter_N.tmp into place as iter_N (after --verify-integrity's manifest).
  void put_in_place();
  // --save-retain-interval: the iteration the tracker named before this save (Megatron reads it back first); none
  // without it, for a non-persistent save, and on the other ranks.
  std::optional<TrackerValue> tracker_before() const;
  // The tracker names the new checkpoint; a failure is every rank's CheckpointError, saying what the tracker names.
  void update_tracker();
  // Rank 0, after a non-persistent save: the older non-persistent checkpoints removed (`unremovable`: the ones whose
  // removal failed and was warned about, once each).
  void remove_older_non_persistent(std::set<std::string>& unremovable) const;
  void say_saved() const;

 private:
  // Runs `f` on every rank (step 1 to 3); when any rank failed, throws that failure as CheckpointError on every
  // rank (rank 0 removes iter_N.tmp first, unless the new checkpoint was already put in place).
  void all_ranks(const std::function<void()>& f);
  RankMeta rank_meta() const;

  RunContext& c_;
  std::ostream& log_;
  const std::string& prefix_;
  const Args& a_;
  const Progress& p_;
  const bool non_persistent_;
  const bool rank0_;
  const std::string base_, final_dir_, tmp_;
  std::string err_;
  bool in_place_ = false;  // rank 0's replace_dir put the new iter_N in place (step 3)
};

bool OneSave::skipped_for_frozen_layers() const {
  if (!a_.freeze_all_layers) return false;
  if (rank0_)
    log_ << prefix_ << "saving " << (non_persistent_ ? "non-persistent " : "") << "checkpoint at iteration "
         << fmt7(p_.iteration) << " to " << base_ << ": nothing written (--freeze-all-layers: Megatron's "
         << "save_checkpoint writes no weights and no tracker when every layer is frozen)" << std::endl;
  return true;
}

void OneSave::say_start() const {
  if (rank0_)
    log_ << prefix_ << "saving " << (non_persistent_ ? "non-persistent " : "") << "checkpoint at iteration "
         << fmt7(p_.iteration) << " to " << base_ << " in megatron-run's safetensors format" << std::endl;
}

void OneSave::all_ranks(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    err_ = (in_place_ ? std::string(1, kPlaced) : std::string()) + message_of(e);
  }
  const Verdict v = verdict(c_, err_);
  if (v.rank < 0) return;
  const std::string what = save_dir_words(a_, non_persistent_) + ": the " + (non_persistent_ ? "non-persistent " : "") +
                           "checkpoint of iteration " + std::to_string(p_.iteration);
  std::string why = err_.empty() ? v.error : err_;
  const bool placed = !why.empty() && why[0] == kPlaced;
  if (placed) why.erase(0, 1);
  if (err_.empty()) why = "rank " + std::to_string(v.rank) + ": " + why;
  if (placed)  // tmp now holds the previous iter_N, if there was one: left for the next save to clear
    throw CheckpointError(kCkptSaveFailed, what + " was put in place at " + final_dir_ + ", but the save did not "
                                               "complete (" + why + "); the tracker " + tracker_path(base_) +
                                               " was not updated");
  if (rank0_) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }
  // Nothing this save did is left: it stopped before its rename (what another process did is not ours to vouch
  // for: "unchanged" would claim it).
  throw CheckpointError(kCkptSaveFailed,
                        what + " was not written (" + why + "); this save changed neither the previous checkpoint "
                               "nor the tracker");
}

void OneSave::prepare_directory() {
  std::string stale_note;  // rank 0: a stale iter_N.tmp that could only be moved aside
  std::vector<std::string> others_removed, others_left;  // rank 0: other iterations' stale iter_M.tmp
  all_ranks([&] {
    if (!rank0_) return;
    std::error_code ec;
    std::filesystem::create_directories(base_, ec);
    if (ec) throw CheckpointError(kCkptSaveFailed, base_ + ": cannot create the directory: " + ec.message());
    stale_note = clear_stale_dir(tmp_);
    remove_other_stale_tmps(base_, tmp_, others_removed, others_left);
    if (!others_removed.empty()) fsync_path(base_);
    std::filesystem::create_directories(tmp_);
    fsync_path(base_);
  });
  if (!stale_note.empty())
    warn_rule(log_, prefix_, kCkptLeftover, save_dir_words(a_, non_persistent_) + ": " + stale_note);
  if (!others_removed.empty()) {
    std::string names;
    for (const std::string& n : others_removed) names += (names.empty() ? "" : ", ") + n;
    log_ << prefix_ << "notice: " << save_dir_words(a_, non_persistent_) << ": removed " << names
         << " (left by an interrupted save; never a complete checkpoint)" << std::endl;
  }
  for (const std::string& why : others_left)
    warn_rule(log_, prefix_, kCkptLeftover,
              save_dir_words(a_, non_persistent_) + ": a stale directory of an interrupted save could not be removed (" +
                  why + "); it is left there");
}

RankMeta OneSave::rank_meta() const {
  RankMeta m;
  m.iteration = p_.iteration;
  m.consumed_samples = p_.consumed_samples;
  m.skipped_iterations = p_.skipped;
  m.skipped_train_samples = p_.skipped_samples;
  m.optimizer_steps = p_.optimizer_steps;
  m.world_size = c_.rt.world_size();
  m.rank = c_.rt.rank();
  m.layout = rank_layout(c_).to_value();
  m.optimizer = std::string(c_.optimizer.name);
  m.params_dtype = dtype_name(c_);
  m.distributed_optimizer = c_.dist_opt;
  m.seed = c_.seed;
  m.scheduler = sched_json(c_.schedule->state());
  if (c_.scaler) {
    if (auto s = c_.scaler->state())
      m.grad_scaler = Value::object({{"scale", static_cast<double>(s->scale)},
                                     {"growth_tracker", static_cast<long long>(s->growth_tracker)},
                                     {"hysteresis_tracker", static_cast<long long>(s->hysteresis_tracker)}});
  }
  m.args = args_json(a_, c_.cfg);
  return m;
}

void OneSave::write_files() {
  all_ranks([&] {
    const RankMeta m = rank_meta();
    // The buffers' values on the host while the files are written (nothing to copy for the CPU backend).
    c_.backend->to_host(c_.buf);
    struct Release {
      RunContext& c;
      ~Release() { c.backend->release_host(c.buf); }
    } release{c_};
    const RankSave s = collect_pieces(c_.plan, c_.buf, place_of(c_), !a_.no_save_optim.value_or(false));
    if (auto f = knob("MR_CKPT_FAIL_IN_SAVE"); f && f->first == p_.iteration && rank0_) {
      const std::vector<TensorOut> half(s.tensors.begin(), s.tensors.begin() + static_cast<std::ptrdiff_t>(s.tensors.size() / 2));
      write_safetensors(tmp_ + "/" + rank_stem(0) + ".safetensors", half);
      throw CheckpointError(kCkptSaveFailed, tmp_ + "/" + rank_stem(0) + ".safetensors: write failed: simulated (MR_CKPT_FAIL_IN_SAVE)");
    }
    write_rank_files(tmp_, m, s);
    if (auto k = knob("MR_CKPT_PAUSE_IN_SAVE"); k && k->first == p_.iteration) {
      std::cout << prefix_ << "megatron-run: checkpoint save of iteration " << p_.iteration << " paused for " << k->second
                << " s (MR_CKPT_PAUSE_IN_SAVE), pid " << ::getpid() << std::endl;
      std::this_thread::sleep_for(std::chrono::duration<double>(k->second));
    }
  });
}

void OneSave::put_in_place() {
  std::string leftover;  // rank 0: the previous iter_N, swapped out, that could not be removed
  all_ranks([&] {
    if (!rank0_) return;
    // --verify-integrity: the SHA-256 of every file, once all ranks wrote theirs (Megatron's integrity.json).
    if (a_.verify_integrity) write_integrity_manifest(tmp_);
    fsync_path(tmp_);
    leftover = replace_dir(tmp_, final_dir_, in_place_);
  });
  // The new checkpoint is in place; a previous copy of this iteration that could not be removed is said, and the
  // next save of the iteration moves it aside (clear_stale_dir).
  if (!leftover.empty())
    warn_rule(log_, prefix_, kCkptLeftover, save_dir_words(a_, non_persistent_) + ": " + leftover);
}

std::optional<TrackerValue> OneSave::tracker_before() const {
  std::optional<TrackerValue> previous;
  if (rank0_ && !non_persistent_ && a_.save_retain_interval) try {
      previous = read_tracker(tracker_path(base_));
    } catch (const std::exception&) {
    }
  return previous;
}

void OneSave::update_tracker() {
  std::string tracker_err;
  try {
    if (rank0_) write_file_atomic(tracker_path(base_), std::to_string(p_.iteration));
  } catch (const std::exception& e) {
    tracker_err = message_of(e);
  }
  const Verdict v = verdict(c_, tracker_err);
  if (v.rank < 0) return;
  std::optional<TrackerValue> was;
  try {
    was = read_tracker(tracker_path(base_));
  } catch (const std::exception&) {
  }
  if (was && !was->release && was->iteration == p_.iteration)  // renamed into place; only the last fsync failed
    throw CheckpointError(kCkptSaveFailed,
                          save_dir_words(a_, non_persistent_) + ": the checkpoint of iteration " + std::to_string(p_.iteration) +
                              " was written to " + final_dir_ + " and the tracker names it, but making the "
                              "tracker's update durable failed (" + (tracker_err.empty() ? v.error : tracker_err) +
                              "); a power loss now could leave the tracker on the previous checkpoint");
  throw CheckpointError(kCkptSaveFailed,
                        save_dir_words(a_, non_persistent_) + ": the checkpoint of iteration " + std::to_string(p_.iteration) +
                            " was written to " + final_dir_ + ", but the tracker " + tracker_path(base_) +
                            " could not be updated (" + (tracker_err.empty() ? v.error : tracker_err) + "); " +
                            (was ? "it still names " + (was->release ? std::string("release") : "iteration " + std::to_string(was->iteration))
                                 : std::string("there is no tracker")) +
                            ", so a --load of " + base_ + " does not take the new checkpoint");
}

void OneSave::remove_older_non_persistent(std::set<std::string>& unremovable) const {
  if (!rank0_ || !non_persistent_) return;
  // Only the newest non-persistent checkpoint is kept. Megatron's cleanup_old_non_persistent_checkpoint runs
  // before its save and keeps the highest-numbered one, so two are there after each save; here the clean-up
  // follows the tracked save, and one is. The new one is saved and tracked: an older one that cannot be removed is no failure. Each is tried at every save, the
  // others still removed past it, and warned about once. Only Megatron's names (iter_ and digits) are ours to
  // remove: an iter_N.tmp, .tmp.stale-K or .old leftover is the stale-directory clearing's, which said it.
  std::vector<std::string> failed;
  try {
    for (const auto& e : std::filesystem::directory_iterator(base_)) {
      const std::string name = e.path().filename().string();
      const bool iteration_dir_name = name.size() > 5 && name.rfind("iter_", 0) == 0 &&
                                      name.find_first_not_of("0123456789", 5) == std::string::npos;
      if (!iteration_dir_name || e.path().string() == final_dir_ || !e.is_directory()) continue;
      try {
        remove_tree(e.path().string());
        unremovable.erase(name);
      } catch (const std::exception& x) {
        if (unremovable.insert(name).second)
          failed.push_back(message_of(x) + "); it is left there, tried again at each save and not said again");
      }
    }
    fsync_path(base_);
  } catch (const std::exception& e) {  // the directory itself could not be listed or synced
    failed.push_back(message_of(e) + ")");
  }
  for (const std::string& why : failed)
    warn_rule(log_, prefix_, kCkptLeftover,
              save_dir_words(a_, true) + ": an older non-persistent checkpoint in " + base_ + " could not be removed (" +
                  why);
}

void OneSave::say_saved() const {
  if (rank0_)
    log_ << prefix_ << "  successfully saved checkpoint from iteration " << fmt7(p_.iteration) << " to " << base_ << " [ t "
         << c_.tp.rank() + 1 << "/" << c_.tp.size() << ", p " << c_.pp.rank() + 1 << "/" << c_.pp.size() << " ]" << std::endl;
}

}  // namespace

void Checkpointer::save(const Progress& p, bool non_persistent) {
  OneSave save(c_, log_, prefix_, p, non_persistent);
  if (save.skipped_for_frozen_layers()) return;
  save.say_start();
  save.prepare_directory();
  save.write_files();
  save.put_in_place();
  // The checkpoint is in place: a failure from here on leaves it there, with the tracker as it was.
  const std::optional<TrackerValue> previous = save.tracker_before();
  save.update_tracker();
  save.remove_older_non_persistent(np_unremovable_);
  if (!non_persistent) last_saved_ = p.iteration;
  save.say_saved();
  if (!non_persistent && c_.args.save_retain_interval) retain(previous, p.iteration);
}

void Checkpointer::retain(const std::optional<TrackerValue>& previous, int64_t iteration) {
  // Megatron's --save-retain-interval: after the tracker names the new checkpoint, the one it named before goes
  // unless its iteration is a multiple of N (or it is this one, release, 0, or a symbolic link). Rank 0 removes it,
  // the others wait (as in the save). It is first renamed out of Megatron's names (iter_N.removing) and the
  // directory fsynced, so a crash mid-removal never leaves a partial iter_N for a --ckpt-step to load; a leftover
  // .removing directory is removed by the next save that removes one.
  const Args& a = c_.args;
  const int64_t every = *a.save_retain_interval;
  std::string warning;
  if (c_.rt.rank() == 0 && previous && !previous->release && previous->iteration > 0 &&
      previous->iteration != iteration && every > 0 && previous->iteration % every != 0) {
    const std::string old = iteration_dir(*a.save, previous->iteration);
    std::error_code ec;
    if (previous->iteration > iteration) {
      // The tracker named a later checkpoint (a resume with --ckpt-step, or another run's directory): Megatron's
      // rule would remove it, which loses the newest training state; it is left.
      log_ << prefix_ << "  --save-retain-interval: the checkpoint of iteration " << fmt7(previous->iteration) << " at "
           << shown_path(*a.save) << " is newer than the one just saved (" << iteration << "): left in place" << std::endl;
    } else if (std::filesystem::is_symlink(old, ec)) {
      log_ << prefix_ << "  --save-retain-interval: the checkpoint of iteration " << fmt7(previous->iteration) << " at "
           << shown_path(*a.save) << " is a symbolic link: left in place" << std::endl;
    } else if (std::filesystem::is_directory(old, ec)) {
      try {
        for (const auto& e : std::filesystem::directory_iterator(*a.save)) {
          const std::string name = e.path().filename().string();
          if (name.rfind("iter_", 0) == 0 && name.size() > 9 && name.compare(name.size() - 9, 9, ".removing") == 0 &&
              !e.is_symlink())
            remove_tree(e.path().string());
        }
        const std::string doomed = old + ".removing";
        std::filesystem::rename(old, doomed);
        fsync_path(*a.save);
        remove_tree(doomed);
        fsync_path(*a.save);
        log_ << prefix_ << "  deleted checkpoint from iteration " << fmt7(previous->iteration) << " at " << *a.save
             << " (--save-retain-interval " << every << ")" << std::endl;
      } catch (const std::exception& e) {  // the new checkpoint is saved and tracked: an old one left is no failure
        warning = message_of(e);
      }
    }
  }
  if (!warning.empty())
    warn_rule(log_, prefix_, kCkptLeftover,
              "--save " + shown_path(*a.save) + ": the checkpoint of iteration " +
                  std::to_string(previous->iteration) + " could not be removed (" + warning + ")");
  verdict(c_, "");  // the other ranks wait for rank 0
}

}  // namespace mr::run
