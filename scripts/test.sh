#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGATRON_RUN_CUDA="${MEGATRON_RUN_CUDA:-AUTO}" \
    -DMEGATRON_RUN_WERROR="${MR_WERROR:-OFF}" >/dev/null
fi
cmake --build build -j2
cd build
ctest --output-on-failure -j2 "$@"
