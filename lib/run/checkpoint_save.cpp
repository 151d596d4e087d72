// Checkpointer::save (run/checkpoint.h): one save, every rank together, in steps (the directory cleared, each
// rank's files written, rank 0's rename into place, the tracker, the non-persistent clean-up), and
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

}  // namespace

void Checkpointer::save(const Progress& p, bool non_persistent) {
  const Args& a = c_.args;
  const bool rank0 = c_.rt.rank() == 0;
  const std::string base = non_persistent ? non_persistent_dir(a, *a.save) : *a.save;
  const std::string final_dir = iteration_dir(base, p.iteration), tmp = final_dir + ".tmp";
  // --freeze-all-layers: Megatron's save_checkpoint (skip_weight_ckpt) writes neither the checkpoint nor the tracker
  // (only a --logits-save-dir dump records its progress in the tracker, which the synthetic run does not make).
  if (a.freeze_all_layers) {
    if (rank0)
      log_ << prefix_ << "saving " << (non_persistent ? "non-persistent " : "") << "checkpoint at iteration "
           << fmt7(p.iteration) << " to " << base << ": nothing written (--freeze-all-layers: Megatron's "
           << "save_checkpoint writes no weights and no tracker when every layer is frozen)" << std::endl;
    return;
  }
  if (rank0)
    log_ << prefix_ << "saving " << (non_persistent ? "non-persistent " : "") << "checkpoint at iteration "
         << fmt7(p.iteration) << " to " << base << " in megatron-run's safetensors format" << std::endl;
  std::string err;
  bool in_place = false;  // rank 0's replace_dir put the new iter_N in place (step 3)
  // A failure after the rename travels to every rank with this mark before its text (only rank 0 renames).
  static constexpr char kPlaced = '\x1d';
  auto step = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      err = (in_place ? std::string(1, kPlaced) : std::string()) + message_of(e);
    }
    const Verdict v = verdict(c_, err);
    if (v.rank < 0) return;
    const std::string what = save_dir_words(a, non_persistent) + ": the " + (non_persistent ? "non-persistent " : "") +
                             "checkpoint of iteration " + std::to_string(p.iteration);
    std::string why = err.empty() ? v.error : err;
    const bool placed = !why.empty() && why[0] == kPlaced;
    if (placed) why.erase(0, 1);
    if (err.empty()) why = "rank " + std::to_string(v.rank) + ": " + why;
    if (placed)  // tmp now holds the previous iter_N, if there was one: left for the next save to clear
      throw CheckpointError(kCkptSaveFailed, what + " was put in place at " + final_dir + ", but the save did not "
                                                 "complete (" + why + "); the tracker " + tracker_path(base) +
                                                 " was not updated");
    if (rank0) {
      std::error_code ec;
      std::filesystem::remove_all(tmp, ec);
    }
    // Nothing this save did is left: it stopped before its rename (what another process did is not ours to vouch
    // for: "unchanged" would claim it).
    throw CheckpointError(kCkptSaveFailed,
                          what + " was not written (" + why + "); this save changed neither the previous checkpoint "
                                 "nor the tracker");
  };
  std::string stale_note;  // rank 0: a stale iter_N.tmp that could only be moved aside
  std::vector<std::string> others_removed, others_left;  // rank 0: other iterations' stale iter_M.tmp
  step([&] {
    if (!rank0) return;
    std::error_code ec;
    std::filesystem::create_directories(base, ec);
    if (ec) throw CheckpointError(kCkptSaveFailed, base + ": cannot create the directory: " + ec.message());
    stale_note = clear_stale_dir(tmp);
    // The iter_M.tmp of other iterations, left by saves that were interrupted (this run holds the directory's lock:
    // no other run is writing one): removed, and named; one that cannot be removed is a warning, not a failure.
    for (const auto& e : std::filesystem::directory_iterator(base)) {
      const std::string name = e.path().filename().string();
      const bool stale_tmp = name.size() > 9 && name.rfind("iter_", 0) == 0 &&
                             name.compare(name.size() - 4, 4, ".tmp") == 0 &&
                             name.find_first_not_of("0123456789", 5) == name.size() - 4;
      if (!stale_tmp || e.is_symlink() || !e.is_directory() || e.path().string() == tmp) continue;
      try {
        remove_tree(e.path().string());
        others_removed.push_back(name);
      } catch (const std::exception& x) {
        others_left.push_back(message_of(x));
      }
    }
    if (!others_removed.empty()) fsync_path(base);
    std::filesystem::create_directories(tmp);
    fsync_path(base);
  });
  if (!stale_note.empty())
    warn_rule(log_, prefix_, kCkptLeftover, save_dir_words(a, non_persistent) + ": " + stale_note);
  if (!others_removed.empty()) {
    std::string names;
    for (const std::string& n : others_removed) names += (names.empty() ? "" : ", ") + n;
    log_ << prefix_ << "notice: " << save_dir_words(a, non_persistent) << ": removed " << names
         << " (left by an interrupted save; never a complete checkpoint)" << std::endl;
  }
  for (const std::string& why : others_left)
    warn_rule(log_, prefix_, kCkptLeftover,
              save_dir_words(a, non_persistent) + ": a stale directory of an interrupted save could not be removed (" +
                  why + "); it is left there");
  step([&] {
    RankMeta m;
    m.iteration = p.iteration;
    m.consumed_samples = p.consumed_samples;
    m.skipped_iterations = p.skipped;
    m.skipped_train_samples = p.skipped_samples;
    m.optimizer_steps = p.optimizer_steps;
    m.world_size = c_.rt.world_size();
    m.rank = c_.rt.rank();
    const auto& L = c_.rt.layout();
    RankLayout rl;
    rl.tp = L.spec.tp;
    rl.pp = L.spec.pp;
    rl.cp = L.spec.cp;
    rl.dp = c_.dp.size();
    rl.ep = L.spec.ep;
    rl.etp = c_.etp.size();
    rl.expert_dp = c_.edp.size();
    rl.tp_rank = c_.tp.rank();
    rl.pp_rank = c_.pp.rank();
    rl.dp_rank = c_.dp.rank();
    rl.ep_rank = c_.rt.group("ep").rank();
    rl.etp_rank = c_.etp.rank();
    rl.expert_dp_rank = c_.edp.rank();
    rl.shard_lo = static_cast<int64_t>(c_.buf.lo);
    rl.shard_hi = static_cast<int64_t>(c_.buf.hi);
    rl.expert_shard_lo = static_cast<int64_t>(c_.buf.elo);
    rl.expert_shard_hi = static_cast<int64_t>(c_.buf.ehi);
    m.layout = rl.to_value();
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
    m.args = args_json(a, c_.cfg);
    // The buffers' values on the host while the files are written (nothing to copy for the CPU backend).
    c_.backend->to_host(c_.buf);
    struct Release {
      RunContext& c;
      ~Release() { c.backend->release_host(c.buf); }
    } release{c_};
    const RankSave s = collect_pieces(c_.plan, c_.buf, place_of(c_), !a.no_save_optim.value_or(false));
    if (auto f = knob("MR_CKPT_FAIL_IN_SAVE"); f && f->first == p.iteration && rank0) {
      const std::vector<TensorOut> half(s.tensors.begin(), s.tensors.begin() + static_cast<std::ptrdiff_t>(s.tensors.size() / 2));
      write_safetensors(tmp + "/" + rank_stem(0) + ".safetensors", half);
      throw CheckpointError(kCkptSaveFailed, tmp + "/" + rank_stem(0) + ".safetensors: write failed: simulated (MR_CKPT_FAIL_IN_SAVE)");
    }
    write_rank_files(tmp, m, s);
    if (auto k = knob("MR_CKPT_PAUSE_IN_SAVE"); k && k->first == p.iteration) {
      std::cout << prefix_ << "megatron-run: checkpoint save of iteration " << p.iteration << " paused for " << k->second
                << " s (MR_CKPT_PAUSE_IN_SAVE), pid " << ::getpid() << std::endl;
      std::this_thread::sleep_for(std::chrono::duration<double>(k->second));
    }
  });
  std::string leftover;  // rank 0: the previous iter_N, swapped out, that could not be removed
  step([&] {
    if (!rank0) return;
    // --verify-integrity: the SHA-256 of every file, once all ranks wrote theirs (Megatron's integrity.json).
    if (a.verify_integrity) write_integrity_manifest(tmp);
    fsync_path(tmp);
    leftover = replace_dir(tmp, final_dir, in_place);
  });
  // The new checkpoint is in place; a previous copy of this iteration that could not be removed is said, and the
  // next save of the iteration moves it aside (clear_stale_dir).
  if (!leftover.empty())
    warn_rule(log_, prefix_, kCkptLeftover, save_dir_words(a, non_persistent) + ": " + leftover);
  // The checkpoint is in place: a failure from here on leaves it there, with the tracker as it was.
  // --save-retain-interval: the iteration the tracker named before this save (Megatron reads it back first).
  std::optional<TrackerValue> previous;
  if (rank0 && !non_persistent && a.save_retain_interval) try {
      previous = read_tracker(tracker_path(base));
    } catch (const std::exception&) {
    }
  std::string tracker_err;
  try {
    if (rank0) write_file_atomic(tracker_path(base), std::to_string(p.iteration));
  } catch (const std::exception& e) {
    tracker_err = message_of(e);
  }
  if (const Verdict v = verdict(c_, tracker_err); v.rank >= 0) {
    std::optional<TrackerValue> was;
    try {
      was = read_tracker(tracker_path(base));
    } catch (const std::exception&) {
    }
    if (was && !was->release && was->iteration == p.iteration)  // renamed into place; only the last fsync failed
      throw CheckpointError(kCkptSaveFailed,
                            save_dir_words(a, non_persistent) + ": the checkpoint of iteration " + std::to_string(p.iteration) +
                                " was written to " + final_dir + " and the tracker names it, but making the "
                                "tracker's update durable failed (" + (tracker_err.empty() ? v.error : tracker_err) +
                                "); a power loss now could leave the tracker on the previous checkpoint");
    throw CheckpointError(kCkptSaveFailed,
                          save_dir_words(a, non_persistent) + ": the checkpoint of iteration " + std::to_string(p.iteration) +
                              " was written to " + final_dir + ", but the tracker " + tracker_path(base) +
                              " could not be updated (" + (tracker_err.empty() ? v.error : tracker_err) + "); " +
                              (was ? "it still names " + (was->release ? std::string("release") : "iteration " + std::to_string(was->iteration))
                                   : std::string("there is no tracker")) +
                              ", so a --load of " + base + " does not take the new checkpoint");
  }
  if (rank0 && non_persistent) {
    // Only the newest non-persistent checkpoint is kept. Megatron's cleanup_old_non_persistent_checkpoint runs
    // before its save and keeps the highest-numbered one, so two are there after each save; here the clean-up
    // follows the tracked save, and one is. The new one is saved and tracked: an older one that cannot be removed is no failure. Each is tried at every save, the
    // others still removed past it, and warned about once. Only Megatron's names (iter_ and digits) are ours to
    // remove: an iter_N.tmp, .tmp.stale-K or .old leftover is the stale-directory clearing's, which said it.
    std::vector<std::string> failed;
    try {
      for (const auto& e : std::filesystem::directory_iterator(base)) {
        const std::string name = e.path().filename().string();
        const bool iteration_dir_name = name.size() > 5 && name.rfind("iter_", 0) == 0 &&
                                        name.find_first_not_of("0123456789", 5) == std::string::npos;
        if (!iteration_dir_name || e.path().string() == final_dir || !e.is_directory()) continue;
        try {
          remove_tree(e.path().string());
          np_unremovable_.erase(name);
        } catch (const std::exception& x) {
          if (np_unremovable_.insert(name).second)
            failed.push_back(message_of(x) + "); it is left there, tried again at each save and not said again");
        }
      }
      fsync_path(base);
    } catch (const std::exception& e) {  // the directory itself could not be listed or synced
      failed.push_back(message_of(e) + ")");
    }
    for (const std::string& why : failed)
      warn_rule(log_, prefix_, kCkptLeftover,
                save_dir_words(a, true) + ": an older non-persistent checkpoint in " + base + " could not be removed (" +
                    why);
  }
  if (!non_persistent) last_saved_ = p.iteration;
  if (rank0)
    log_ << prefix_ << "  successfully saved checkpoint from iteration " << fmt7(p.iteration) << " to " << base << " [ t "
         << c_.tp.rank() + 1 << "/" << c_.tp.size() << ", p " << c_.pp.rank() + 1 << "/" << c_.pp.size() << " ]" << std::endl;
  if (!non_persistent && a.save_retain_interval) retain(previous, p.iteration);
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
