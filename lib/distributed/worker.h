// megatron-run-worker: the torch-linked process megatron-run execs inside a job (one per rank). It joins the
// rendezvous, builds Megatron's process groups, runs a self-check (an all-reduce in every group, the other
// collectives on the world group) and then the job it is given (the training run, lib/run/train.h; none: it
// exits 0 after the self-check).
//
//   megatron-run-worker --input-fd N | --input FILE     (the JSON megatron-run writes: lib/launch/worker_input.h)
//
// Knobs for tests and operators (environment):
//   MR_DIST_TIMEOUT_S=S          overrides --distributed-timeout-minutes (rendezvous, collectives), in seconds
//   MR_DIST_HEARTBEAT_S=S        heartbeat / abort-check period (default 1)
//   MR_DIST_HEARTBEAT_TIMEOUT_S=S a rank (or the store) silent this long fails the job (default 30; the launcher
//                                option --heartbeat-timeout wins); see JobTimeouts in worker_input.h
//   MR_DIST_STALL=RANK:S         that rank sleeps S seconds after the bring-up, heartbeat still running (tests)
//   MR_DIST_SELFCHECK_SECONDS=S  repeat the self-check for S seconds (default: once)
//   MR_DIST_REPORT=PREFIX        write PREFIX<rank>.json: the groups, the all-reduce results, the checks
#pragma once

#include <functional>
#include <string>

namespace mr::launch {
struct WorkerInput;
}

namespace mr::distributed {

class Runtime;
using launch::WorkerInput;

// What runs after the self-check: returns the process exit code; `out_prefix` is "[rank R] " when the worker
// prefixes its own lines (not spawned by megatron-run), else "". Exceptions are reported and exit 1.
using WorkerJob = std::function<int(Runtime& rt, const WorkerInput& in, const std::string& out_prefix)>;

int worker_main(int argc, char** argv, const WorkerJob& job = {});

// The worker process's own ends, for its main():
// worker_preinit() runs from the executable's .preinit_array, before any library's static constructors: it
// installs worker_terminate and, under an address-space limit (RLIMIT_AS), caps glibc's malloc arenas, says a crash before
// main() as one line and gives OpenBLAS one thread: when the user set neither OPENBLAS_NUM_THREADS nor GOTO_NUM_THREADS it execs the worker
// again (`argv`, the same arguments) with OPENBLAS_NUM_THREADS=1, which rank 0 says in worker_main. `envp`: the
// process's environment (environ is not set yet there).
void worker_preinit(char** argv, char** envp);
// The std::terminate handler: an exception nobody caught (in a library's start-up, a thread, an error handler
// that itself ran out of memory) becomes one "error: ..." line naming the cause (util/resources.h) and exit 1,
// not an abort.
[[noreturn]] void worker_terminate();
// main()'s return: flushes the output, then, under an address-space limit, ends the process at once (_exit) so
// that no library's exit handler can hang it; else returns `code`.
int worker_exit(int code);

}  // namespace mr::distributed
