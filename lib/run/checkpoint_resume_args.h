// The saved arguments and what a resume takes from them, for the Checkpointer (run/checkpoint.h) and the run
// (train.cpp): the arguments a save writes (every dest, with the optimizer's group hyper-parameters it stepped
// with), the group hyper-parameters a load restores from them (kGroupHyper: Megatron's optimizer.load_state_dict
// restores the saved param groups), and the seed a resume continues with. Internal to lib/run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/args.h"
#include "config/optimizer_config.h"
#include "config/value.h"

namespace mr::run {

// The arguments the run uses: `args`, with --seed replaced by the checkpoint's when --load restores its RNG state
// (the synthetic data's generator is keyed by the seed): not with --finetune, --no-load-rng, a fine-tune or release
// checkpoint, one saved with --no-save-rng, nor under another (TP, PP) than the checkpoint's, where Megatron's
// load ignores the RNG state and keeps --seed.
Args resume_args(const Args& args);

// A checkpoint's (TP, PP) sizes from its "layout": a size the layout lacks counts as 1, as Megatron's default for
// checkpoint arguments without it (getattr(state_dict['args'], 'tensor_model_parallel_size', 1)).
std::pair<int64_t, int64_t> checkpoint_tp_pp(const Value& layout);
// Whether a checkpoint's "layout" has this run's TP and PP sizes (Megatron's ckpt_tp_pp == run_tp_pp, with
// checkpoint_tp_pp's sizes).
bool same_tp_pp(const Value& layout, const Args& a);

// The member `k` of the JSON object `o` (a checkpoint's saved arguments, layout, scheduler, scaler); none when `o`
// is no object or has no such member.
const Value* field_of(const Value& o, const char* k);
// The saved argument `id` of a checkpoint's "args" (dest -> value), by the typed id (a renamed dest does not
// compile); none when `saved_args` is no object or lacks it.
const Value* saved_arg(const Value& saved_args, ArgId id);

// The saved arguments: this run's, with the group hyper-parameters its optimizer stepped with (after a load, the
// checkpoint's: the next resume takes them from here, as Megatron's from the saved param groups).
Value args_json(const Args& a, const OptimizerConfig& cfg);

// A group hyper-parameter a load changed: the command line's value and the checkpoint's.
struct HyperChange {
  ArgId id;
  Value given, saved;
};

// Puts the checkpoint's values (its saved arguments at `path`) of the group hyper-parameters this run's optimizer
// uses into `cfg`; returns those that differ from the command line's. A checkpoint without one keeps this run's.
// CheckpointError checkpoint.corrupt for a saved value of the wrong type.
std::vector<HyperChange> take_saved_hyper(OptimizerConfig& cfg, const Args& a, const Value& saved_args,
                                          const std::string& path);

// Rank 0's notice after a load that changed them: each flag, its value here and the checkpoint's.
std::string hyper_notice(const std::string& load, const std::vector<HyperChange>& changes);

}  // namespace mr::run
