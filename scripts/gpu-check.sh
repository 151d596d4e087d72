#!/usr/bin/env bash
# The GPU check (issue 13's five points), for a machine with NVIDIA GPUs; writes one report file and exits 1 if
# any point failed. Each part is also a script of its own (gpu-check-optim.sh, gpu-check-distributed.sh).
#
#   scripts/gpu-check.sh [BUILD_DIR]        BUILD_DIR: the CUDA build (default $BUILD, else build-device where the
#                                           .device/ bundle is (.device/MANIFEST), else build-gpu)
#   REPORT=FILE                             the report (default $OUT/gpu-check-report.md when $OUT is set, else
#                                           BUILD_DIR/gpu-check-report.md); the summary table so far is also kept in
#                                           REPORT's -summary.md sibling, rewritten after every verdict
#   MR_DEVICE_CALL_S=600                    the device call's limit (set it lower where the session's device time
#                                           left is less: docs/device.md); the whole script, its build step
#                                           included, stays MR_GPU_CHECK_MARGIN_S (60) inside it
#   MR_GPU_CHECK_BUILD_S                    the bound on the build step (default: what the call has left less the
#                                           margin less 150 s for the parts); at it the build is stopped, point 5
#                                           fails saying how many build steps were left, and nothing else runs
#   MR_GPU_CHECK_BUDGET_S=330               at most this many seconds for the parts after the build (they get
#                                           min(this, MR_DEVICE_CALL_S - the seconds so far - the margin))
#   MR_GPU_CHECK_CAP_<PART>=S               one part's own cap (defaults: 1=60 2a=30 3a=30 2b=150 3b=60 4a=30
#                                           4b=30), so that one slow or hung part cannot starve the others; a part
#                                           gets its cap or what is left of the budget, whichever is less. Each part
#                                           runs in a session of its own (setsid): at its cap every process it
#                                           started is stopped (TERM, KILL 10 s later), nested timeouts included
#
# The default device plan is ONE call inside the session's 900 s of device time (docs/device.md, "The time plan"):
# `scripts/device-build.sh --check` with timeout_s 600: the build bounded at 300 s, then this script with what the
# build left of the 600 s (less its 60 s margin) for the parts. The two-call plan (call 1 `scripts/device-build.sh`,
# call 2 `scripts/gpu-check.sh build-device` within the machine's 30 s idle release) is the alternative. The build
# step first prints how many build steps (ninja edges) it has to run: a full rebuild where a call before finished
# shows at once. The parts run cheapest first (1, 2a, 3a, 4a, 4b, then the long 2b, then 3b with 2+ GPUs), so that a
# short budget cuts 2b, not the cheap parts; a part the budget has no time left for is NOT RUN (never started).
# Every megatron-run job here has its own bound too: MR_DIST_TIMEOUT_S=60 for the workers' rendezvous and
# collectives, NCCL_DEBUG=WARN so that an NCCL failure says why. Part 3a (NCCL at world size 1) runs before 4b and
# 2b: where it fails (not for time) it is run once more with NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO (gVisor-sandboxed
# GPUs may refuse NCCL's cuMem allocations, "Cuda failure 'operation not supported'"; a Firecracker machine, the
# H100 kind, is not known to); if that passes, NCCL_CUMEM_ENABLE=0 is exported for every later part and the report
# and the summary say so, naming the machine's kernel.
#
# The points, and what each line of the report says:
#   1. kernels: the CUDA kernels against the CPU reference (test_optim "[gpu]": bit-equal in every optimizer and
#      precision mode, odd sizes; Muon and SOAP within their bounds), plus the index arithmetic on the host
#      ("[geometry]");
#   2. one-rank GPU run against the CPU run: the synthetic gradient's CUDA kernel bit-equal to the CPU loop and the
#      CUDA backend's host arithmetic (test_run "[gpu],[device]"), then scripts/gpu-check-run.sh: default.yaml and
#      variants on --distributed-backend gloo (CPU backend) and nccl (CUDA backend), identical losses, grad norms
#      and checksums (adam/sgd/lion; fp32, bf16, fp16), muon within its bound, soap finishing with finite values;
#   3. NCCL: a one-rank job over every process group on NCCL (world size 1), the group tests at 2..N ranks when N
#      GPUs are visible (with one GPU: reported skipped; NCCL does not put two ranks on one GPU), the fault check;
#   4. benchmarks: gpu.adamw.bf16_master (goal >= 0.9 of cudaMemcpy D2D), gpu.muon.ns5_bf16 (goal >= 0.75 of
#      cuBLAS bf16 GEMMs); a default-job iteration's phase times on the CUDA backend (--timing-log-level 1);
#   5. the build against this machine's LibTorch: the C++ ABI torch reports and the one the build used.
set -uo pipefail
set +m  # no job control: run_part's background parts lead no process group (setsid must not fork)
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-common.sh
source scripts/gpu-common.sh
build="${1:-${BUILD:-$(gpu_default_build)}}"
export BUILD="$build"
if [[ -n "${REPORT:-}" ]]; then report=$REPORT
elif [[ -n "${OUT:-}" ]]; then report="$OUT/gpu-check-report.md"
else mkdir -p "$build" && report="$build/gpu-check-report.md"; fi
summary_file="${report%.md}-summary.md"
budget=${MR_GPU_CHECK_BUDGET_S:-330}  # lowered after the build to what the call has left
call_s=${MR_DEVICE_CALL_S:-600}
margin=${MR_GPU_CHECK_MARGIN_S:-60}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
start=$SECONDS  # the parts' clock (set again at the end of the build); the call's is SECONDS itself, from 0
rc=0
declare -a summary
done_summary=0

log() { echo "$*" | tee -a "$report"; }
section() { log ""; log "## $*"; }
# The summary so far, in a file of its own: a call killed before the end (even by SIGKILL) still leaves the
# verdicts it reached.
write_summary_file() {
  { echo "# megatron-run GPU check: summary ($SECONDS s into the call; $1)"; echo
    echo "| point | verdict | what |"; echo "| --- | --- | --- |"; printf '%s\n' "${summary[@]}"; } >"$summary_file"
}
verdict() {  # point, PASS|FAIL|SKIPPED|NOT RUN, words
  # A part that run_part did not start (the budget spent) is NOT RUN, not FAIL; either fails the check.
  if [[ "$2" == FAIL && -n "$not_run" ]]; then set -- "$1" "NOT RUN" "$not_run"; fi
  summary+=("| $1 | $2 | $3 |")
  [[ "$2" == FAIL || "$2" == "NOT RUN" ]] && rc=1
  log "-> $2: $3"
  write_summary_file "so far"
}
left() { echo $((budget - (SECONDS - start))); }
# A part's bound: its cap (MR_GPU_CHECK_CAP_<PART>, else the default given) or what is left of the budget.
cap() {  # part, default seconds
  local var="MR_GPU_CHECK_CAP_$1" l
  l=$(left)
  local c=${!var:-$2}
  echo $(( c < l ? c : l ))
}
nccl_note=""  # set by part 3a where NCCL works only with NCCL_CUMEM_ENABLE=0
timed_out=""  # the last part's "killed after N s" (or why it did not run), else empty
not_run=""    # the last part's "NOT RUN: ..." where run_part did not start it, else empty
# run_part SECONDS COMMAND...: runs COMMAND with that bound (never more than what is left of the budget: cap), its
# output into the report and, until the next part, into $report.part alone (a part judges its own output there,
# not the whole report). A bound of 0 or less (the budget spent) runs nothing: exit 125, "NOT RUN" in its verdict.
run_part() {
  local limit=$1 code
  shift
  timed_out="" not_run=""
  : >"$report.part"
  if (( limit <= 0 )); then
    not_run="NOT RUN: the parts' budget ($budget s) was spent before it"
    timed_out=$not_run
    log "$not_run"
    return 125
  fi
  # A session of its own (run_in_session, scripts/gpu-common.sh): at the limit, or when the part ends, every
  # process it started is stopped, those GNU timeout or the launcher put into process groups of their own too.
  run_in_session "$limit" "$report.part" "$@"
  code=$?
  cat "$report.part" >>"$report"
  echo "exit=$code" >>"$report"
  if (( code == 124 )); then
    timed_out="TIMEOUT: killed after $limit s"
    log "$timed_out"
  fi
  return "$code"
}
# The summary at the end of the report, once: at the end, or when the call is stopped (TERM, INT) or exits early.
finish() {
  (( done_summary )) && return 0
  done_summary=1
  rm -f "$report.part"
  section "summary ($SECONDS s into the call, $((SECONDS - start)) s after the build; budget $budget s${1:+; $1}${nccl_note:+; $nccl_note})"
  log "| point | verdict | what |"
  log "| --- | --- | --- |"
  printf '%s\n' "${summary[@]}" | tee -a "$report"
  write_summary_file "${1:-the end}"
}
on_signal() {
  [[ -n "$session_sid" ]] && stop_session "$session_sid"
  rm -f "$report.part"
  log "gpu-check: stopped by SIG$1 $SECONDS s into the call; the parts after the last verdict did not run"
  rc=1
  finish "stopped by SIG$1"
  exit 1
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'finish "exited early"' EXIT
# Why a part failed: its timeout, else the words given.
failed_because() { if [[ -n "$timed_out" ]]; then echo "$timed_out"; else echo "$1"; fi; }

: >"$report"
log "# megatron-run GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  log "no NVIDIA GPU visible (nvidia-smi): nothing can be checked here"
  done_summary=1  # nothing ran: no summary
  exit 1
fi
gpus=$(nvidia-smi -L | grep -c '^GPU')  # not the MIG lines
section "machine"
nvidia-smi -L | tee -a "$report"
log "kernel $(uname -r)$([[ "$(uname -r)" == 4.4.0 ]] && echo ' (gVisor)')"
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
# The CUDA compiler the configure step names (a CUDA-enabled LibTorch's CMake would otherwise look for one itself).
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
log "driver $driver; $nvcc: $("$nvcc" --version 2>/dev/null | tail -1 || echo 'not found')"
# A CUDA 13 runtime needs driver 580 or newer; an older one makes every GPU case skip (said here, at once).
if [[ "${driver%%.*}" =~ ^[0-9]+$ ]] && (( ${driver%%.*} < 580 )) && "$nvcc" --version 2>/dev/null | grep -q 'release 13'; then
  log "WARNING: driver $driver is older than CUDA 13's minimum (580): the GPU cases below will report themselves skipped"
fi

# ---- 5. LibTorch and its ABI (first: everything below is built against it) ----------------------------------------
section "5. the build against this machine's LibTorch"
torch_abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo "?")
log "python torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo 'not importable'); _GLIBCXX_USE_CXX11_ABI=$torch_abi"
gpu_pin_mtimes "$build" >>"$report" 2>&1
gpu_configure "$build" >>"$report" 2>&1
log "Torch_DIR=$(grep -m1 '^Torch_DIR:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)"
# Only the targets the checks below run (MR_GPU_TARGETS=all: every target), as device-build.sh builds them:
# test_distributed too with 2+ GPUs (part 3b).
read -r -a targets <<<"$(gpu_targets)"
# The build's bound: what the call has left less the margin and 150 s for the parts (MR_GPU_CHECK_BUILD_S).
build_s=${MR_GPU_CHECK_BUILD_S:-$(( call_s - margin - 150 - SECONDS ))}
log "build step: $(gpu_edges "$build" "${targets[@]}") build steps (ninja edges) to run for ${targets[*]:-every target} (0 where call 1 built them; all of them: the sources are newer than call 1's objects), within $build_s s"
build_code=0
gpu_build "$build_s" "$build" "${targets[@]}" >"$build/gpu-check-build.log" 2>&1 || build_code=$?
if (( build_code == 0 )); then
  used=$(grep -o -m1 -- '-D_GLIBCXX_USE_CXX11_ABI=[01]' "$build/build.ninja" | cut -d= -f2)
  log "built in $build (log: $build/gpu-check-build.log); the build's _GLIBCXX_USE_CXX11_ABI=${used:-default (1)}"
  # Which CUDA runtime, cuBLAS, cuSOLVER and NCCL the worker loads (the toolkit's or the torch wheel's: the same
  # SONAME maps one of them), as the loader resolves them for it.
  log "the worker's CUDA libraries (ldd $build/bin/megatron-run-worker):"
  { ldd "$build/bin/megatron-run-worker" 2>&1 | grep -E 'libcudart|libcublas|libcusolver|libnccl|libtorch_cuda' ||
      echo "  (none found: not a CUDA build?)"; } | tee -a "$report"
  nvcc_major=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  torch_cuda=$(python3 -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null || true)
  if [[ -n "$nvcc_major" && -n "$torch_cuda" && "$nvcc_major" != "${torch_cuda%%.*}" ]]; then
    log "WARNING: nvcc is CUDA $nvcc_major, torch was built for CUDA $torch_cuda: two CUDA runtimes may meet in one process"
  fi
  if [[ "$torch_abi" != "?" && "${used:-1}" != "$torch_abi" ]]; then
    verdict 5 FAIL "the build's C++ ABI (${used:-1}) differs from torch's ($torch_abi)"
  else
    verdict 5 PASS "${targets[*]:-every target} built and linked against this LibTorch (ABI ${used:-1})"
  fi
elif (( build_code == 124 )); then
  tail -5 "$build/gpu-check-build.log" >>"$report"
  verdict 5 FAIL "the build did not finish within $build_s s (MR_GPU_CHECK_BUILD_S; $(gpu_edges "$build" "${targets[@]}") build steps left): no check ran"
  finish "the build ran out of time"
  exit 1
else
  tail -30 "$build/gpu-check-build.log" >>"$report"
  verdict 5 FAIL "the build failed (the tail of $build/gpu-check-build.log is above)"
  finish "the build failed"
  exit 1
fi
# The parts' budget: what the call has left after the build (counted from the script's start, so a build that
# had to run here is counted) less the margin, at most MR_GPU_CHECK_BUDGET_S.
start=$SECONDS
call_left=$(( call_s - SECONDS - margin ))
(( call_left < budget )) && budget=$call_left
log "the build step ended $SECONDS s into the call; the parts get $budget s (MR_DEVICE_CALL_S $call_s, margin $margin s)"

# ---- 1. kernels --------------------------------------------------------------------------------------------------------
section "1. CUDA kernels against the CPU reference"
# tests/gpu_tests.sh (also the test_gpu CTest and target) fails a GPU case that skips with a GPU visible.
if run_part "$(cap 1 60)" bash tests/gpu_tests.sh "$build" optim; then
  verdict 1 PASS "every optimizer and precision mode bit-equal to the reference, Muon and SOAP within their bounds, odd sizes"
else
  verdict 1 FAIL "$(failed_because "test_optim [gpu],[geometry] failed or its GPU cases skipped (above)")"
fi

# ---- 2. the run --------------------------------------------------------------------------------------------------------
section "2. one-rank GPU run against the one-rank CPU run"
# The synthetic gradient's kernel and the CUDA backend's host arithmetic first (test_run "[gpu],[device]"), then
# the runs: configs/default.yaml and its variants on gloo (CPU backend) and nccl (CUDA backend), line by line
# (scripts/gpu-check-run.sh: identical for adam/sgd/lion in fp32, bf16, fp16; muon within its bound).
if run_part "$(cap 2a 30)" bash tests/gpu_tests.sh "$build" run; then
  verdict 2a PASS "the synthetic gradient on the GPU is bit-equal to the CPU's; the backend's host arithmetic"
else
  verdict 2a FAIL "$(failed_because "test_run [gpu],[device] failed or its GPU cases skipped (above)")"
fi
# ---- 3a. NCCL at world size 1, before 2b: it settles the NCCL environment of the nccl runs after it ----------------
section "3a. NCCL at world size 1 (before 2b's nccl runs)"
tmp=$(mktemp -d)
export CUDA_DEVICE_MAX_CONNECTIONS=1
# The one-rank bring-up on NCCL; run_3a [NAME=VALUE...]: with that environment.
run_3a() {
  rm -f "$tmp/one.0.json"
  run_part "$(cap 3a 30)" env "$@" MR_DIST_TIMEOUT_S=60 MR_DIST_REPORT="$tmp/one." "$build/bin/megatron-run" --bring-up-only \
    --config configs/default.yaml --distributed-backend nccl && grep -q '"backend": "nccl"' "$tmp/one.0.json" 2>/dev/null
}
if run_3a; then
  cat "$tmp/one.0.json" >>"$report"
  verdict 3a PASS "world size 1: a communicator for every group, all-reduce in each, the other collectives"
elif [[ -n "$timed_out" ]]; then
  verdict 3a FAIL "$(failed_because "")"
else
  # A gVisor-sandboxed GPU (kernel 4.4.0) may refuse NCCL's cuMem allocations at init ("Cuda failure 'operation not
  # supported'", NVIDIA/nccl#2101): once more without them, NCCL saying what it does. Only on gVisor is that the
  # sandbox's doing; elsewhere (the Firecracker H100 machines) the first try's error above is the finding.
  log "3a failed: once more with NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO (NCCL's cuMem allocations may be refused on this machine)"
  if run_3a NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO; then
    cat "$tmp/one.0.json" >>"$report"
    export NCCL_CUMEM_ENABLE=0
    nccl_note="NCCL_CUMEM_ENABLE=0 exported for every later part"
    if [[ "$(uname -r)" == 4.4.0 ]]; then
      why="gVisor (kernel 4.4.0) refuses NCCL's cuMem allocations, NVIDIA/nccl#2101: the sandbox, not megatron-run"
    else
      why="kernel $(uname -r), not gVisor: the sandbox does not explain it; read the first try's error above"
    fi
    log "NOTE: NCCL works here only with NCCL_CUMEM_ENABLE=0 ($why); $nccl_note"
    verdict 3a PASS "world size 1, but only with NCCL_CUMEM_ENABLE=0 (the first try failed, above; $nccl_note)"
  else
    verdict 3a FAIL "$(failed_because "the one-rank NCCL job failed, with NCCL_CUMEM_ENABLE=0 too (above)")"
  fi
fi
rm -rf "$tmp"

# ---- 4. benchmarks (before 2b: the cheap parts first, so that a short budget cuts the long 2b, not them) ----------
section "4. benchmarks"
# --fail-below-target: a benchmark below its stated target fails the point (targets: gpu.adamw.bf16_master >= 0.9
# of cudaMemcpy D2D's bandwidth, gpu.muon.ns5_bf16 >= 0.75 of cuBLAS bf16 GEMMs' FLOP/s; bench/optim_bench.cpp).
if run_part "$(cap 4a 30)" "$build/bin/megatron-run-bench" --fail-below-target gpu.adamw.bf16_master gpu.muon.ns5_bf16; then
  verdict 4a PASS "both at or above their targets (AdamW >= 0.9 of D2D memcpy, NS >= 0.75 of cuBLAS GEMMs; ratios above)"
else
  below=$(grep -c "BELOW TARGET" "$report.part" 2>/dev/null || true)
  if [[ -z "$timed_out" && "${below:-0}" -gt 0 ]]; then
    verdict 4a FAIL "BELOW TARGET: $below of the two benchmarks (targets: AdamW >= 0.9 of D2D memcpy, NS >= 0.75 of cuBLAS GEMMs; ratios above)"
  else
    verdict 4a FAIL "$(failed_because "megatron-run-bench gpu.* failed (above)")"
  fi
fi
# A default-job iteration on the CUDA backend with Megatron's level-1 timers: the phase times (CUDA events), looked
# for in this part's own output ($report.part), not in the report, which holds every earlier part's too.
if run_part "$(cap 4b 30)" env MR_DIST_TIMEOUT_S=60 "$build/bin/megatron-run" --config configs/default.yaml --distributed-backend nccl \
     --timing-log-level 1 --log-interval 10 && grep -q "phase times of rank 0 (ms per iteration, cuda events)" "$report.part"; then
  verdict 4b PASS "a default-job iteration's phase times on the GPU (the 'phase times' lines above)"
else
  verdict 4b FAIL "$(failed_because "the default job on the CUDA backend failed or printed no phase times (above)")"
fi

section "2b. one-rank runs, gloo (CPU backend) against nccl (CUDA backend)${nccl_note:+ ($nccl_note)}"
if run_part "$(cap 2b 150)" bash scripts/gpu-check-run.sh "$build" gloo nccl; then
  verdict 2b PASS "one-rank runs on the CUDA backend: identical losses, grad norms and checksums (fp32, bf16, fp16; adam, sgd, lion), muon within its bound, soap finished with finite values (table above)"
else
  verdict 2b FAIL "$(failed_because "a one-rank GPU run differs from the CPU run, failed or timed out (table and run tails above)")"
fi

# ---- 3. NCCL -----------------------------------------------------------------------------------------------------------
section "3. NCCL communicators: 2..N GPUs"
if (( gpus >= 2 )); then
  if run_part "$(cap 3b 60)" bash scripts/gpu-check-distributed.sh "$build"; then
    verdict 3b PASS "group tests and the fault check on $gpus GPUs (the 4-rank layouts need 4 GPUs; fewer: they say skipped above)"
  else
    verdict 3b FAIL "$(failed_because "scripts/gpu-check-distributed.sh failed (above)")"
  fi
else
  verdict 3b SKIPPED "one GPU: the 2..N-rank groups and the fault check need 2+ GPUs (NCCL refuses two ranks on one GPU)"
fi

(( SECONDS - start > budget )) && log "over the budget: a part ran out of time" && rc=1
finish
echo "gpu-check: report in $report (summary also in $summary_file)"
exit $rc
