#!/usr/bin/env bash
# On the GPU machine (CUDA toolkit, cmake, ninja, PyTorch 2.x; no Boost, yaml-cpp or Catch2 packages): builds
# megatron-run against the .device/ bundle made by scripts/device-bundle.sh and runs the GPU checks
# (scripts/gpu-check.sh: the optimizer kernels' GPU tests and benchmarks, then the NCCL group tests). See
# docs/device.md.
#
#   scripts/device-build.sh [--build-only]        BUILD=build-device CUDA_ARCHS=native DEPS=.device by default
#
# Torch_DIR comes from the Python torch package (python3 -c 'import torch ...'); set TORCH_DIR to override.
# CMAKE_ARGS: more cmake arguments, split at spaces (docs/device.md simulates the GPU machine's build with them).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-device}
DEPS=${DEPS:-$PWD/.device}
CUDA_ARCHS=${CUDA_ARCHS:-native}
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

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMEGATRON_RUN_DEPS_DIR="$DEPS" -DTorch_DIR="$TORCH_DIR" \
  -DMEGATRON_RUN_TORCH=ON -DMEGATRON_RUN_CUDA=ON -DMR_OPTIM_CUDA_ARCHITECTURES="$CUDA_ARCHS" ${CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$(nproc)"
[[ "${1:-}" == "--build-only" ]] && exit 0

# gpu-check.sh keeps this configuration (it and its parts configure only a folder without build.ninja) and writes
# its report to $REPORT, else $OUT/gpu-check-report.md (the device tool's $OUT), else $BUILD/gpu-check-report.md.
export BUILD
bash scripts/gpu-check.sh "$BUILD"
