#!/usr/bin/env bash
# scripts/gpu-common.sh without a GPU (the CTest gpu_common): run_in_session stops everything a bounded part
# started, nested GNU timeouts (process groups of their own) and what a part leaves behind included (review gpu31
# finding 1: a part run out of time left its megatron-run job running beside the next parts); the default build
# folder and the target list (test_distributed with 2+ GPUs, finding 6); the time bounds of the device plan (review
# gpu35 findings 1 and 3): device-build.sh's and gpu-check.sh's bounded builds (a fake slow cmake), the build step's
# count of ninja edges, and gpu-check.sh end to end behind fakes (nvidia-smi, nvcc, cmake, ninja, the binaries):
# part 3a before 2b, rerun once with NCCL_CUMEM_ENABLE=0 where it fails, which the later parts then get. Review
# gpu37: the parts cheapest first, 4a FAIL below a benchmark's target, 4b judged on its own output, a part with no
# budget left NOT RUN, device-build.sh --check (the one-call plan) ending with the report whatever the build did,
# and gpu_pin_mtimes pinning the carried .device bundle too (with real ninja where installed).
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

# 4. The device plan's bounds, behind fakes: nvidia-smi (one GPU, driver 580), nvcc, cmake (configure: writes
# build.ninja; --build: a sleep of FAKE_BUILD_S named for left_over), ninja (-n: FAKE_EDGES steps), python3 (no torch).
cd "$OLDPWD" || exit 1
fk="$tmp/fk"
mkdir -p "$fk"
cat >"$fk/nvidia-smi" <<'FAKE'
#!/bin/bash
case "$*" in
  -L) echo "GPU 0: H100 (UUID: a)" ;;
  *driver_version*) echo "580.65" ;;
  *compute_cap*) echo "9.0" ;;
  *) echo "fake nvidia-smi" ;;
esac
FAKE
printf '#!/bin/sh
echo "Cuda compilation tools, release 13.0, V13.0.88"
' >"$fk/nvcc"
printf '#!/bin/sh
exit 1
' >"$fk/python3"
cat >"$fk/cmake" <<FAKE
#!/bin/bash
prev=""
for x in "\$@"; do
  [[ "\$x" == --build ]] && exec -a "sleep 27.$marker" sleep "\${FAKE_BUILD_S:-0}"
  [[ "\$prev" == -B ]] && mkdir -p "\$x" && echo "-D_GLIBCXX_USE_CXX11_ABI=1" >"\$x/build.ninja"
  prev=\$x
done
exit 0
FAKE
cat >"$fk/ninja" <<'FAKE'
#!/bin/bash
[[ " $* " == *" -n "* ]] || exit 0
for ((i = 1; i <= ${FAKE_EDGES:-0}; ++i)); do echo "[$i/${FAKE_EDGES}] Building CXX object x$i.o"; done
FAKE
chmod +x "$fk"/*
mkdir -p "$tmp/dev"
echo "fake bundle" >"$tmp/dev/MANIFEST"
devbuild() { env PATH="$fk:$PATH" DEPS="$tmp/dev" TORCH_DIR=/nonexistent BUILD="$tmp/db" MR_GPU_TARGETS= \
  bash scripts/device-build.sh >"$tmp/db.out" 2>&1; }

t0=$SECONDS
FAKE_BUILD_S=25 FAKE_EDGES=7 MR_DEVICE_BUILD_S=3 devbuild
code=$?
check "device-build.sh: a build past MR_DEVICE_BUILD_S exits 124 (got $code)" '(( code == 124 ))'
check "... stopped at its bound ($((SECONDS - t0)) s)" '(( SECONDS - t0 <= 6 ))'
check "... nothing of the build runs on" '(( $(left_over) == 0 ))'
check "... it says how many build steps were to run and are left, and what to do" \
  'grep -q "7 build steps (ninja edges) to run" "$tmp/db.out" && grep -q "7 build steps (ninja edges) are left" "$tmp/db.out" &&
   grep -q "stopped at MR_DEVICE_BUILD_S=3 s (exit 124). Next device call: scripts/gpu-check.sh" "$tmp/db.out"'
FAKE_BUILD_S=0 FAKE_EDGES=0 devbuild
code=$?
check "device-build.sh: a build inside the bound exits 0 (got $code)" '(( code == 0 )) && grep -q "device-build: built in" "$tmp/db.out"'
# Review gpu37 #2: the one-call plan, device-build.sh --check. A build stopped at MR_DEVICE_BUILD_S goes on to
# gpu-check.sh, which reports (point 5, the summary) inside the call instead of the call ending without a report.
t0=$SECONDS
env PATH="$fk:$PATH" DEPS="$tmp/dev" TORCH_DIR=/nonexistent BUILD="$tmp/dc" MR_GPU_TARGETS= REPORT="$tmp/dc.md" \
  FAKE_BUILD_S=25 FAKE_EDGES=5 MR_DEVICE_BUILD_S=3 MR_GPU_CHECK_BUILD_S=2 bash scripts/device-build.sh --check >"$tmp/dc.out" 2>&1
code=$?
check "device-build.sh --check: a build past its bound still ends with gpu-check.sh's report and summary (exit $code, $((SECONDS - t0)) s)" \
  '(( code == 1 && SECONDS - t0 <= 12 && $(left_over) == 0 )) && grep -q "^## summary" "$tmp/dc.md" &&
   grep -q "^| 5 | FAIL | the build did not finish within 2 s" "$tmp/dc-summary.md"'

# gpu-check.sh: a build directory with fake binaries. megatron-run logs each call's NCCL_CUMEM_ENABLE; its
# --bring-up-only fails as NCCL does where cuMem is refused unless NCCL_CUMEM_ENABLE=0 (FAKE_NCCL=broken: always).
gb="$tmp/gb"
mkdir -p "$gb/bin"
echo "-D_GLIBCXX_USE_CXX11_ABI=1" >"$gb/build.ninja"
for t in test_optim test_run megatron-run-worker; do
  printf '#!/bin/sh
[ -n "${FAKE_OPTIM_S:-}" ] && [ "${0##*/}" = test_optim ] && sleep "$FAKE_OPTIM_S"
echo "All tests passed (1 assertion in 1 test case)"
' >"$gb/bin/$t"
done
# The bench: FAKE_BELOW=1, one result below its target (exit 1 only with --fail-below-target, as bench/runner.cpp);
# FAKE_PHASE_ELSEWHERE=1: it prints 4b's phase-times line (an earlier part's output) and megatron-run does not.
cat >"$gb/bin/megatron-run-bench" <<'FAKE'
#!/bin/bash
echo "bench $*" >>"$FAKE_LOG"
[[ -n "${FAKE_PHASE_ELSEWHERE:-}" ]] && echo "phase times of rank 0 (ms per iteration, cuda events)"
echo "gpu.adamw.bf16_master  ratio 0.95 (target >= 0.9)"
if [[ -n "${FAKE_BELOW:-}" ]]; then
  echo "gpu.muon.ns5_bf16  ratio 0.31 (target >= 0.75)  BELOW TARGET"
  [[ " $* " == *" --fail-below-target "* ]] && exit 1
fi
exit 0
FAKE
cat >"$gb/bin/megatron-run" <<'FAKE'
#!/bin/bash
echo "NCCL_CUMEM_ENABLE=${NCCL_CUMEM_ENABLE-unset} NCCL_DEBUG=${NCCL_DEBUG-unset} $*" >>"$FAKE_LOG"
if [[ " $* " == *" --bring-up-only "* ]]; then
  if [[ "${NCCL_CUMEM_ENABLE:-}" != 0 || "${FAKE_NCCL:-}" == broken ]]; then
    echo "misc/cudawrap.cc NCCL WARN Cuda failure 'operation not supported'" >&2
    exit 1
  fi
  echo '{"backend": "nccl"}' >"${MR_DIST_REPORT}0.json"
  exit 0
fi
[[ -n "${FAKE_PHASE_ELSEWHERE:-}" ]] || echo "phase times of rank 0 (ms per iteration, cuda events)"
FAKE
chmod +x "$gb/bin"/*
gpucheck() { env PATH="$fk:$PATH" REPORT="$tmp/r.md" FAKE_LOG="$tmp/mr.log" MR_GPU_TARGETS= MR_SESSION_GRACE_S=1 \
  MR_GPU_CHECK_RUN_CASES=adam-fp32 MR_GPU_CHECK_REFERENCE= "$@" bash scripts/gpu-check.sh "$gb" >/dev/null 2>&1; }
: >"$tmp/mr.log"
FAKE_EDGES=3 gpucheck
order=$(sed -n 's/^| \([0-9][0-9a-z]*\) | .*/\1/p' "$tmp/r-summary.md" | tr '\n' ' ')
check "gpu-check.sh: the parts in their order, cheapest first, 3a before 4b and 2b ($order)" '[[ "$order" == "5 1 2a 3a 4a 4b 2b 3b " ]]'
check "... 4a runs the benchmarks with --fail-below-target, and passes at or above the targets" \
  'grep -q "^bench --fail-below-target gpu.adamw.bf16_master gpu.muon.ns5_bf16" "$tmp/mr.log" && grep -q "^| 4a | PASS |" "$tmp/r-summary.md"'
check "... 4b passes on its own phase-times line" 'grep -q "^| 4b | PASS |" "$tmp/r-summary.md"'
check "... the build step says how many build steps it has to run" 'grep -q "build step: 3 build steps (ninja edges) to run" "$tmp/r.md"'
check "... the budget is 330 s" 'grep -q "budget 330 s" "$tmp/r.md"'
check "... 3a failed, rerun with NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO" \
  'grep -q "3a failed: once more with NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO" "$tmp/r.md" &&
   grep -q "^NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO .*--bring-up-only" "$tmp/mr.log"'
check "... 3a passes, saying NCCL_CUMEM_ENABLE=0, in the summary too" \
  'grep -q "^| 3a | PASS | world size 1, but only with NCCL_CUMEM_ENABLE=0" "$tmp/r-summary.md" &&
   grep -q "## summary .*NCCL_CUMEM_ENABLE=0 exported for every later part" "$tmp/r.md"'
check "... 2b's and 4b's nccl runs get NCCL_CUMEM_ENABLE=0" \
  '! grep -v -e "--bring-up-only" -e "gloo" -e "^bench " "$tmp/mr.log" | grep -v "^NCCL_CUMEM_ENABLE=0 " | grep -q . &&
   grep -q "^NCCL_CUMEM_ENABLE=0 .*--timing-log-level" "$tmp/mr.log" && grep -q "^NCCL_CUMEM_ENABLE=0 .*--distributed-backend nccl" "$tmp/mr.log"'
: >"$tmp/mr.log"
FAKE_NCCL=broken gpucheck
check "gpu-check.sh, NCCL failing either way: 3a FAIL, the later parts without NCCL_CUMEM_ENABLE" \
  'grep -q "^| 3a | FAIL | the one-rank NCCL job failed, with NCCL_CUMEM_ENABLE=0 too" "$tmp/r-summary.md" &&
   grep -q "^NCCL_CUMEM_ENABLE=unset .*--timing-log-level" "$tmp/mr.log"'
# Review gpu37 #3 and #4: a benchmark below its target fails 4a, saying BELOW TARGET in the summary; 4b judges its
# own output, not the report (an earlier part printing the phase-times line does not pass it).
: >"$tmp/mr.log"
FAKE_BELOW=1 FAKE_PHASE_ELSEWHERE=1 gpucheck
check "gpu-check.sh: a benchmark below its target: 4a FAIL, BELOW TARGET in the summary" \
  'grep -q "^| 4a | FAIL | BELOW TARGET: 1 of the two benchmarks (targets: AdamW >= 0.9" "$tmp/r-summary.md"'
check "... 4b fails where only an earlier part printed the phase times" \
  'grep -q "^| 4b | FAIL | the default job on the CUDA backend failed or printed no phase times" "$tmp/r-summary.md"'
# Review gpu37 #5: a part with no budget left is not started (NOT RUN), never given a 10 s floor.
: >"$tmp/mr.log"
t0=$SECONDS
FAKE_OPTIM_S=20 gpucheck MR_GPU_CHECK_BUDGET_S=2
code=$?
check "gpu-check.sh: budget 2 s, part 1 stopped at it; the rest NOT RUN, exit $code, within $((SECONDS - t0)) s" \
  '(( code == 1 && SECONDS - t0 <= 8 )) && grep -q "^| 1 | FAIL | TIMEOUT: killed after 2 s" "$tmp/r-summary.md" &&
   grep -q "^| 2a | NOT RUN | NOT RUN: the parts. budget (2 s) was spent before it" "$tmp/r-summary.md" &&
   grep -q "^| 4b | NOT RUN |" "$tmp/r-summary.md" && grep -q "^| 2b | NOT RUN |" "$tmp/r-summary.md" && [[ ! -s "$tmp/mr.log" ]]'
t0=$SECONDS
FAKE_BUILD_S=25 FAKE_EDGES=9 gpucheck MR_GPU_CHECK_BUILD_S=2
code=$?
check "gpu-check.sh: a build past MR_GPU_CHECK_BUILD_S stops at it ($((SECONDS - t0)) s), exit $code, nothing runs on" \
  '(( code == 1 && SECONDS - t0 <= 8 && $(left_over) == 0 ))'
check "... point 5 fails saying so, no part ran" \
  'grep -q "^| 5 | FAIL | the build did not finish within 2 s (MR_GPU_CHECK_BUILD_S; 9 build steps left)" "$tmp/r-summary.md" &&
   ! grep -q "^| 1 |" "$tmp/r-summary.md"'
# gpu_pin_mtimes: off by default; with MR_DEVICE_PIN_MTIMES=1 every file of a (fresh) tree gets 2000-01-01, the
# carried .device bundle included (review gpu37 #1: the tool carries it anew with each call), and .git and the build
# folders keep theirs, so a tree copied anew for call 2 does not rebuild call 1's objects.
mkdir -p "$tmp/tree/lib" "$tmp/tree/.git" "$tmp/tree/.device" "$tmp/tree/build-device" "$tmp/tree/out"
for f in lib/a.cpp CMakeLists.txt .git/HEAD .device/MANIFEST build-device/a.o out/b.o; do echo x >"$tmp/tree/$f"; done
(cd "$tmp/tree" && gpu_pin_mtimes build-device >/dev/null)
check "gpu_pin_mtimes does nothing without MR_DEVICE_PIN_MTIMES=1" \
  '(( $(stat -c %Y "$tmp/tree/lib/a.cpp") > 946684800 ))'
pinned=$(cd "$tmp/tree" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes out)
check "with MR_DEVICE_PIN_MTIMES=1 the sources and the .device bundle get 2000-01-01 ($pinned)" \
  '(( $(stat -c %Y "$tmp/tree/lib/a.cpp") == 946684800 && $(stat -c %Y "$tmp/tree/CMakeLists.txt") == 946684800 &&
      $(stat -c %Y "$tmp/tree/.device/MANIFEST") == 946684800 )) && [[ "$pinned" == *"3 files of the tree"* ]]'
check "... and .git, build* and the named build folder keep their times" \
  '( for f in .git/HEAD build-device/a.o out/b.o; do (( $(stat -c %Y "$tmp/tree/$f") > 946684800 )) || exit 1; done )'
# ... and a file changed since the last pin (an edit between the device calls) keeps its new time, so ninja rebuilds
# it instead of testing call 1's binary (review diff35 #8); the unchanged ones are pinned again.
echo y >"$tmp/tree/lib/a.cpp"
touch "$tmp/tree/CMakeLists.txt"  # a fresh copy: new time, same contents
again=$(cd "$tmp/tree" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes out)
check "a file changed since the last pin keeps its new time ($again)" \
  '(( $(stat -c %Y "$tmp/tree/lib/a.cpp") > 946684800 && $(stat -c %Y "$tmp/tree/CMakeLists.txt") == 946684800 )) &&
   [[ "$again" == *"2 files of the tree set to 2000-01-01"*"1 changed since the last pin"*"./lib/a.cpp"* ]]'

# The same with real ninja (where installed): an object that depends on a bundle header and a link on a bundle archive,
# built after a pin; then the whole tree copied anew (every file, .device included, newer than the outputs); after
# the next pin ninja has nothing to do, and a header of the bundle really changed is rebuilt.
if command -v ninja >/dev/null; then
  nt="$tmp/ntree"
  mkdir -p "$nt/src" "$nt/.device/include" "$nt/.device/lib" "$nt/build-device"
  echo "int f();" >"$nt/src/a.cpp"
  echo "#define X 1" >"$nt/.device/include/x.h"
  echo "archive" >"$nt/.device/lib/liby.a"
  cat >"$nt/build-device/build.ninja" <<'NINJA'
rule cat
  command = cat $in > $out
build a.o: cat ../src/a.cpp ../.device/include/x.h
build app: cat a.o ../.device/lib/liby.a
NINJA
  fresh_copy() { find "$nt" -path "$nt/build-device" -prune -o -type f -exec touch -d "@$(( $(date +%s) + $1 ))" {} +; }
  (cd "$nt" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes build-device >/dev/null && ninja -C build-device >/dev/null)
  fresh_copy 60
  steps=$(cd "$nt" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes build-device >/dev/null && ninja -C build-device -n | grep -c '^\[' || true)
  check "ninja: a fresh copy of the tree, .device included, after the pin: 0 build steps (got $steps)" '(( steps == 0 ))'
  fresh_copy 120
  echo "#define X 2" >"$nt/.device/include/x.h"
  touch -d "@$(( $(date +%s) + 120 ))" "$nt/.device/include/x.h"
  steps=$(cd "$nt" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes build-device >/dev/null && ninja -C build-device -n | grep -c '^\[' || true)
  check "ninja: ... a bundle header changed since the last pin: its object and the link rebuilt (got $steps)" '(( steps == 2 ))'
fi
exit $fail
