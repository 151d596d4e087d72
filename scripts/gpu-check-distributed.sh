#!/usr/bin/env bash
# The distributed group tests on NCCL, for a machine with GPUs (CI has none; see docs/distributed.md).
#
#   scripts/gpu-check-distributed.sh [BUILD_DIR]        (default build-device/ where the .device/ bundle is,
#                                                        else build-gpu/)
#
# Builds megatron-run, megatron-run-worker and test_distributed with CUDA + NCCL, then runs:
#   1. the layout tests (backend independent);
#   2. the 4-rank group tests (TP=2 DP=2, TP=2 PP=2, CP=2 DP=2, EP=2, tp-pp-dp mapping) with
#      --distributed-backend nccl: each needs 4 GPUs (NCCL refuses two ranks on one GPU) and is skipped, saying
#      so, when fewer are visible;
#   3. one job over every visible GPU on NCCL (all-reduce in each group, the other collectives on the world group);
#   4. a fault check on NCCL when at least 2 GPUs are visible: one rank killed mid-collective, the others must stop.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-common.sh
source scripts/gpu-common.sh
build="${1:-$(gpu_default_build)}"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check-distributed: no GPU visible (nvidia-smi); nothing to do" >&2
  exit 2
fi
nvidia-smi -L
# A folder that is already configured (gpu-check.sh, device-build.sh) keeps its configuration; a new one gets the
# CUDA build (scripts/gpu-common.sh: the .device/ bundle where it is, LibTorch from Debian's libtorch-dev or, failing
# that, the Python torch package). device-build.sh and gpu-check.sh build test_distributed already with 2+ GPUs.
gpu_configure "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target megatron-run megatron-run-worker test_distributed
export CUDA_DEVICE_MAX_CONNECTIONS=1
status=0
echo "== layout tests"
"$build/bin/test_distributed" "[layout],[launch]" || status=1
echo "== group tests on NCCL"
MR_TEST_BACKEND=nccl "$build/bin/test_distributed" "[process]~[fault]~[spawn]~[torchrun]" || status=1
gpus=$(nvidia-smi -L | grep -c '^GPU')  # not the MIG lines
if (( gpus >= 2 )); then
  echo "== fault check on NCCL ($gpus GPUs): kill rank 1 mid-collective"
  tmp=$(mktemp -d)
  MR_DIST_TIMEOUT_S=60 MR_DIST_HEARTBEAT_S=0.5 MR_DIST_SELFCHECK_SECONDS=120 MR_DIST_REPORT="$tmp/r." \
    timeout --foreground 120 "$build/bin/megatron-run" --nproc-per-node 2 --config configs/default.yaml \
    --distributed-backend nccl >"$tmp/out" 2>&1 &
  job=$!
  for _ in $(seq 600); do [[ -f "$tmp/r.0.ready" && -f "$tmp/r.1.ready" ]] && break; sleep 0.1; done
  sleep 1
  # Rank 1's own pid, as its worker wrote it into its .ready file ("groups built, pid N"): exactly that rank of
  # this job, never a worker of another job on the machine (a name search would not know the difference).
  victim=$(sed -n 's/.*pid \([0-9][0-9]*\).*/\1/p' "$tmp/r.1.ready" 2>/dev/null | head -1 || true)
  if [[ -n "$victim" ]]; then
    echo "killing rank 1 (pid $victim, from $tmp/r.1.ready)"
    kill -9 "$victim" || true  # already gone: the wait below says how the job ended
  else
    echo "FAIL: rank 1 wrote no pid into $tmp/r.1.ready (not ready within 60 s?): no rank killed; stopping the job"
    status=1
    kill "$job" 2>/dev/null || true  # GNU timeout passes the TERM on to the launcher
  fi
  start=$SECONDS
  if wait "$job"; then echo "FAIL: the job exited 0 after a rank was killed"; status=1; fi
  echo "job stopped $((SECONDS - start)) s after the kill"
  grep -E "rank [01]" "$tmp/out" | tail -5 || true  # no such line: set -e must not end the script here
  (( SECONDS - start < 60 )) || { echo "FAIL: took too long"; status=1; }
  rm -rf "$tmp"
fi
exit $status
