#!/usr/bin/env bash
# Runs the optimizer kernels' GPU checks on a machine with a CUDA GPU: builds test_optim and megatron-run-bench with
# CUDA, runs the whole optimizer test binary (the GPU cases must run, not skip) and the GPU benchmarks.
#
#   scripts/gpu-check-optim.sh [--quick]        BUILD=build-gpu CUDA_ARCHS=native by default
#
# LibTorch: Debian's libtorch-dev if installed, else the Python torch package (-DTorch_DIR from torch itself).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
CUDA_ARCHS=${CUDA_ARCHS:-native}
QUICK=()
[[ "${1:-}" == "--quick" ]] && QUICK=(--quick)

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
  echo "gpu-check-optim: no NVIDIA GPU visible" >&2
  exit 1
fi

if [[ ! -f "$BUILD/build.ninja" ]]; then
  extra=()
  if [[ ! -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake ]] && python3 -c 'import torch' 2>/dev/null; then
    extra+=(-DTorch_DIR="$(python3 -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')")
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGATRON_RUN_CUDA=ON -DMEGATRON_RUN_TORCH=ON \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -DMR_OPTIM_CUDA_ARCHITECTURES="$CUDA_ARCHS" "${extra[@]}"
fi
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
