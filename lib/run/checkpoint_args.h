// Which checkpoint a --load names, and Megatron's --use-checkpoint-args over a megatron-run checkpoint
// (docs/checkpoints.md), without LibTorch: the launcher applies it to the parsed arguments before validation.
//
// Megatron (training/arguments.py parse_and_validate_args, training/checkpointing.py load_args_from_checkpoint):
// after argparse and before validate_args, with --use-checkpoint-args, the arguments saved in the checkpoint of
// --pretrained-checkpoint, then of --load, replace a fixed list of model-defining arguments. Some of them only
// when the command line left them None (num_layers, hidden_size, ...: a value given on the command line wins),
// the others whenever the checkpoint has a value (num_query_groups, swiglu, normalization, ...); with
// --use-mp-args-from-checkpoint-args also the model-parallel sizes. No checkpoint there: a notice and the
// command line's values, or, with --exit-on-missing-checkpoint, an exit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/namespace.h"
#include "config/value.h"
#include "run/checkpoint_format.h"

namespace mr::run {

// Where a checkpoint is: the directory of its iteration (`dir`), the directory holding the tracker (`base`: the
// load directory or its non-persistent one), the iteration, whether it is a release checkpoint.
struct CheckpointPlace {
  std::string dir, base;
  int64_t iteration = 0;
  bool release = false;
};

// The tracker file at `path`: nullopt when there is no such regular file; CheckpointError checkpoint.corrupt
// naming it when its text is not an iteration or 'release'.
std::optional<TrackerValue> read_tracker(const std::string& path);

// How a checkpoint's tracker is read where the checkpoint is located (locate_checkpoint, run/checkpoint_locate.h's
// locate): by default this process's own read of the file. The worker's load reads every tracker once on every rank
// and gives the value the ranks agreed on instead (run/tracker_agreement.h: Megatron's read_metadata, whose
// iteration is all-reduced with MAX).
struct TrackerSource {
  virtual ~TrackerSource() = default;
  // Whether `dir` has a tracker file (Megatron's os.path.isfile), whatever its text.
  virtual bool exists(const std::string& dir) const;
  // `dir`'s tracker as read_tracker reads it (nullopt: none). `note`, when not null, gets what a message naming the
  // value adds ("" unless the value is not the one this rank read in the file).
  virtual std::optional<TrackerValue> read(const std::string& dir, std::string* note = nullptr) const;
};

// What locate_checkpoint reads: the directory and the flags that choose the iteration.
struct LoadQuery {
  std::string load;                            // --load (or --pretrained-checkpoint)
  std::string flag = "--load";                 // the flag that gave it, for messages
  int64_t ckpt_step = 0;                       // --ckpt-step; 0 is Megatron's "not given"
  bool non_persistent_global = false;          // --non-persistent-ckpt-type global
  std::optional<std::string> non_persistent_dir;  // --non-persistent-global-ckpt-dir
  const TrackerSource* trackers = nullptr;     // how the trackers are read; null: TrackerSource's own reads
};

// Megatron's default non-persistent directory: `base`/non_persistent, without a doubled separator where `base` ends
// in '/' ("np/" -> "np/non_persistent"); "non_persistent" for an empty base.
std::string default_non_persistent_dir(const std::string& base);

// Megatron's _load_base_checkpoint: the tracker (or --ckpt-step), or a global non-persistent checkpoint at least
// as new. nullopt when there is none (no tracker, no step). CheckpointError checkpoint.step-missing when the
// iteration named has no directory, checkpoint.corrupt for a tracker that is not a number.
std::optional<CheckpointPlace> locate_checkpoint(const LoadQuery& q);

// One argument --use-checkpoint-args replaced: its dest, the value before and the checkpoint's.
struct ArgChange {
  std::string dest;
  Value before, after;
};

// Megatron's override list over `ns` from `saved` (a checkpoint's "args": dest -> value), with Megatron's
// conditions (see the top of this file). `file` is the metadata file they come from: every value set records
// "--use-checkpoint-args: FILE" as its provenance, and a value the parser could not have stored for its argument
// (another JSON type, not one of its choices: config/arg_fit.h) is CheckpointError checkpoint.corrupt naming the
// file and the argument. Returns the arguments whose value changed, in Megatron's order.
std::vector<ArgChange> override_from_checkpoint_args(Namespace& ns, const Value& saved, const std::string& file);

// What --use-checkpoint-args did with one directory (--pretrained-checkpoint or --load).
struct CheckpointArgsResult {
  std::string flag;          // "--load" or "--pretrained-checkpoint"
  std::string dir;           // the directory given
  std::string file;          // the metadata file read; empty when there is no checkpoint there
  std::vector<ArgChange> changed;
  std::string missing_tracker;  // no checkpoint: the tracker that is not there
};

// Megatron's parse_and_validate_args step for --use-checkpoint-args on a parsed namespace: nothing unless
// use_checkpoint_args is set; then --pretrained-checkpoint, then --load (each when set), read from rank 0's
// metadata file of the checkpoint locate_checkpoint finds. CheckpointError checkpoint.missing when there is no
// checkpoint and --exit-on-missing-checkpoint is set; checkpoint.corrupt naming the metadata file that cannot be
// read or parsed; checkpoint.step-missing as locate_checkpoint.
std::vector<CheckpointArgsResult> apply_checkpoint_args(Namespace& ns);

// The notice for one result: the arguments taken from the checkpoint (dest: before -> after) and its file, or
// that there is no checkpoint and the command line's values stay.
std::string checkpoint_args_notice(const CheckpointArgsResult& r);

}  // namespace mr::run
