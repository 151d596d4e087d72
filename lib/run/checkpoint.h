// Megatron's checkpointing and exit flags in the training run (docs/checkpoints.md):
//   --save DIR --save-interval N, --non-persistent-save-interval N (--non-persistent-ckpt-type global),
//   --load DIR, --ckpt-step N, --no-load-optim, --no-load-rng, --finetune, --exit-on-missing-checkpoint,
//   --no-save-optim, --save-retain-interval N, --override-ckpt-iteration N, --verify-integrity,
//   --load-main-params-from-ckpt, --exit-interval N, --exit-duration-in-mins M, --exit-signal-handler (--exit-signal).
// Megatron's layout: DIR/latest_checkpointed_iteration.txt, DIR/iter_0000010/ with one file set per rank
// (rank_NNNNN.safetensors + rank_NNNNN.json; run/checkpoint_io.h), written into iter_0000010.tmp, fsynced,
// renamed, then the tracker replaced atomically. Internal to lib/run. Where a checkpoint is: run/checkpoint_locate.h;
// the saved arguments and what a resume takes from them (resume_args, the group hyper-parameters):
// run/checkpoint_resume_args.h.
//
// Knobs for tests (environment):
//   MR_CKPT_PAUSE_IN_SAVE=ITER:SECONDS  every rank sleeps after writing its files of the save at ITER, before
//                                       the rename (prints "checkpoint save paused ... pid P"): a test kills it
//   MR_CKPT_FAIL_IN_SAVE=ITER           the save at ITER fails on rank 0 after writing part of its file, as a
//                                       full disk would
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>

#include "config/args.h"
#include "distributed/runtime.h"
#include "run/atomic_dir.h"
#include "run/checkpoint_format.h"
#include "run/run_context.h"

namespace mr::run {

struct Progress {
  int64_t iteration = 0, consumed_samples = 0, skipped = 0, optimizer_steps = 0;
  int64_t skipped_samples = 0;  // the samples of the iterations --iterations-to-skip skipped (Megatron's
                                // skipped_train_samples)
};

class Checkpointer {
 public:
  // Checks that --save can be written (every rank; CheckpointError checkpoint.save-unwritable on all ranks
  // otherwise) and installs the --exit-signal handler. `given_seed`: the command line's --seed where c.args holds
  // the checkpoint's (resume_args); none: c.args.seed.
  Checkpointer(RunContext& c, std::ostream& log, std::string prefix, std::optional<int64_t> given_seed = std::nullopt);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // --load: restores the buffers, the scheduler and the scaler; the progress to resume from (all zero without
  // a checkpoint).
  Progress load();
  // After an iteration: the interval saves, then the exit conditions; true when the run stops here.
  bool after_iteration(const Progress& p);
  // At the top of an iteration whose number of micro-batches differs from the previous one's (running global batch
  // `from` -> `to`): Megatron's train loop saves the checkpoint of the iteration just run (p), when --save is set,
  // whatever --save-interval is.
  void on_microbatch_change(const Progress& p, int64_t from, int64_t to);
  // After the last iteration: Megatron's final save (unless the last interval save wrote it).
  void at_end(const Progress& p);
  // One save, every rank together; CheckpointError checkpoint.save-failed on every rank when any rank fails (the
  // previous checkpoint and the tracker are untouched).
  void save(const Progress& p, bool non_persistent);

 private:
  // --save-retain-interval after the persistent save of `iteration`: removes the checkpoint `previous` (the
  // tracker's iteration before that save) unless it is to be kept.
  void retain(const std::optional<TrackerValue>& previous, int64_t iteration);
  RunContext& c_;
  std::ostream& log_;
  std::string prefix_;
  std::chrono::steady_clock::time_point start_;
  int64_t last_saved_ = -1;  // the last persistent save (the final save is persistent, as Megatron's)
  int64_t given_seed_;  // --seed as given (the RNG notice of a load under another (TP, PP))
  std::unique_ptr<DirLock> save_lock_;  // rank 0's lock on --save for the run: one run saves there at a time
  std::unique_ptr<DirLock> np_lock_;    // and on the non-persistent directory, with --non-persistent-save-interval
  // Rank 0: the older non-persistent checkpoints whose removal failed and was warned about (once each).
  std::set<std::string> np_unremovable_;
};

}  // namespace mr::run
