#!/usr/bin/env bash
# On the GPU machine (CUDA toolkit, cmake, ninja, PyTorch 2.x; no Boost, yaml-cpp or Catch2 packages): builds
# megatron-run against the .device/ bundle made by scripts/device-bundle.sh. See docs/device.md.
#
#   scripts/device-build.sh [--build-only]     device call 1: configure + build, nothing else (the default)
#   scripts/device-build.sh --check            build, then the GPU checks in the same call (scripts/gpu-check.sh
#                                              with what the build left of the call; only when the build is known
#                                              to be quick)
#   BUILD=build-device DEPS=.device by default; CUDA_ARCHS: the GPU's compute capability (nvidia-smi), else native
#
# The plan is two device calls, each under the tool's 600 s: call 1 this script, call 2
# `scripts/gpu-check.sh build-device` on the still warm machine (it finds the build done and gives each check part
# its own cap).
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
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DMEGATRON_RUN_DEPS_DIR="$DEPS" -DTorch_DIR="$TORCH_DIR" \
  -DMEGATRON_RUN_TORCH=ON -DMEGATRON_RUN_CUDA=ON -DMR_OPTIM_CUDA_ARCHITECTURES="$CUDA_ARCHS" ${CMAKE_ARGS:-}
# Only what gpu-check.sh runs (the device time is short; the rest is built and tested on CPU machines), with
# test_distributed where 2+ GPUs are visible (gpu-check.sh's part 3b must not compile it inside its 60 s cap):
# MR_GPU_TARGETS=all builds every target (scripts/gpu-common.sh).
read -r -a targets <<<"$(gpu_targets)"
cmake --build "$BUILD" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
if [[ "${1:-}" != "--check" ]]; then
  echo "device-build: built in ${SECONDS} s; next device call: scripts/gpu-check.sh $BUILD"
  exit 0
fi

# --check: one device call runs the build and the checks: gpu-check.sh gets what the build left of
# MR_DEVICE_CALL_S (600 s, the device tool's limit per command) as its own MR_DEVICE_CALL_S, and keeps its margin
# inside that (its parts get min(540, what is left - 60)), so the report ends with its summary instead of being cut
# off.
MR_DEVICE_CALL_S=$(( ${MR_DEVICE_CALL_S:-600} - SECONDS ))
export MR_DEVICE_CALL_S
echo "device-build: built in ${SECONDS} s; gpu-check.sh gets the ${MR_DEVICE_CALL_S} s left of the call"
(( MR_DEVICE_CALL_S - 60 >= 300 )) || echo "device-build: little time left for the checks: run scripts/gpu-check.sh $BUILD as a call of its own" >&2

# gpu-check.sh keeps this configuration (it and its parts configure only a folder without build.ninja) and writes
# its report to $REPORT, else $OUT/gpu-check-report.md (the device tool's $OUT), else $BUILD/gpu-check-report.md.
export BUILD
bash scripts/gpu-check.sh "$BUILD"
