#!/usr/bin/env bash
# Runs the optimizer kernels' GPU checks on a machine with a CUDA GPU: builds test_optim and megatron-run-bench with
# CUDA, runs the whole optimizer test binary (the GPU cases must run, not skip) and the GPU benchmarks.
#
#   scripts/gpu-check-optim.sh [--quick]        BUILD=build-device where the .device/ bundle is, else build-gpu;
#                                               CUDA_ARCHS: the GPU's compute capability by default
#
# A new folder is configured as scripts/gpu-common.sh says: the .device/ bundle where it is, LibTorch from Debian's
# libtorch-dev if installed, else the Python torch package (-DTorch_DIR from torch itself).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-common.sh
source scripts/gpu-common.sh
BUILD=${BUILD:-$(gpu_default_build)}
QUICK=()
[[ "${1:-}" == "--quick" ]] && QUICK=(--quick)

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
  echo "gpu-check-optim: no NVIDIA GPU visible" >&2
  exit 1
fi

gpu_configure "$BUILD"
cmake --build "$BUILD" -j "$(nproc)" --target test_optim megatron-run-bench

log=$(mktemp)
status=0
"$BUILD/bin/test_optim" 2>&1 | tee "$log" || status=$?
if grep -q "skipping GPU test" "$log"; then
  echo "gpu-check-optim: GPU test cases were skipped: the build or the driver does not see the GPU" >&2
  status=1
fi
rm -f "$log"
"$BUILD/bin/megatron-run-bench" "${QUICK[@]}" gpu.adamw.bf16_master gpu.muon.ns5_bf16 || status=$?
exit $status
