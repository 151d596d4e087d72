// --freeze-all-layers in the training run (docs/checkpoints.md, docs/run.md): what Megatron does with the flag at
// the load and the save. Every parameter frozen (its _freeze_all_model_chunks: requires_grad_(False)), so:
//   - the load (checkpointing.py load_checkpoint) sets args.finetune = True: the weights of --load only (no
//     optimizer state, scheduler, RNG state, no check_checkpoint_args), iteration 0, no consumed samples; and
//     unless --override-ckpt-iteration is given, the iteration in --save's own tracker (read_frozen_resume_iteration:
//     0 where there is none, which overrides nothing) becomes --override-ckpt-iteration: the run resumes there, with
//     that iteration x --global-batch-size samples consumed;
//   - the save (save_checkpoint, skip_weight_ckpt) writes neither the checkpoint nor the tracker.
// The loop's part (no gradient, no optimizer update) is in run/train.cpp. Torch-free; internal to lib/run.
#pragma once

#include <cstdint>
#include <optional>

#include "config/args.h"
#include "run/checkpoint_args.h"

namespace mr::run {

// Megatron's read_frozen_resume_iteration(args.save): the iteration --save's tracker names (a regular file, as
// os.path.isfile), 0 without --save, without a tracker, or where it says 'release'. CheckpointError
// checkpoint.corrupt for a tracker that is neither (Megatron's read_metadata stops there). The tracker is read
// through `trackers` (the worker's load: the value its ranks agreed on, run/tracker_agreement.h, as Megatron's
// read_metadata all-reduces it with MAX), or this process's own read where it is null.
int64_t frozen_resume_iteration(const Args& a, const TrackerSource* trackers = nullptr);

// The arguments Megatron's load_checkpoint works with under --freeze-all-layers: `a` with finetune set and, where
// --override-ckpt-iteration is not given and frozen_resume_iteration is above 0, that iteration as
// --override-ckpt-iteration (`from_save`, when not null, gets it then). `a` itself without the flag.
Args frozen_load_args(const Args& a, std::optional<int64_t>* from_save = nullptr,
                      const TrackerSource* trackers = nullptr);

}  // namespace mr::run
