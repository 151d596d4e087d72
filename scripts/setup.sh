#!/usr/bin/env bash
# Installs what megatron-run needs (Debian packages) and builds it into build/. Idempotent.
#   MEGATRON_RUN_CUDA=AUTO|ON|OFF   build the CUDA kernels (AUTO: when nvcc is found)
#   MR_BUILD_TYPE=Release|Debug     CMake build type (default Release)
#   MR_WERROR=ON                    warnings are errors, nvcc's and the host compiler's in the .cu files too (CI)
#   MR_CUDA_ARCHS="80;90;100"       the CUDA architectures (CI compiles sm_80, sm_90 and sm_100; no GPU needed)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost-program-options-dev libboost-log-dev
  libyaml-cpp-dev catch2
  libtorch-dev libgloo-dev
  libopenblas0-pthread libopenblas-dev
  nlohmann-json3-dev ccache
  python3-torch python3-jsonschema python3-yaml graphviz
  chromium zsh fish
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# LibTorch must use OpenBLAS, not the reference BLAS (30x slower matmuls).
if command -v update-alternatives >/dev/null; then
  lib=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -m1 openblas-pthread || true)
  [[ -n "$lib" ]] && update-alternatives --set libblas.so.3-x86_64-linux-gnu "$lib" >/dev/null 2>&1 || true
fi

cmake -S . -B build -G Ninja \
  -DCMAKE_BUILD_TYPE="${MR_BUILD_TYPE:-Release}" \
  -DMEGATRON_RUN_CUDA="${MEGATRON_RUN_CUDA:-AUTO}" \
  -DMEGATRON_RUN_WERROR="${MR_WERROR:-OFF}" -DMR_OPTIM_CUDA_ARCHITECTURES="${MR_CUDA_ARCHS:-80;90;100}" >/dev/null
cmake --build build -j2
echo "setup: built build/bin/megatron-run"
