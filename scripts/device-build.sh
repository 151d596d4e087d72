#!/usr/bin/env bash
# On the GPU machine (CUDA toolkit, cmake, ninja, PyTorch 2.x; no Boost, yaml-cpp or Catch2 packages): builds
# megatron-run against the .device/ bundle made by scripts/device-bundle.sh. See docs/device.md.
#
#   scripts/device-build.sh --check            THE DEFAULT DEVICE PLAN, one call (timeout_s 600): configure +
#                                              build (at most MR_DEVICE_BUILD_S, 300 s), then the GPU checks in the
#                                              same call (scripts/gpu-check.sh with what the build left of
#                                              MR_DEVICE_CALL_S, 600 s, less its 60 s margin; cheapest parts first,
#                                              the summary always printed). A build stopped at its bound still goes
#                                              on to gpu-check.sh, whose build step finishes it within what the call
#                                              has left less the margin and 150 s for the parts, or reports point 5
#                                              FAIL with the steps left
#   scripts/device-build.sh [--build-only]     the two-call plan's call 1: configure + build, nothing else
#   BUILD=build-device DEPS=.device by default; CUDA_ARCHS: the GPU's compute capability (nvidia-smi), else native
#   MR_DEVICE_PIN_MTIMES=1                     (the device calls) every source file gets one fixed old mtime
#                                              first, here and in gpu-check.sh, so call 2's fresh copy of the tree
#                                              does not rebuild what call 1 built (scripts/gpu-common.sh)
#   MR_DEVICE_BUILD_S=300                      the bound on configure + build, counted from the script's start: at
#                                              it the build is stopped (what was compiled stays in BUILD), the
#                                              script says how many build steps are left and exits 124
#
# The plan (docs/device.md, "The time plan"): the session's device time is 900 s in all (the machine's start, every
# call, the idle waits between calls and the close). Default: one call, `scripts/device-build.sh --check` with
# timeout_s 600: start 120 + the call 600 = 720 s, 180 s left for one rerun of a part or the close; no second copy
# of the tree, no gap between calls. The alternative, two calls: this script without --check (bounded at 300 s),
# then `scripts/gpu-check.sh build-device` sent within 30 s of call 1's reply (the machine goes back after 30 idle
# seconds, `idle_release_s`, and with it build-device/); call 2 finds the build done and runs the checks in about
# 330 s. A call 1 stopped at its bound: call 2 goes on with the build where it stopped (gpu-check.sh bounds it too,
# and prints first how many build steps are left).
#
# Torch_DIR comes from the Python torch package (python3 -c 'import torch ...'); set TORCH_DIR to override.
# CMAKE_ARGS: more cmake arguments, split at spaces (docs/device.md simulates the GPU machine's build with them).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-device}
DEPS=${DEPS:-$PWD/.device}
# shellcheck source=scripts/gpu-common.sh
source scripts/gpu-common.sh
# The GPU's own architecture (nvidia-smi's compute_cap, "9.0" -> 90); CMake's "native" needs CMake 3.24.
CUDA_ARCHS=$(gpu_archs)
[[ "$DEPS" == /* ]] || DEPS="$PWD/$DEPS"

if [[ ! -f "$DEPS/MANIFEST" ]]; then
  echo "device-build: no bundle at $DEPS (run scripts/device-bundle.sh on the build machine and carry .device/)" >&2
  exit 1
fi
head -1 "$DEPS/MANIFEST"
if [[ -z "${TORCH_DIR:-}" ]]; then
  TORCH_DIR=$(python3 -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')
fi
echo "device-build: Torch_DIR=$TORCH_DIR"

# The CUDA compiler by path: LibTorch's CMake, run first, would otherwise look for one itself (and not find it
# where nvcc is not on PATH).
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
bound=${MR_DEVICE_BUILD_S:-300}
gpu_pin_mtimes "$BUILD"  # MR_DEVICE_PIN_MTIMES=1: call 2's copy of the tree must not look newer than this build
timeout --kill-after=10 "$bound" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DMEGATRON_RUN_DEPS_DIR="$DEPS" -DTorch_DIR="$TORCH_DIR" \
  -DMEGATRON_RUN_TORCH=ON -DMEGATRON_RUN_CUDA=ON -DMR_OPTIM_CUDA_ARCHITECTURES="$CUDA_ARCHS" ${CMAKE_ARGS:-} ||
{
  code=$?
  (( code == 124 || code == 137 )) || exit "$code"
  echo "device-build: the configure step passed MR_DEVICE_BUILD_S=$bound s and was stopped" >&2
  exit 124
}
# Only what gpu-check.sh runs (the device time is short; the rest is built and tested on CPU machines), with
# test_distributed where 2+ GPUs are visible (gpu-check.sh's part 3b must not compile it inside its 60 s cap):
# MR_GPU_TARGETS=all builds every target (scripts/gpu-common.sh).
read -r -a targets <<<"$(gpu_targets)"
echo "device-build: configured in ${SECONDS} s; $(gpu_edges "$BUILD" "${targets[@]}") build steps (ninja edges) to run for ${targets[*]:-every target}, within $((bound - SECONDS)) s (MR_DEVICE_BUILD_S=$bound)"
code=0
gpu_build "$((bound - SECONDS))" "$BUILD" "${targets[@]}" || code=$?
if (( code == 124 )) && [[ "${1:-}" == "--check" ]]; then
  # One call: the report and its summary must come back anyway. gpu-check.sh's build step goes on where this one
  # stopped, bounded by what the call has left less its margin and 150 s for the parts; where that is not enough,
  # point 5 fails saying how many build steps were left, and the summary ends the call.
  echo "device-build: stopped at MR_DEVICE_BUILD_S=$bound s; --check: gpu-check.sh goes on with the build within" \
       "what the call has left and reports" >&2
elif (( code == 124 )); then
  echo "device-build: stopped at MR_DEVICE_BUILD_S=$bound s (exit 124). Next device call: scripts/gpu-check.sh $BUILD" \
       "goes on with the build where it stopped, within its own bound, and runs the checks in the time left" \
       "(docs/device.md, \"If call 1 times out\")" >&2
  exit 124
fi
(( code == 0 || code == 124 )) || exit "$code"
if [[ "${1:-}" != "--check" ]]; then
  echo "device-build: built in ${SECONDS} s; next device call: scripts/gpu-check.sh $BUILD"
  exit 0
fi

# --check: one device call runs the build and the checks: gpu-check.sh gets what the build left of
# MR_DEVICE_CALL_S (600 s, the device tool's limit per command) as its own MR_DEVICE_CALL_S, and keeps its margin
# (MR_GPU_CHECK_MARGIN_S, 60 s) inside that: its parts get min(330, what is left - 60), at least 240 s after a
# 300 s build, cheapest first, so the report ends with its summary instead of being cut off.
MR_DEVICE_CALL_S=$(( ${MR_DEVICE_CALL_S:-600} - SECONDS ))
export MR_DEVICE_CALL_S
echo "device-build: build step ended at ${SECONDS} s; gpu-check.sh gets the ${MR_DEVICE_CALL_S} s left of the call" \
     "(its parts: min(330, $(( MR_DEVICE_CALL_S - ${MR_GPU_CHECK_MARGIN_S:-60} ))) s after its build step)"

# gpu-check.sh keeps this configuration (it and its parts configure only a folder without build.ninja) and writes
# its report to $REPORT, else $OUT/gpu-check-report.md (the device tool's $OUT), else $BUILD/gpu-check-report.md.
export BUILD
bash scripts/gpu-check.sh "$BUILD"
