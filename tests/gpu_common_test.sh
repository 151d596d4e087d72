#!/usr/bin/env bash
# scripts/gpu-common.sh without a GPU (the CTest gpu_common): run_in_session stops everything a bounded part
# started, nested GNU timeouts (process groups of their own) and what a part leaves behind included (review gpu31
# finding 1: a part run out of time left its megatron-run job running beside the next parts); the default build
# folder and the target list (test_distributed with 2+ GPUs, finding 6).
set -uo pipefail
set +m
cd "$(dirname "$0")/.."
source scripts/gpu-common.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-gpu-common.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
marker="mr-gpu-common-$$"
# A sleep named "sleep 2N.<marker>" (exec -a), so that this test finds its own processes and no one else's.
named_sleep() { echo "bash -c 'exec -a \"sleep $1.$marker\" sleep $1'"; }
left_over() { ps -eo args= | grep -c "^sleep 2[0-9]\\.$marker" || true; }

# 1. A part whose job runs under a GNU timeout of its own (which puts it into a process group of its own, as
# gpu-check-run.sh's runs were), stopped at 2 s.
cat >"$tmp/part.sh" <<PART
echo "| case1 | row |"
timeout --kill-after=5 30 $(named_sleep 25) >/dev/null 2>&1
echo "| case2 | after |"
PART
t0=$SECONDS
MR_SESSION_GRACE_S=2 run_in_session 2 "$tmp/out" bash "$tmp/part.sh"
code=$?
check "a part past its limit returns 124 (got $code)" '(( code == 124 ))'
check "it is stopped within the limit and the grace ($((SECONDS - t0)) s)" '(( SECONDS - t0 <= 6 ))'
check "nothing of it runs on (the nested timeout's job included)" '(( $(left_over) == 0 ))'
check "its output so far is kept" 'grep -q "case1" "$tmp/out" && ! grep -q "case2" "$tmp/out"'

# 2. A part that ends by itself but leaves a job behind in a group of its own: stopped too; its exit code kept.
cat >"$tmp/part2.sh" <<PART
timeout 60 $(named_sleep 26) &
echo started
exit 3
PART
run_in_session 20 "$tmp/out2" bash "$tmp/part2.sh"
code=$?
check "a part that ends returns its own code (got $code)" '(( code == 3 ))'
check "what it left running is stopped" '(( $(left_over) == 0 ))'
check "run_in_session forgets the session" '[[ -z "$session_sid" ]]'

# 3. The build folder and the targets (a fake nvidia-smi on PATH).
mkdir -p "$tmp/fake"
printf '#!/bin/sh\n[ "$1" = -L ] && printf "GPU 0: H100 (UUID: a)\\n  MIG 1g.10gb Device 0: (UUID: m)\\n%%s" "${FAKE_GPU2:-}"\n' \
  >"$tmp/fake/nvidia-smi"
chmod +x "$tmp/fake/nvidia-smi"
one=$(PATH="$tmp/fake:$PATH" MR_GPU_TARGETS= gpu_targets)
two=$(PATH="$tmp/fake:$PATH" FAKE_GPU2="GPU 1: H100 (UUID: b)
" MR_GPU_TARGETS= gpu_targets)
check "one GPU (its MIG line not counted): no test_distributed ($one)" '[[ "$one" != *test_distributed* && "$one" == *test_run* ]]'
check "two GPUs: test_distributed built too ($two)" '[[ "$two" == *" test_distributed" ]]'
check "MR_GPU_TARGETS=all: every target (nothing named)" '[[ -z "$(MR_GPU_TARGETS=all gpu_targets)" ]]'
mkdir -p "$tmp/repo/.device" && cd "$tmp/repo" || exit 1
check "no bundle: build-gpu" '[[ "$(gpu_default_build)" == build-gpu ]]'
touch .device/MANIFEST
check "the .device bundle (MANIFEST): build-device" '[[ "$(gpu_default_build)" == build-device ]]'
exit $fail
