// What megatron-run's own training run does with each Megatron flag (lib/run/run_scope.cpp holds the table).
// Torch-free (mr_run_model): the launcher prints the notice before it starts the workers.
//
// Every flag of the schema is either acted on by the run (it reads it and does what it means, or refuses the
// value with a RunError naming it) or has a reason why a synthetic run cannot act on it ("no evaluation in a
// synthetic run"). A flag the user set that the run does not act on is named in one notice at start; none is
// silently ignored. tests/run/run_scope_test.cpp walks the schema: a flag or group that is in neither list
// fails it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/args.h"
#include "config/namespace.h"
#include "config/target_env.h"

namespace mr::run {

// Whether the run acts on a dest.
bool acts_on(ArgId id);
// Why the run does not act on the dest of `group` (the schema's argparse group); nullptr when it does, or when the
// table has no reason for it (a hole the test reports).
const char* why_not_acted_on(ArgId id, std::string_view group);

// Why `--optimizer` (and --muon-scalar-optimizer) of `a` leave an optimizer flag the run acts on unused, as in
// Megatron: --sgd-momentum with adam, the --muon-* flags without Muon, --lion-beta1/2 with --optimizer lion (whose
// Lion takes --adam-beta1/2), the --adam-* flags with sgd. Empty when the flag is used (or is no optimizer flag).
std::string unused_by_optimizer(ArgId id, const Args& a);

// Whether a flag the run does not act on in general changes this job: --seq-length converts
// --step-batch-size-schedule's token thresholds; --fp8-format and --fp8-recipe decide whether Megatron's Adam keeps
// the fp32 masters as remainders (keeps_param_remainders, for the target `env`); --ckpt-format torch makes a
// load (not a fine-tune's) compare TP and PP with the checkpoint's; on a load, --ckpt-format and
// --auto-detect-ckpt-format decide whether the (TP, PP) mismatch notice is printed (tp_pp_mismatch_notice).
bool acts_in_this_job(ArgId id, const Args& a, const TargetEnv& env = {});

// Whether the load is Megatron's torch_dist load, which prints "(TP, PP) mismatch after resume (...): RNG state
// will be ignored" whenever the checkpoint's (TP, PP) is not this run's, whatever else keeps the RNG state from
// loading (--finetune, --no-load-rng, a release or --no-save-rng checkpoint): load_checkpoint reads the checkpoint
// first, and takes its torch_dist branch, with --auto-detect-ckpt-format or --ckpt-format torch_dist or
// fsdp_dtensor (megatron-run's checkpoint counting as a torch_dist one); with --ckpt-format torch or torch_dcp it
// loads without that branch and says nothing.
// (Here, torch-free, as it decides whether --ckpt-format and --auto-detect-ckpt-format act: acts_in_this_job.)
bool tp_pp_mismatch_notice(const Args& a);

// Why a flag the run acts on does nothing in this job, as in Megatron ("set for nothing"): the loss-scale flags
// where no scaler (or a constant one) runs, --lr-wsd-decay-* without --lr-decay-style WSD, --decoupled-min-lr
// without --decoupled-lr, the loading flags without --load, the saving ones without --save. Empty when it acts.
std::string unused_in_this_job(ArgId id, const Args& a);

// Why the run does not act on the value of a flag it acts on: --muon-fp32-matmul-prec low (torch ignores it), --main-params-dtype fp16 in fp32 training (no main
// params), bf16 gradients where Megatron's gradient buffer is another dtype. Empty otherwise.
std::string unmodelled_value(ArgId id, const Args& a);

// The flags the user set in `ns` (a config file or the command line, whatever validation did to the value since:
// Provenance::by_user) that the run does not act on (unless acts_in_this_job), or that the run's optimizer `a` has
// no use for, or that do nothing in this job (unused_in_this_job), or whose value it does not model
// (unmodelled_value), grouped by reason, in schema order: {reason, {"--eval-interval", "--eval-iters"}}.
struct Unacted {
  std::string why;
  std::vector<std::string> flags;
};
std::vector<Unacted> unacted_flags(const Namespace& ns, const Args& a, const TargetEnv& env = {});
// One line for the notice: "megatron-run: notice: the synthetic training run does not act on --eval-interval,
// --eval-iters (no evaluation in a synthetic run); --tensorboard-dir (...)". Empty when there are none.
// The same line for a list unacted_flags returned already (the launcher keeps the list: WorkerInput::noticed).
std::string unacted_notice(const Namespace& ns, const Args& a, const TargetEnv& env = {});
std::string unacted_notice(const std::vector<Unacted>& u);

}  // namespace mr::run
