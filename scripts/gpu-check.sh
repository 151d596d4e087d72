#!/usr/bin/env bash
# GPU checks (run on a machine with NVIDIA GPUs): the optimizer kernels' GPU tests and benchmarks, then the
# process-group tests on NCCL. Each part is its own script; this runs both and fails if either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
bash scripts/gpu-check-optim.sh "$@" || rc=1
bash scripts/gpu-check-distributed.sh "$@" || rc=1
exit $rc
