#!/usr/bin/env bash
# The GPU test cases, run where a GPU is: the `gpu` CTest, the `test_gpu` target and points 1 and 2a of
# scripts/gpu-check.sh all run this, so they run the same cases and judge them the same way.
#
#   tests/gpu_tests.sh BUILD_DIR [optim|run|all]     (default all)
#     optim: test_optim "[gpu],[geometry]"  every optimizer kernel against the reference, Muon/SOAP within bounds,
#                                          the launch index arithmetic (host)
#     run:   test_run "[gpu],[device]"      the synthetic gradient and gradient rounding kernels against the CPU
#                                          loops, the CUDA backend's host arithmetic
#
# Exit status: 0 the cases ran and passed, none skipped; 1 a case failed, or a GPU case skipped although a GPU is
# visible (a build without CUDA, a driver the runtime refuses: the skip's reason is printed); 77 no GPU visible
# (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them all): nothing was run, and CTest reports the test as Skipped (SKIP_RETURN_CODE 77), never as
# Passed, because without a GPU these cases prove nothing about GPU behaviour.
set -uo pipefail
build=${1:?usage: tests/gpu_tests.sh BUILD_DIR [optim|run|all]}
part=${2:-all}
case $part in
  optim) parts=(optim) ;;
  run) parts=(run) ;;
  all) parts=(optim run) ;;
  *) echo "gpu_tests: unknown part '$part' (optim, run or all)" >&2; exit 2 ;;
esac

# CUDA_VISIBLE_DEVICES that hides every GPU (nvidia-smi ignores it): the rule of lib/util/gpu_devices.cpp's
# GpuDevices::hidden (empty, -1 or a list starting with it, NoDevFiles).
if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]] &&
   [[ -z $CUDA_VISIBLE_DEVICES || $CUDA_VISIBLE_DEVICES == -1* || $CUDA_VISIBLE_DEVICES == NoDevFiles ]]; then
  echo "gpu_tests: NO GPU visible (CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU): the GPU test cases" \
       "were NOT run; this is not a pass"
  exit 77
fi
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU'); fi
if (( gpus == 0 )); then
  echo "gpu_tests: NO GPU visible (nvidia-smi lists none): the GPU test cases were NOT run; this is not a pass"
  exit 77
fi

rc=0
out=$(mktemp "${TMPDIR:-/tmp}/mr-gpu-tests.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
for p in "${parts[@]}"; do
  if [[ $p == optim ]]; then cmd=("$build/bin/test_optim" "[gpu],[geometry]")
  else cmd=("$build/bin/test_run" "[gpu],[device]"); fi
  if [[ ! -x "${cmd[0]}" ]]; then
    echo "gpu_tests: no ${cmd[0]} (build it first)"
    rc=1
    continue
  fi
  echo "gpu_tests: ${cmd[*]} ($gpus GPU(s) visible)"
  "${cmd[@]}" 2>&1 | tee "$out"
  code=${PIPESTATUS[0]}
  if (( code != 0 )); then
    echo "gpu_tests: ${cmd[0]##*/} failed (exit $code)"
    rc=1
  elif grep -q "skipping GPU test" "$out"; then
    echo "gpu_tests: ${cmd[0]##*/}: GPU cases were skipped with a GPU visible: $(grep -m1 -A1 'skipping GPU test' "$out" | tr '\n' ' ')"
    rc=1
  fi
done
exit $rc
