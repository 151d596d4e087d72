// The latch of Megatron's --exit-signal-handler (its DistributedSignalHandler): a handler for the signal that only
// records it. Megatron installs it at argument parsing, before distributed init and the model build; the worker
// installs it as soon as it has read its arguments (distributed/worker.cpp), and the training run's checkpointer
// (run/checkpoint.cpp) reads it after each iteration, so a signal that came during start-up is acted on then.
#pragma once

namespace mr::util {

// Installs the latch for `sig` (SA_RESTART) and clears it; when it is already installed for `sig`, keeps it and
// what it recorded. False when sigaction fails.
bool install_exit_signal(int sig);
// The signal the latch is installed for; 0: none.
int exit_signal_installed();
// Whether the signal came since the latch was installed.
bool exit_signal_pending();
// Puts back the handler the latch replaced.
void restore_exit_signal();

// The latch across megatron-run's own processes (the launcher's child, then the worker it execs, where an exec
// resets the handler): the signal's number, and "1" when it already came.
inline constexpr const char* kExitSignalEnv = "MR_EXIT_SIGNAL";
inline constexpr const char* kExitSignalPendingEnv = "MR_EXIT_SIGNAL_PENDING";
// Installs the latch for the signal kExitSignalEnv names (nothing when unset or not a number), recording it as
// come when kExitSignalPendingEnv is "1", then unblocks the signal (the starting process kept it blocked across
// its exec: one sent meanwhile reaches the latch). Allocates nothing: the worker calls it from .preinit_array.
void install_exit_signal_from_env();
// Before an exec: blocks the latched signal (the mask and a pending signal survive the exec), and sets
// kExitSignalEnv to it and kExitSignalPendingEnv to whether it came.
void pass_exit_signal_to_exec();

}  // namespace mr::util
