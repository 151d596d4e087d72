// Where a run's checkpoints are, for the Checkpointer (run/checkpoint.h): the checkpoint --load names (Megatron's
// _load_base_checkpoint through locate_checkpoint, run/checkpoint_args.h), the directory of the non-persistent
// saves and how a message names a save's directory, the directories a non-persistent save must not share, and
// the hint for a --load that names one iteration's directory. Torch-free; internal to lib/run.
#pragma once

#include <optional>
#include <string>

#include "config/args.h"
#include "run/checkpoint_args.h"

namespace mr::run {

// The checkpoint a run loads: where it is, and whether it is --pretrained-checkpoint's, taken because --load holds
// none (Megatron's load_checkpoint then sets args.finetune: weights only, iteration 0, no optimizer state, RNG or
// argument check).
struct Found : CheckpointPlace {
  bool pretrained = false;
  // How a message names the directory it came from: "--load DIR" or "--pretrained-checkpoint DIR".
  std::string flag_words() const;
};

// The directory of the non-persistent saves of a run that saves to `base`: --non-persistent-global-ckpt-dir, else
// default_non_persistent_dir(base).
std::string non_persistent_dir(const Args& a, const std::string& base);

// How a message names the directory a save writes to: the flag that gave it.
std::string save_dir_words(const Args& a, bool non_persistent);

// Whether two directory paths name one directory: the same file where both exist (std::filesystem::equivalent: a
// bind mount too), else the same resolved path ("./d", "d/.", "d/", a link to d, before d exists).
bool same_directory(const std::string& a, const std::string& b);

// Non-persistent saves keep only the newest iter_N of their directory (Megatron's
// cleanup_old_non_persistent_checkpoint): that directory must be none the run reads its checkpoint from (--load,
// --pretrained-checkpoint), or the first non-persistent save removes it: CheckpointError checkpoint.unsupported.
void refuse_np_dir_on_load(const Args& a);

// --load that is one iteration's directory of a checkpoint (it holds rank_00000.json: iter_0000020, release)
// rather than the checkpoint's directory: " (... give its parent ...)", with --ckpt-step N where the parent's
// tracker names another iteration; "" for any other directory.
std::string iteration_dir_hint(const std::string& load);

// Megatron's load_checkpoint up to _load_base_checkpoint (run/checkpoint_args.h): the checkpoint --load names;
// where --load has no tracker file (Megatron's checkpoint_exists) and --pretrained-checkpoint P is given, P's,
// marked `pretrained` (a fine-tune), with rank 0's "attempting to finetune" line left to the caller; none without
// --load and --pretrained-checkpoint, or without a tracker under --load. CheckpointError
// checkpoint.pretrained-missing when P has no tracker either (Megatron's FileNotFoundError "No checkpoint found in
// load directory or pretrained directory"). The trackers are read through `trackers` (the ranks' agreed reads,
// run/tracker_agreement.h), or this process's own reads where it is null.
std::optional<Found> locate(const Args& a, const TrackerSource* trackers = nullptr);

// How a message names where the run loads from before it knows which: --load, or --pretrained-checkpoint alone.
std::string load_words(const Args& a);

// Whether a checkpoint's saved arguments (rank 0's "args") say it was saved with --no-save-rng: it holds no RNG
// state (Megatron leaves rng_state out), so a load keeps this run's --seed.
bool saved_without_rng(const Value& saved_args);

// Whether the load restores the checkpoint's RNG state (its seed here): not with --finetune (--freeze-all-layers,
// which makes the load a fine-tune), --no-load-rng, from a
// release checkpoint or a --pretrained-checkpoint fine-tune (and not from a --no-save-rng checkpoint:
// saved_without_rng, asked once its metadata is read).
bool loads_rng(const Args& a, const Found& f);

}  // namespace mr::run
