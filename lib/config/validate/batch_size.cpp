// Batch sizes (seed arguments.py 626-653 of validate_args): the micro batch size must be given and positive,
// the global batch size defaults to one micro batch per batch-parallel replica, and the eval batch sizes
// default to the training ones and must split into whole eval micro batches.
#include <string>

#include "config/validate/section_functions.h"

namespace mr {
namespace {

MR_RULE(kMicroBatchSizeRequired, "batch-size.micro-batch-size-required", "--micro-batch-size must be given.");
MR_RULE(kMicroBatchSizePositive, "batch-size.micro-batch-size-positive", "--micro-batch-size must be greater than 0.");
MR_RULE(kStepScheduleWithGlobalBatchSize, "batch-size.step-schedule-with-global-batch-size",
        "--step-batch-size-schedule and an explicit --global-batch-size are mutually exclusive.");
MR_RULE(kGlobalBatchSizePositive, "batch-size.global-batch-size-positive",
        "The global batch size (given or derived) must be greater than 0.");
MR_RULE(kEvalGlobalBatchSizeDivisible, "batch-size.eval-global-batch-size-divisible",
        "--eval-global-batch-size must be a multiple of --eval-micro-batch-size x the batch-parallel size.");

}  // namespace

namespace section {

void batch_size(Context& ctx) {
  // seed 627-628
  ctx.require(!ctx.is_none("micro_batch_size"), kMicroBatchSizeRequired, "--micro-batch-size is required",
              {"micro_batch_size"});
  const int64_t mbs = ctx.i("micro_batch_size");
  ctx.require(mbs > 0, kMicroBatchSizePositive,
              "--micro-batch-size (" + std::to_string(mbs) + ") must be greater than 0", {"micro_batch_size"});

  // seed 629-635: parse_args() records whether --global-batch-size was on the command line; without that
  // record the current value decides.
  const bool gbs_explicit = ctx.has("_is_global_batch_size_explicitly_specified")
                                ? ctx.on("_is_global_batch_size_explicitly_specified")
                                : !ctx.is_none("global_batch_size");
  if (!ctx.is_none("step_batch_size_schedule") && gbs_explicit)
    ctx.fail(kStepScheduleWithGlobalBatchSize,
             "--step-batch-size-schedule cannot be combined with --global-batch-size: the schedule sets the "
             "global batch size of each step",
             {"step_batch_size_schedule", "global_batch_size"});

  // seed 636-639
  if (ctx.is_none("global_batch_size"))
    ctx.set("global_batch_size",
            Value(ctx.mul(mbs, ctx.i("batch_parallel_size"),
                          "the default --global-batch-size (--micro-batch-size x the batch-parallel size)",
                          {"micro_batch_size", "world_size"})),
            "default: --micro-batch-size x batch_parallel_size");
  const int64_t gbs = ctx.i("global_batch_size");
  ctx.require(gbs > 0, kGlobalBatchSizePositive,
              "the global batch size (" + std::to_string(gbs) + ") must be greater than 0", {"global_batch_size"});

  // seed 641-645
  const bool egbs_default = ctx.is_none("eval_global_batch_size"), embs_default = ctx.is_none("eval_micro_batch_size");
  if (egbs_default) ctx.set("eval_global_batch_size", ctx["global_batch_size"], "default: the global batch size");
  if (embs_default) ctx.set("eval_micro_batch_size", ctx["micro_batch_size"], "default: --micro-batch-size");

  // seed 646-653 (a zero divisor is Python's ZeroDivisionError: a failure all the same)
  const int64_t egbs = ctx.i("eval_global_batch_size");
  const int64_t embs = ctx.i("eval_micro_batch_size");
  const int64_t bps = ctx.i("batch_parallel_size");
  const int64_t unit = ctx.mul(embs, bps, "--eval-micro-batch-size x the batch-parallel size",
                               {"eval_micro_batch_size", "world_size"});
  // Not given, the eval global batch size is the training one: the fix is most likely there (the same size
  // must also split into training micro batches when the ranks start, init.global-batch-size-divisible).
  std::string hint;
  if (egbs_default && unit > 0)
    hint = "; --eval-global-batch-size was not given, so it is the global batch size (--global-batch-size" +
           std::string(gbs_explicit ? "" : ", itself not given") + "): make the global batch size a multiple of " +
           std::to_string(unit) + (embs_default ? " (--micro-batch-size x the batch-parallel size)" : "") +
           ", or give an --eval-global-batch-size that is one";
  ctx.require(unit != 0 && py_mod(egbs, unit) == 0, kEvalGlobalBatchSizeDivisible,
              "--eval-global-batch-size (" + std::to_string(egbs) +
                  (egbs_default ? ", not given: the global batch size" : "") +
                  ") must be divisible by "
                  "--eval-micro-batch-size (" +
                  std::to_string(embs) + (embs_default ? ", not given: --micro-batch-size" : "") +
                  ") x batch-parallel size (" + std::to_string(bps) + ")" + hint,
              {"eval_global_batch_size", "eval_micro_batch_size", "global_batch_size"});
}

}  // namespace section
}  // namespace mr
