# A worker that fails in a chosen way, to test the launcher's supervision (tests/launch/supervision_test.cpp).
# FAULT (the environment) picks the way; FAULT_RANK (default 1) is the rank that fails:
#   first-attempt  fails (exit 3, after a line on stderr) on attempt 0 only (TORCHELASTIC_RESTART_COUNT), then works;
#   ignore-term    every rank ignores SIGTERM; FAULT_RANK exits 4 a moment after every rank of this node does so,
#                  the others would sleep a minute;
#   error-file     FAULT_RANK writes an error file in @record's format itself (no torch needed) and exits 5; the others
#                  sleep a minute;
#   record         FAULT_RANK raises in a main wrapped in torch's @record, which writes TORCHELASTIC_ERROR_FILE;
#   usr1           every rank says so and exits 0 on SIGUSR1 (FAULT_LINGER seconds later, default 0, saying so again
#                  for each further SIGUSR1 meanwhile), touches FAULT_READY.<rank> once it listens, then waits a
#                  minute for it.
#   usr1-default   FAULT_RANK keeps SIGUSR1's default action (dies of it); the others ignore it. Each touches
#                  FAULT_READY.<rank> once it listens, then sleeps a minute.
#   term           every rank but FAULT_RANK says so and exits 0 on SIGTERM (a graceful stop, as Megatron's
#                  --exit-signal-handler); FAULT_RANK (none when FAULT_RANK=none) keeps SIGTERM's default action and
#                  dies of it. Each touches FAULT_READY.<rank> once it listens, then sleeps a minute.
#   others-file    every rank but FAULT_RANK writes an error file in @record's format at once and sleeps a minute;
#                  FAULT_RANK exits 6 once the others of this node have written theirs, without one (the root cause
#                  wrote none, the cascade did).
#   import         FAULT_RANK imports a module that does not exist (ModuleNotFoundError, exit 1); the others exit 0.
#   follower       every rank but FAULT_RANK writes an error file as megatron-run's worker does for a failure that
#                  follows another rank's (extraInfo.follows_rank FAULT_RANK) and exits 1 as soon as FAULT_RANK (when
#                  on this node) ignores SIGTERM; FAULT_RANK says its own error on stderr a second later and exits 3
#                  (it failed first, exits last).
#   stubborn       every rank ignores SIGINT and SIGTERM, touches FAULT_READY.<rank>, then sleeps a minute.
# FAULT_RANK=all makes every rank the failing one.
import os
import signal
import sys
import time

fault = os.environ.get("FAULT", "")
rank = os.environ.get("RANK")
failing = os.environ.get("FAULT_RANK", "1") in (rank, "all")
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")


# Marks shared by the ranks of this node: the attempt folder of their error files (<attempt>/<local rank>/error.json).
# A rank that must act only after the others reached some point waits for their marks, not for a guessed time: under
# load a rank's Python may start seconds after another's.
def mark(name):
    return os.path.join(os.path.dirname(os.path.dirname(os.environ["TORCHELASTIC_ERROR_FILE"])), name)


def wait_for_marks(prefix, local_ranks):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(os.path.exists(mark(f"{prefix}.{r}")) for r in local_ranks):
        time.sleep(0.01)


local_rank = int(os.environ.get("LOCAL_RANK", "0"))
local_ranks = range(int(os.environ.get("LOCAL_WORLD_SIZE", "1")))

if fault == "import":
    if failing:
        import mr_tests_no_such_module  # noqa: F401
elif fault == "first-attempt":
    print(f"rank {rank} attempt {attempt} of at most {os.environ.get('TORCHELASTIC_MAX_RESTARTS')} restarts", flush=True)
    if failing and attempt == "0":
        print(f"rank {rank} fails on attempt {attempt}", file=sys.stderr, flush=True)
        sys.exit(3)
elif fault == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"rank {rank} ignores SIGTERM", flush=True)
    open(mark(f"ignoring.{local_rank}"), "w").close()
    if failing:  # the launcher's stop must find every rank of this node ignoring SIGTERM (the test expects SIGKILL)
        wait_for_marks("ignoring", local_ranks)
        time.sleep(0.5)
        sys.exit(4)
    time.sleep(60)
elif fault == "error-file":
    if failing:
        import json

        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
            json.dump({"message": {"message": f"ValueError: written by rank {rank}",
                                   "extraInfo": {"py_callstack": "Traceback: here", "timestamp": "1700000000"}}}, f)
        sys.exit(5)
    time.sleep(60)
elif fault == "others-file":
    if failing:  # the cascade's error files are written before the root cause exits (and the launcher stops them)
        wait_for_marks("wrote", [r for r in local_ranks if r != local_rank])
        sys.exit(6)
    import json

    with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
        json.dump({"message": {"message": f"ConnectionError: written by rank {rank}",
                               "extraInfo": {"py_callstack": "Traceback: there", "timestamp": "1700000000"}}}, f)
    open(mark(f"wrote.{local_rank}"), "w").close()
    time.sleep(60)
elif fault == "record":
    from torch.distributed.elastic.multiprocessing.errors import record

    @record
    def main():
        if failing:
            raise RuntimeError(f"boom on rank {rank}")
        time.sleep(60)

    main()
elif fault == "usr1":
    got = []

    def on_usr1(signum, frame):
        got.append(signum)
        print(f"rank {rank} got SIGUSR1" + (f" again ({len(got)} times)" if len(got) > 1 else ""), flush=True)

    signal.signal(signal.SIGUSR1, on_usr1)
    open(os.environ["FAULT_READY"] + "." + rank, "w").close()
    deadline = time.monotonic() + 60
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
    if got:  # FAULT_LINGER seconds more (default 0), still counting SIGUSR1s, then exit 0
        time.sleep(float(os.environ.get("FAULT_LINGER", "0")))
        sys.exit(0)
elif fault == "term":
    def on_term(signum, frame):
        print(f"rank {rank} got SIGTERM, stops cleanly", flush=True)
        sys.exit(0)

    if not failing:
        signal.signal(signal.SIGTERM, on_term)
    open(os.environ["FAULT_READY"] + "." + rank, "w").close()
    time.sleep(60)
elif fault == "usr1-default":
    if not failing:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    open(os.environ["FAULT_READY"] + "." + rank, "w").close()
    time.sleep(60)
elif fault == "follower":
    root = os.environ.get("FAULT_RANK", "1")
    # The ranks of this node share the attempt folder of their error files: the failing rank marks there that it
    # ignores SIGTERM, and a follower on this node waits for the mark before it exits (otherwise the launcher's stop
    # may reach a slow-starting failing rank before it ignores SIGTERM, and the test sees a SIGTERM, not its error).
    ready = os.path.join(os.path.dirname(os.path.dirname(os.environ["TORCHELASTIC_ERROR_FILE"])), "ignoring." + root)
    if failing:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(ready, "w").close()
        time.sleep(1)
        print(f"rank {rank}: the real failure", file=sys.stderr, flush=True)
        sys.exit(3)
    import json

    if int(root) < int(os.environ["LOCAL_WORLD_SIZE"]):  # the failing rank is on this node (one-node tests)
        deadline = time.monotonic() + 60
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.01)
    with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
        json.dump({"message": {"message": f"loading failed on rank {root}: the real failure",
                               "extraInfo": {"py_callstack": "", "timestamp": "1700000000",
                                             "follows_rank": int(root)}}}, f)
    sys.exit(1)
elif fault == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    open(os.environ["FAULT_READY"] + "." + rank, "w").close()
    time.sleep(60)
