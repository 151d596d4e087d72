// Megatron's checkpointing and exit flags in the training run (run/checkpoint.h): the Checkpointer's set-up
// (--save checked and locked), the exit conditions and when a save is due; the save itself in checkpoint_save.cpp,
// the load in checkpoint_load.cpp, the helpers they share (checkpoint_shared.h) here.
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

namespace ckpt_detail {

// The message of an exception, without a CheckpointError's "[id] " (its id travels apart).
std::string message_of(const std::exception& e) {
  return dynamic_cast<const CheckpointError*>(&e) ? without_rule_id(e.what()) : std::string(e.what());
}

// A warning of the checkpoint code (a Warning rule of checkpoint_format.h): "PREFIX warning[ID]: text".
void warn_rule(std::ostream& log, const std::string& prefix, const Rule& rule, const std::string& text) {
  log << prefix << rule_heading("warning", rule.id, text) << std::endl;
}

Verdict verdict(RunContext& c, const std::string& error) {
  distributed::Group& world = c.rt.group("world");
  const int64_t size = c.rt.world_size();
  double v = error.empty() ? 0.0 : static_cast<double>(size - c.rt.rank());
  host_all_reduce(world, distributed::Buffer::cpu(&v, 1), distributed::ReduceOp::Max);
  if (v <= 0) return {};
  const int64_t bad = size - static_cast<int64_t>(v);
  constexpr size_t kErrorBytes = 4096;  // every rank prints the failed rank's message: whole, in practice
  std::vector<char> text(kErrorBytes, '\0');
  std::memcpy(text.data(), error.data(), std::min(error.size(), kErrorBytes - 1));  // read on `bad` only
  host_broadcast(world, {text.data(), text.size(), distributed::DType::U8, distributed::Device::Cpu},
                 static_cast<int>(bad));
  return {bad, std::string(text.data())};
}

RankPlace place_of(RunContext& c) {
  RankPlace p;
  p.tp_rank = c.tp.rank();
  p.etp_rank = c.etp.rank();
  p.tp_size = c.tp.size();
  p.etp_size = c.etp.size();
  p.model_writer = c.dp.rank() == 0;
  p.expert_model_writer = c.edp.rank() == 0;
  p.tp_first = c.tp.rank() == 0;
  p.etp_first = c.etp.rank() == 0;
  return p;
}

std::string dtype_name(const RunContext& c) {
  return c.buf.model_dtype == optim::DType::F32 ? "fp32" : c.cfg.bf16 ? "bf16" : "fp16";
}

}  // namespace ckpt_detail

using namespace ckpt_detail;

namespace {


// Whether this process's Checkpointer installed the --exit-signal latch (and so puts the old handler back); the
// worker installs it before its bring-up (distributed/worker.cpp), and then it stays for the process.
bool g_installed_here = false;

}  // namespace

Checkpointer::Checkpointer(RunContext& c, std::ostream& log, std::string prefix, std::optional<int64_t> given_seed)
    : c_(c),
      log_(log),
      prefix_(std::move(prefix)),
      start_(std::chrono::steady_clock::now()),
      given_seed_(given_seed.value_or(static_cast<int64_t>(c.args.seed))) {
  const Args& a = c.args;
  const bool rank0 = c.rt.rank() == 0;
  // What the launcher refused before starting us (save_settings_refusal), checked again on every rank.
  if (std::optional<SaveSettingsRefusal> r = save_settings_refusal(a)) throw CheckpointError(*r->rule, r->message);
  // The non-persistent clean-up keeps the newest iter_N of its directory and removes every other (Megatron's
  // too): pointed at --save itself, it would remove the persistent checkpoints there.
  // Compared before either directory is created (a job's first run), whatever the spelling (same_directory).
  if (a.save && a.non_persistent_save_interval && *a.non_persistent_save_interval > 0) {
    if (same_directory(non_persistent_dir(a, *a.save), *a.save))
      throw CheckpointError(kCkptUnsupported,
                            "--non-persistent-global-ckpt-dir " + shown_path(non_persistent_dir(a, *a.save)) +
                                " is the --save directory: each non-persistent save keeps only the newest checkpoint "
                                "of its directory, so it would remove the persistent ones; give another directory "
                                "(without the flag: " + shown_path(default_non_persistent_dir(*a.save)) + ")");
    refuse_np_dir_on_load(a);
  }
  // --skip-train saves nothing (Megatron neither trains nor makes its final save): --save is not touched at all.
  if (a.save && !a.skip_train) {
    std::string why = probe_writable(*a.save, ".megatron-run-probe-rank" + std::to_string(c.rt.rank()));
    const Verdict v = verdict(c, why);
    if (v.rank >= 0)
      throw CheckpointError(kCkptSaveUnwritable,
                            "--save " + shown_path(*a.save) + " cannot be written" +
                                (why.empty() ? " on rank " + std::to_string(v.rank) + ": " + v.error : ": " + why) +
                                " (checked before training starts)");
    // Two runs saving to one directory would swap each other's files in (the temporary iter_N.tmp is shared):
    // the directory is this run's while it runs.
    std::string busy, unlockable;
    if (rank0) save_lock_ = std::make_unique<DirLock>(*a.save, ".megatron-run.lock", busy, unlockable);
    if (!unlockable.empty())  // a file system without flock: the save works, only the guard is missing
      warn_rule(log_, prefix_, kCkptNoLock,
                "--save " + shown_path(*a.save) + ": no lock against another run saving there too (" + unlockable + ")");
    const Verdict b = verdict(c, busy);
    if (b.rank >= 0)
      throw CheckpointError(kCkptSaveBusy, "--save " + shown_path(*a.save) + ": another run is saving to this directory (" +
                                               (busy.empty() ? b.error : busy) +
                                               "); two runs saving to one directory would overwrite each other's "
                                               "checkpoints (checked before training starts)");
    // The non-persistent directory too, with the same lock file: a run that writes there (as its --save or as its
    // non-persistent directory) removes every other iter_N in it and rewrites its tracker.
    if (a.non_persistent_save_interval && *a.non_persistent_save_interval > 0) {
      const std::string np = non_persistent_dir(a, *a.save);
      // Checked as --save is (after --save's lock: a refused run makes nothing in another run's directory).
      why = probe_writable(np, ".megatron-run-probe-rank" + std::to_string(c.rt.rank()));
      const Verdict w = verdict(c, why);
      if (w.rank >= 0)
        throw CheckpointError(kCkptSaveUnwritable,
                              save_dir_words(a, true) + " cannot be written" +
                                  (why.empty() ? " on rank " + std::to_string(w.rank) + ": " + w.error : ": " + why) +
                                  " (checked before training starts)");
      busy.clear();
      unlockable.clear();
      if (rank0) np_lock_ = std::make_unique<DirLock>(np, ".megatron-run.lock", busy, unlockable);
      if (!unlockable.empty())
        warn_rule(log_, prefix_, kCkptNoLock,
                  save_dir_words(a, true) + ": no lock against another run saving there too (" + unlockable + ")");
      const Verdict n = verdict(c, busy);
      if (n.rank >= 0)
        throw CheckpointError(kCkptSaveBusy, save_dir_words(a, true) + ": another run is saving to this directory (" +
                                                 (busy.empty() ? n.error : busy) +
                                                 ", as its --save or its non-persistent directory); its non-persistent "
                                                 "saves would remove that run's checkpoints there (checked before "
                                                 "training starts)");
    }
    if (a.async_save && rank0)
      log_ << prefix_ << "notice: --async-save: megatron-run writes its checkpoints synchronously" << std::endl;
  }
  // --exit-signal-handler: a signal latched since the worker installed the latch (before its bring-up, as Megatron
  // installs its handler at argument parsing) is kept, and acted on after the first iteration.
  if (a.exit_signal_handler && util::exit_signal_installed() != static_cast<int>(a.exit_signal))
    g_installed_here = util::install_exit_signal(static_cast<int>(a.exit_signal));
}

Checkpointer::~Checkpointer() {
  if (g_installed_here) util::restore_exit_signal();
  g_installed_here = false;
}

bool Checkpointer::after_iteration(const Progress& p) {
  const Args& a = c_.args;
  const bool rank0 = c_.rt.rank() == 0;
  const int64_t it = p.iteration;
  if (a.exit_signal_handler) {
    double f = util::exit_signal_pending() ? 1.0 : 0.0;
    host_all_reduce(c_.rt.group("world"), distributed::Buffer::cpu(&f, 1), distributed::ReduceOp::Max);
    if (f > 0) {
      if (a.save) save(p, false);
      if (rank0)
        // Megatron's words, whatever --exit-signal names.
        log_ << prefix_ << "exiting program after receiving SIGTERM." << std::endl;
      return true;
    }
  }
  bool saved = false;
  if (a.save && a.save_interval && *a.save_interval > 0 && it % *a.save_interval == 0) {
    save(p, false);
    saved = true;
  } else if (a.save && a.non_persistent_save_interval && *a.non_persistent_save_interval > 0 &&
             it % *a.non_persistent_save_interval == 0) {
    save(p, true);
    saved = true;
  }
  if (a.exit_duration_in_mins && *a.exit_duration_in_mins > 0) {
    // MR_RUN_MINUTE_S: the seconds of one such minute (tests; default 60).
    static const double minute_s = [] {
      const char* v = std::getenv("MR_RUN_MINUTE_S");
      const double s = v ? std::strtod(v, nullptr) : 0.0;
      return s > 0 && std::isfinite(s) ? s : 60.0;
    }();
    const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / minute_s;
    double f = minutes > static_cast<double>(*a.exit_duration_in_mins) ? 1.0 : 0.0;
    host_all_reduce(c_.rt.group("world"), distributed::Buffer::cpu(&f, 1), distributed::ReduceOp::Max);
    if (f > 0) {
      if (a.save && !saved) save(p, false);
      if (rank0) log_ << prefix_ << "exiting program after " << minutes << " minutes" << std::endl;
      return true;
    }
  }
  // --exit-interval, or one of --phase-transition-iterations: Megatron's train loop saves (unless this iteration
  // just did) and exits there, so that the next phase starts from that checkpoint.
  const bool transition = a.phase_transition_iterations &&
                          std::find(a.phase_transition_iterations->begin(), a.phase_transition_iterations->end(), it) !=
                              a.phase_transition_iterations->end();
  if ((a.exit_interval && *a.exit_interval > 0 && it % *a.exit_interval == 0) || transition) {
    if (a.save && !saved) save(p, false);
    if (rank0) log_ << prefix_ << "exiting program at iteration " << it << std::endl;
    return true;
  }
  return false;
}

void Checkpointer::on_microbatch_change(const Progress& p, int64_t from, int64_t to) {
  const Args& a = c_.args;
  if (!a.save) return;
  if (c_.rt.rank() == 0)
    log_ << prefix_ << "the number of micro-batches changes after iteration " << p.iteration << " (global batch " << from
         << " -> " << to << "): saving a checkpoint, as Megatron's train loop does" << std::endl;
  save(p, false);
}

void Checkpointer::at_end(const Progress& p) {
  const Args& a = c_.args;
  if (a.save && p.iteration != 0 && last_saved_ != p.iteration &&
      !(a.save_interval && *a.save_interval > 0 && p.iteration % *a.save_interval == 0))
    save(p, false);
}

}  // namespace mr::run
