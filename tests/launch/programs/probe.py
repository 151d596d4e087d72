# Prints, as one JSON line per rank, the torchrun variables this process got and its command line; exits with
# PROBE_EXIT_RANK's code on that rank (to test how the launcher reports a failing rank), and touches
# PROBE_MARK (a file) when set, to show that it ran at all.
import json
import os
import sys

NAMES = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
         "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
         "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
         "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
         "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "MR_VIRTUAL_LOCAL_RANK", "TORCHELASTIC_SIGNALS_TO_HANDLE",
         "TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE"]
env = {k: os.environ[k] for k in NAMES if k in os.environ}
if os.environ.get("PROBE_MARK"):
    open(os.environ["PROBE_MARK"] + "." + env.get("RANK", "x"), "w").close()
print(json.dumps({"env": env, "argv": sys.argv[1:]}), flush=True)
if os.environ.get("PROBE_EXIT_RANK") == env.get("RANK"):
    sys.exit(int(os.environ.get("PROBE_EXIT_CODE", "7")))
