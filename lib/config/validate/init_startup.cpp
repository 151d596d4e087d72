// The init stage (init.h): what Megatron's start-up refuses before it builds a model — the global variables
// (set_global_variables, megatron/training/global_vars.py: the number-of-microbatches calculator of
// megatron/core/num_microbatches_calculator.py, then the exit signal handler) and the random seeds
// (initialize_megatron's _set_random_seed, megatron/training/initialize.py).
#include <optional>
#include <string>

#include "config/step_batch_schedule.h"

#include "config/validate/init.h"
#include "config/validate/python.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kGlobalBatchSizeDivisible, "init.global-batch-size-divisible",
             "The global batch size must be a multiple of --micro-batch-size x the data-parallel size (the constant "
             "number-of-microbatches calculator asserts it; --decrease-batch-size-if-needed rounds down instead).");
MR_INIT_RULE(kGlobalBatchSizeOneMicroBatch, "init.global-batch-size-one-micro-batch",
             "With --decrease-batch-size-if-needed the global batch size must still hold one micro batch per "
             "data-parallel rank (the calculator asserts at least one micro batch).");
MR_INIT_RULE(kScheduleNoDecrease, "init.step-batch-size-schedule-no-decrease",
             "--step-batch-size-schedule cannot be combined with --decrease-batch-size-if-needed (the calculator's "
             "builder raises ValueError).");
MR_INIT_RULE(kStepSchedule, "init.step-batch-size-schedule",
             "--step-batch-size-schedule must read as THRESHOLD:BATCH_SIZE entries (numbers with K/M/B/T "
             "suffixes), start at threshold 0, have strictly increasing thresholds (in samples, after tokens are "
             "divided by --seq-length) and batch sizes above 0 (the step calculator's parse and checks).");
MR_INIT_RULE(kExitSignalCatchable, "init.exit-signal-catchable",
             "--exit-signal-handler needs an --exit-signal a process can catch: not SIGKILL or SIGSTOP "
             "(set_global_variables' signal.signal raises OSError).");
MR_INIT_RULE(kSeedPositive, "init.seed-positive",
             "--seed must be a positive integer (initialize_megatron's _set_random_seed raises ValueError).");

}  // namespace

// set_global_variables -> init_num_microbatches_calculator (megatron/core/num_microbatches_calculator.py). The
// data-parallel size is the one the run layer's calculator uses (run/batch_schedule.cpp): data-parallel size x
// the GTP weight-rematerialisation size. --rampup-batch-size is deprecated and ignored by the calculator (it was
// replaced by --step-batch-size-schedule), so it adds no check here. A step schedule's entries are parsed and
// checked as the step calculator does (config/step_batch_schedule.h); its batch sizes are not checked for
// divisibility at start-up (Megatron checks only the current step's, once it is used).
static void num_microbatches(Context& ctx) {
  if (!ctx.has("global_batch_size") || !ctx["global_batch_size"].is_int() || !ctx["micro_batch_size"].is_int() ||
      !ctx.has("data_parallel_size") || !ctx["data_parallel_size"].is_int())
    return;
  const bool decrease = on_or(ctx, "decrease_batch_size_if_needed");
  if (ctx.has("step_batch_size_schedule") && !ctx.is_none("step_batch_size_schedule")) {
    ctx.require(!decrease, kScheduleNoDecrease,
                would_fail("the number-of-microbatches calculator") +
                    "--step-batch-size-schedule cannot be combined with --decrease-batch-size-if-needed (a "
                    "schedule's batch sizes are used as given); drop --decrease-batch-size-if-needed",
                {"step_batch_size_schedule", "decrease_batch_size_if_needed"});
    if (ctx["step_batch_size_schedule"].is_str()) {
      std::optional<int64_t> seq;
      if (ctx.has("seq_length") && ctx["seq_length"].is_int()) seq = ctx.i("seq_length");
      try {
        (void)parse_step_batch_schedule(ctx.s("step_batch_size_schedule"), seq);
      } catch (const StepScheduleError& e) {
        ctx.fail(kStepSchedule, would_fail("the step batch size calculator") + e.what(), {"step_batch_size_schedule"});
      }
    }
    return;
  }
  const int64_t gbs = ctx.i("global_batch_size"), mbs = ctx.i("micro_batch_size");
  const int64_t dp = ctx.i("data_parallel_size") * int_or(ctx, "gtp_weight_remat_size", 1);
  if (gbs <= 0 || mbs <= 0 || dp <= 0) return;  // validate_args refused these already
  const int64_t unit = mbs * dp;
  const std::string sizes = "--micro-batch-size " + std::to_string(mbs) + " x data-parallel size " +
                            std::to_string(dp) + " = " + std::to_string(unit);
  if (!decrease) {
    const int64_t lower = gbs - gbs % unit, upper = lower + unit;
    std::string fix = "; use a --global-batch-size that is a multiple of " + std::to_string(unit) + " (" +
                      (lower > 0 ? std::to_string(lower) + " or " : "") + std::to_string(upper) +
                      "), change --micro-batch-size or the parallel sizes, or give --decrease-batch-size-if-needed";
    ctx.require(gbs % unit == 0, kGlobalBatchSizeDivisible,
                would_fail("the number-of-microbatches calculator") + "the global batch size " +
                    std::to_string(gbs) + " (--global-batch-size) is not divisible by " + sizes + fix,
                {"global_batch_size", "micro_batch_size", "world_size"});
    return;
  }
  ctx.require(gbs >= unit, kGlobalBatchSizeOneMicroBatch,
              would_fail("the number-of-microbatches calculator") + "--decrease-batch-size-if-needed rounds the "
                  "global batch size " + std::to_string(gbs) + " (--global-batch-size) down to a multiple of " +
                  sizes + ", which leaves no micro batch; use a --global-batch-size of at least " +
                  std::to_string(unit),
              {"global_batch_size", "micro_batch_size", "decrease_batch_size_if_needed"});
}

void startup(Context& ctx) {
  num_microbatches(ctx);
  // set_global_variables installs DistributedSignalHandler(args.exit_signal): signal.signal(SIGKILL or SIGSTOP, ...)
  // fails with EINVAL on every rank.
  if (ctx.on("exit_signal_handler") && ctx["exit_signal"].is_int()) {
    const int64_t sig = ctx.i("exit_signal");
    ctx.require(sig != 9 && sig != 19, kExitSignalCatchable,
                would_fail("set_global_variables") + "--exit-signal-handler installs a handler for --exit-signal " +
                    (sig == 9 ? "SIGKILL" : "SIGSTOP") +
                    ", which no process can catch (signal.signal raises OSError: Invalid argument); use SIGTERM "
                    "(the default) or SIGUSR1/SIGUSR2",
                {"exit_signal", "exit_signal_handler"});
  }
  // _set_random_seed: `if seed_ is not None and seed_ > 0: ... else: raise ValueError(...)`.
  if (ctx["seed"].is_int())
    ctx.require(ctx.i("seed") > 0, kSeedPositive,
                would_fail("_set_random_seed") + "--seed " + std::to_string(ctx.i("seed")) +
                    " is not a positive integer (\"Seed (" + std::to_string(ctx.i("seed")) +
                    ") should be a positive integer.\")",
                {"seed"});
}

}  // namespace mr::init
