#!/usr/bin/env bash
# scripts/gpu-common.sh without a GPU (the CTest gpu_common): run_in_session stops everything a bounded part
# started, nested GNU timeouts (process groups of their own) and what a part leaves behind included (review gpu31
# finding 1: a part run out of time left its megatron-run job running beside the next parts); the default build
# folder and the target list (test_distributed with 2+ GPUs, finding 6); the time bounds of the device plan (review
# gpu35 findings 1 and 3): device-build.sh's and gpu-check.sh's bounded builds (a fake slow cmake), the build step's
# count of ninja edges, and gpu-check.sh end to end behind fakes (nvidia-smi, nvcc, cmake, ninja, the binaries):
# part 3a before 2b, rerun once with NCCL_CUMEM_ENABLE=0 where it fails, which the later parts then get.
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

# gpu-check.sh: a build directory with fake binaries. megatron-run logs each call's NCCL_CUMEM_ENABLE; its
# --bring-up-only fails as NCCL does where cuMem is refused unless NCCL_CUMEM_ENABLE=0 (FAKE_NCCL=broken: always).
gb="$tmp/gb"
mkdir -p "$gb/bin"
echo "-D_GLIBCXX_USE_CXX11_ABI=1" >"$gb/build.ninja"
for t in test_optim test_run megatron-run-bench megatron-run-worker; do
  printf '#!/bin/sh
echo "All tests passed (1 assertion in 1 test case)"
' >"$gb/bin/$t"
done
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
echo "phase times of rank 0 (ms per iteration, cuda events)"
FAKE
chmod +x "$gb/bin"/*
gpucheck() { env PATH="$fk:$PATH" REPORT="$tmp/r.md" FAKE_LOG="$tmp/mr.log" MR_GPU_TARGETS= MR_SESSION_GRACE_S=1 \
  MR_GPU_CHECK_RUN_CASES=adam-fp32 MR_GPU_CHECK_REFERENCE= "$@" bash scripts/gpu-check.sh "$gb" >/dev/null 2>&1; }
: >"$tmp/mr.log"
FAKE_EDGES=3 gpucheck
order=$(sed -n 's/^| \([0-9][0-9a-z]*\) | .*/\1/p' "$tmp/r-summary.md" | tr '\n' ' ')
check "gpu-check.sh: the parts in their order, 3a before 2b ($order)" '[[ "$order" == "5 1 2a 3a 2b 3b 4a 4b " ]]'
check "... the build step says how many build steps it has to run" 'grep -q "build step: 3 build steps (ninja edges) to run" "$tmp/r.md"'
check "... the budget is 330 s" 'grep -q "budget 330 s" "$tmp/r.md"'
check "... 3a failed, rerun with NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO" \
  'grep -q "3a failed: once more with NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO" "$tmp/r.md" &&
   grep -q "^NCCL_CUMEM_ENABLE=0 NCCL_DEBUG=INFO .*--bring-up-only" "$tmp/mr.log"'
check "... 3a passes, saying NCCL_CUMEM_ENABLE=0, in the summary too" \
  'grep -q "^| 3a | PASS | world size 1, but only with NCCL_CUMEM_ENABLE=0" "$tmp/r-summary.md" &&
   grep -q "## summary .*NCCL_CUMEM_ENABLE=0 exported for every later part" "$tmp/r.md"'
check "... 2b's and 4b's nccl runs get NCCL_CUMEM_ENABLE=0" \
  '! grep -v -e "--bring-up-only" -e "gloo" "$tmp/mr.log" | grep -v "^NCCL_CUMEM_ENABLE=0 " | grep -q . &&
   grep -q "^NCCL_CUMEM_ENABLE=0 .*--timing-log-level" "$tmp/mr.log" && grep -q "^NCCL_CUMEM_ENABLE=0 .*--distributed-backend nccl" "$tmp/mr.log"'
: >"$tmp/mr.log"
FAKE_NCCL=broken gpucheck
check "gpu-check.sh, NCCL failing either way: 3a FAIL, the later parts without NCCL_CUMEM_ENABLE" \
  'grep -q "^| 3a | FAIL | the one-rank NCCL job failed, with NCCL_CUMEM_ENABLE=0 too" "$tmp/r-summary.md" &&
   grep -q "^NCCL_CUMEM_ENABLE=unset .*--timing-log-level" "$tmp/mr.log"'
t0=$SECONDS
FAKE_BUILD_S=25 FAKE_EDGES=9 gpucheck MR_GPU_CHECK_BUILD_S=2
code=$?
check "gpu-check.sh: a build past MR_GPU_CHECK_BUILD_S stops at it ($((SECONDS - t0)) s), exit $code, nothing runs on" \
  '(( code == 1 && SECONDS - t0 <= 8 && $(left_over) == 0 ))'
check "... point 5 fails saying so, no part ran" \
  'grep -q "^| 5 | FAIL | the build did not finish within 2 s (MR_GPU_CHECK_BUILD_S; 9 build steps left)" "$tmp/r-summary.md" &&
   ! grep -q "^| 1 |" "$tmp/r-summary.md"'
# gpu_pin_mtimes: off by default; with MR_DEVICE_PIN_MTIMES=1 every file of a (fresh) tree gets 2000-01-01, and
# .git, .device and the build folders keep theirs, so a tree copied anew for call 2 does not rebuild call 1's objects.
mkdir -p "$tmp/tree/lib" "$tmp/tree/.git" "$tmp/tree/.device" "$tmp/tree/build-device" "$tmp/tree/out"
for f in lib/a.cpp CMakeLists.txt .git/HEAD .device/MANIFEST build-device/a.o out/b.o; do echo x >"$tmp/tree/$f"; done
(cd "$tmp/tree" && gpu_pin_mtimes build-device >/dev/null)
check "gpu_pin_mtimes does nothing without MR_DEVICE_PIN_MTIMES=1" \
  '(( $(stat -c %Y "$tmp/tree/lib/a.cpp") > 946684800 ))'
pinned=$(cd "$tmp/tree" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes out)
check "with MR_DEVICE_PIN_MTIMES=1 the sources get 2000-01-01 ($pinned)" \
  '(( $(stat -c %Y "$tmp/tree/lib/a.cpp") == 946684800 && $(stat -c %Y "$tmp/tree/CMakeLists.txt") == 946684800 )) &&
   [[ "$pinned" == *"2 files of the tree"* ]]'
check "... and .git, .device, build* and the named build folder keep their times" \
  '( for f in .git/HEAD .device/MANIFEST build-device/a.o out/b.o; do (( $(stat -c %Y "$tmp/tree/$f") > 946684800 )) || exit 1; done )'
# ... and a file changed since the last pin (an edit between the device calls) keeps its new time, so ninja rebuilds
# it instead of testing call 1's binary (review diff35 #8); the unchanged ones are pinned again.
echo y >"$tmp/tree/lib/a.cpp"
touch "$tmp/tree/CMakeLists.txt"  # a fresh copy: new time, same contents
again=$(cd "$tmp/tree" && MR_DEVICE_PIN_MTIMES=1 gpu_pin_mtimes out)
check "a file changed since the last pin keeps its new time ($again)" \
  '(( $(stat -c %Y "$tmp/tree/lib/a.cpp") > 946684800 && $(stat -c %Y "$tmp/tree/CMakeLists.txt") == 946684800 )) &&
   [[ "$again" == *"1 files of the tree set to 2000-01-01"*"1 changed since the last pin"*"./lib/a.cpp"* ]]'
exit $fail
