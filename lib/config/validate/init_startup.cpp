// The init stage (init.h): what Megatron's start-up refuses before it builds a model — the global variables
// (set_global_variables: the exit signal handler, megatron/training/global_vars.py) and the random seeds
// (initialize_megatron's _set_random_seed, megatron/training/initialize.py).
#include <string>

#include "config/validate/init.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kExitSignalCatchable, "init.exit-signal-catchable",
             "--exit-signal-handler needs an --exit-signal a process can catch: not SIGKILL or SIGSTOP "
             "(set_global_variables' signal.signal raises OSError).");
MR_INIT_RULE(kSeedPositive, "init.seed-positive",
             "--seed must be a positive integer (initialize_megatron's _set_random_seed raises ValueError).");

}  // namespace

void startup(Context& ctx) {
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
