#!/usr/bin/env bash
# Builds with AddressSanitizer + UndefinedBehaviorSanitizer and runs the tests under them (docs/robustness.md).
#   scripts/sanitize.sh [config|all] [CTEST ARGS...]
#     config  megatron-run + test_config, LibTorch OFF; CTests config and bad_inputs (what .ci/run runs)  -> build-asan/
#     all     the whole tree, LibTorch ON, CUDA OFF; every CTest entry                                     -> build-asan-full/
# BUILD= overrides the folder. The tests get the sanitizers' options and suppressions (tests/sanitize/) from CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
shift || true
export CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=1
case $mode in
  config)
    build=${BUILD:-build-asan}
    [[ -f $build/build.ninja ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMEGATRON_RUN_SANITIZE=address,undefined -DMEGATRON_RUN_TORCH=OFF -DMEGATRON_RUN_CUDA=OFF \
      -DMEGATRON_RUN_WERROR=ON >/dev/null
    cmake --build "$build" -j2 --target megatron-run test_config
    cd "$build" && ctest --output-on-failure -R '^(config|bad_inputs)$' "$@" ;;
  all)
    build=${BUILD:-build-asan-full}
    [[ -f $build/build.ninja ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMEGATRON_RUN_SANITIZE=address,undefined -DMEGATRON_RUN_TORCH=ON -DMEGATRON_RUN_CUDA=OFF \
      -DMEGATRON_RUN_WERROR=ON >/dev/null
    cmake --build "$build" -j2
    cd "$build" && ctest --output-on-failure -j2 "$@" ;;
  *) echo "sanitize.sh: config or all, not '$mode'" >&2; exit 2 ;;
esac
