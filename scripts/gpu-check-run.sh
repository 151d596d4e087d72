#!/usr/bin/env bash
# Point 2 of the GPU check (scripts/gpu-check.sh): the one-rank training run on two backends, compared line by
# line. For each case it runs `megatron-run --config configs/default.yaml` with the case's flags once per
# backend and compares every iteration line's synthetic loss and grad norm, and the final line's parameter
# checksum, last loss and last grad norm (hex floats):
#   exact  cases (adam/sgd in fp32, bf16 and fp16; lion in bf16, as Megatron refuses an emerging
#          optimizer with fp16): every field identical, as text;
#   bound  cases (muon, adaptive_muon: Newton-Schulz on cuBLAS sums in another order than the CPU): each loss within a relative
#          1e-3 and each grad norm within 1e-2 relative + 2e-3 absolute (the log prints it with 3 decimals); the
#          checksum is reported, not compared;
#   runs   cases (soap: its first update depends on the eigensolver's last bits, docs/optim.md, so cuSOLVER and
#          LAPACK start two different runs): both runs finish, every loss and grad norm is finite, and the first
#          iteration's loss (before any step) is identical. The two TP=2 muon cases run two ranks: on nccl they need 2 GPUs
#          (skipped, saying so, with fewer; MR_GPU_CHECK_GPUS overrides the count).
#
#   scripts/gpu-check-run.sh BUILD_DIR [BACKEND_A BACKEND_B]    default: gloo nccl (the CPU run, the GPU run)
#   scripts/gpu-check-run.sh BUILD_DIR --record FILE            runs every case on gloo only and writes the
#                                                               compared fields to FILE (the reference, below)
#   MR_GPU_CHECK_RUN_CASES="adam-fp32 ckpt"                     a subset of the cases (default: all; "ckpt":
#                                                               the checkpoint round trips across the backends)
#   MR_GPU_CHECK_REFERENCE=FILE                                 the recorded gloo side (default
#                                                               tests/data/gpu-check-reference.txt; empty: none)
#
# The reference: the gloo runs of every case, recorded on a CPU machine (docs/device.md says how to regenerate it)
# and carried in the repository. BACKEND_B's run of each case is compared against it too, by the case's own rule,
# in a column of its own: so a device run still shows whether the GPU agrees with the CPU when its own gloo run
# failed or timed out (the case then fails for that run, with the reference's verdict beside it). A case whose
# flags changed since it was recorded reads "stale"; a reference difference where the two backends agree is
# reported (REF DIFF), not failed: the recording machine's LibTorch, BLAS and compiler differ from the device's.
#
# On a machine without a GPU, `scripts/gpu-check-run.sh build gloo gloo` runs the same comparison CPU against CPU
# (every case identical, muon included), which checks the script itself. Exit 1 if a case failed.
#
# Time (the device's 900 s, docs/device.md): each case's two runs go at once, BACKEND_A's in the background (on the
# device the CPU-only gloo run; MR_GPU_CHECK_RUN_PARALLEL=0: one after the other), and the cases no other point
# runs come first (adam-bf16-extras, adam-fp16-inf, the checkpoint round trips), so a part cut at its cap loses the
# rows other cases overlap.
#
# Bounds, so that one hung run cannot eat the device call: every run is killed after MR_GPU_CHECK_RUN_CASE_S
# seconds (default 90; its case then says TIMEOUT and the table goes on), and the workers' own rendezvous and
# collective timeout is MR_DIST_TIMEOUT_S (default here 60 s, not Megatron's 10 minutes). NCCL_DEBUG=WARN (unless
# set) puts NCCL's reason for a failure into the run's stderr tail. The first case that fails on nccl is run once
# more on nccl alone with CUDA_LAUNCH_BLOCKING=1 and MR_CUDA_SYNC_CHECK=1, so that an asynchronous CUDA fault is
# reported under the kernel that made it; that rerun's tail follows the case's tails.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
record=""
if [[ "${2:-}" == --record ]]; then
  record=${3:?gpu-check-run: --record needs a FILE}
  a=gloo b=""
else
  a=${2:-gloo}
  b=${3:-nccl}
fi
reference=${MR_GPU_CHECK_REFERENCE-tests/data/gpu-check-reference.txt}
[[ -n "$record" || ! -s "$reference" ]] && reference=""
bin="$build/bin/megatron-run"
[[ -x "$bin" ]] || { echo "gpu-check-run: no $bin (build first)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-gpu-check-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# name | mode | flags (on top of configs/default.yaml: 2 layers, hidden 256, adam, fp32, 20 iterations) | ranks |
# environment (NAME=VALUE words for megatron-run)
cases=(
  "adam-fp32|exact|"
  "adam-bf16|exact|--bf16 --train-iters 8"
  # fp16 gradients (run/grad_format.h): at the default initial loss scale they overflow for 14 iterations (skipped,
  # the scale backs off), then step; bf16 gradients with --grad-reduce-in-bf16.
  "adam-fp16|exact|--fp16 --train-iters 18"
  "adam-bf16-grads|exact|--bf16 --grad-reduce-in-bf16 --train-iters 8"
  "adam-fp16-acc|exact|--fp16 --accumulate-allreduce-grads-in-fp32 --train-iters 18"
  # The precision-aware optimizer: a bf16 first moment and an fp16 second moment with per-parameter scales, the
  # fp32 masters as remainders beside the bf16 params; fp16 main params with their scales.
  "adam-aware-bf16|exact|--bf16 --use-precision-aware-optimizer --use-distributed-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype fp16 --train-iters 8"
  "adam-aware-fp16-main|exact|--fp16 --initial-loss-scale 262144 --use-precision-aware-optimizer --use-distributed-optimizer --main-params-dtype fp16 --train-iters 8"
  # fp8 (e4m3) moments with per-parameter scales (Transformer Engine's quantizer scale and scale_inv).
  "adam-aware-fp8|exact|--bf16 --use-precision-aware-optimizer --use-distributed-optimizer --exp-avg-dtype fp8 --exp-avg-sq-dtype fp8 --train-iters 8"
  "sgd-fp32|exact|--optimizer sgd --sgd-momentum 0.9 --train-iters 8"
  "lion-bf16|exact|--optimizer lion --bf16 --train-iters 8"
  "muon-fp32|bound|--optimizer muon --train-iters 4"
  "muon-bf16|bound|--optimizer muon --bf16 --train-iters 4"
  "adaptive-muon-bf16|bound|--optimizer adaptive_muon --bf16 --train-iters 4"
  # SOAP: cuBLAS + cuSOLVER on the GPU, LAPACK on the CPU (the kernels against PyTorch: test_optim "[soap][gpu]").
  "soap-fp32|runs|--optimizer soap --train-iters 4"
  "soap-bf16|runs|--optimizer soap --bf16 --train-iters 4"
  # Routed experts (the tail of the flat buffer), one rank.
  "moe-bf16|exact|--num-experts 4 --bf16 --train-iters 8"
  "moe-muon-bf16|bound|--num-experts 4 --optimizer muon --bf16 --train-iters 4"
  # The run-side kernels the cases above leave out (review gpu31 finding 3): --embedding-min-norm (cuda_ops.cu's
  # row_max/row_sum/scale_rows), --log-params-norm on bf16 and fp16 params (sum_squares_model), --log-num-zeros-in-grad
  # (zeros_kernel), the replica hash (CudaBackend::checksum: at one rank it runs, its value is compared only across
  # replicas), and MR_RUN_NONFINITE_AT's inf (set_grad) through the fp16 loss scaler's skip; the params norm, the
  # zero count and the hash lines are compared too.
  "adam-bf16-extras|exact|--bf16 --use-distributed-optimizer --embedding-min-norm 0.32 --log-params-norm --log-num-zeros-in-grad --check-weight-hash-across-dp-replicas-interval 4 --train-iters 8"
  "adam-fp16-inf|exact|--fp16 --initial-loss-scale 262144 --log-params-norm --log-num-zeros-in-grad --train-iters 8||MR_RUN_NONFINITE_AT=3,6"
  # Two ranks, TP=2: Muon's TP modes across the group (on nccl: the device step over NCCL). A GPU each.
  "muon-tp2-duplicated|bound|--nproc-per-node 2 --tensor-model-parallel-size 2 --optimizer muon --muon-tp-mode duplicated --train-iters 4|2"
  "muon-tp2-distributed|bound|--nproc-per-node 2 --tensor-model-parallel-size 2 --optimizer muon --muon-tp-mode distributed --bf16 --train-iters 4|2"
  # Two ranks, DP=2, distributed optimizer with experts: dense and expert shards reduce-scattered and gathered.
  "moe-dist-dp2|exact|--nproc-per-node 2 --num-experts 4 --use-distributed-optimizer --bf16 --train-iters 8|2"
  # Two ranks, DP=2: Muon's layer-wise distributed optimizer (each rank's whole matrices broadcast after the step).
  "muon-dist-dp2|bound|--nproc-per-node 2 --optimizer muon --use-distributed-optimizer --bf16 --train-iters 4|2"
)
want=${MR_GPU_CHECK_RUN_CASES:-}
case_s=${MR_GPU_CHECK_RUN_CASE_S:-90}
export MR_DIST_TIMEOUT_S=${MR_DIST_TIMEOUT_S:-60}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
reran=0  # the first failing nccl case has had its diagnostic rerun
parallel=${MR_GPU_CHECK_RUN_PARALLEL:-1}

# One bounded run: run OUT ERR ARGS... (OUT = ERR: both streams in one file) -> megatron-run's exit code, 124
# when it was killed for time. The case's environment (run_env: NAME=VALUE words) goes to megatron-run.
# --foreground: the run stays in this script's process group, so that a timeout around the whole script (GNU
# timeout signals one process group; gpu-check.sh stops the part's whole session) stops the run with it; at its
# own limit only megatron-run is signalled, and it stops its workers (a worker dies with its launcher).
run_env=()
run() {
  local out=$1 err=$2
  shift 2
  if [[ "$out" == "$err" ]]; then timeout --foreground --kill-after=5 "$case_s" env "${run_env[@]}" "$bin" "$@" >"$out" 2>&1
  else timeout --foreground --kill-after=5 "$case_s" env "${run_env[@]}" "$bin" "$@" >"$out" 2>"$err"; fi
  local code=$?
  (( code == 137 )) && code=124  # killed after the grace period: still a timeout
  (( code == 124 )) && echo "gpu-check-run: killed after ${case_s} s (MR_GPU_CHECK_RUN_CASE_S)" >>"$err"
  return "$code"
}
# GPUs a case may use on nccl (NCCL puts one rank on each): the visible ones, or MR_GPU_CHECK_GPUS.
gpus=${MR_GPU_CHECK_GPUS:-$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU')}

# The compared fields of a run's output, one per line: "it N loss X", "it N norm Y", with --log-num-zeros-in-grad
# "it N zeros Z", with --log-params-norm "it N pnorm P", with the replica check "hash N match", then "final ...".
# Each kind in iteration order (a stable numeric sort on N), not in the order the log's lines arrived in, so the
# record (--record) and the comparisons see one order whatever the interleaving of the ranks' output.
fields() {
  local by_it=(env LC_ALL=C sort -s -k2,2n)
  sed -n 's/.* iteration *\([0-9]*\)\/.*synthetic loss: \([^ |]*\).*/it \1 loss \2/p' "$1" | "${by_it[@]}"
  sed -n 's/.* iteration *\([0-9]*\)\/.*grad norm: \([^ |]*\).*/it \1 norm \2/p' "$1" | "${by_it[@]}"
  sed -n 's/.* iteration *\([0-9]*\)\/.*num zeros: \([^ |]*\).*/it \1 zeros \2/p' "$1" | "${by_it[@]}"
  sed -n 's/.* iteration *\([0-9]*\)\/.*params norm: \([^ |]*\).*/it \1 pnorm \2/p' "$1" | "${by_it[@]}"
  sed -n 's/.*>>> Weight hashes match after \([0-9]*\) iterations.*/hash \1 match/p' "$1" | "${by_it[@]}"
  sed -n 's/.*(parameter checksum \([0-9a-f]*\); last loss \([^,]*\), last grad norm \([^)]*\)).*/final checksum \1 loss \2 norm \3/p' "$1"
}

# The verdict of one comparison by a case's rule: judge MODE FIELDS_A FIELDS_B -> "PASS: ..." or "FAIL: ...".
judge() {
  local mode=$1 fa=$2 fb=$3
  if [[ ! -s "$fa" || ! -s "$fb" ]] || ! grep -q '^final' "$fa" || ! grep -q '^final' "$fb"; then
    echo "FAIL: no iteration or final lines"
  elif [[ "$mode" == runs ]]; then
    paste -d' ' "$fa" "$fb" | awk '
      $1 == "it" { if ($5 != "it" || $2 != $6 || $3 != $7) { bad = bad " mismatched-lines"; next }
                   if ($4 !~ /^[0-9.eE+-]+$/ || $8 !~ /^[0-9.eE+-]+$/) bad = bad " non-finite@" $2
                   if ($2 == 1 && $3 == "loss" && $4 != $8) bad = bad " first-loss"
                   n++ }
      END { if (n == 0 && bad == "") bad = " no lines"
            if (bad != "") printf "FAIL:%s", bad
            else printf "PASS: both runs finished, %d fields finite, the first loss identical", n }'
  elif [[ "$mode" == exact ]]; then
    if cmp -s "$fa" "$fb"; then
      echo "PASS: $(grep -c "^it" "$fa") per-iteration fields, checksum, last loss and norm identical"
    else
      echo "FAIL: differs at: $(diff "$fa" "$fb" | grep '^[<>]' | head -2 | tr '\n' ' ')"
    fi
  else
    # Bound: the same lines, the values within the bound.
    paste -d' ' "$fa" "$fb" | awk '
      function abs(x) { return x < 0 ? -x : x }
      $1 == "it" { if ($5 != "it" || $2 != $6 || $3 != $7) { bad = bad " mismatched-lines"; next }
                   x = $4 + 0; y = $8 + 0; d = abs(x - y)
                   if ($3 == "loss") { r = d / (abs(x) > 0 ? abs(x) : 1); if (r > rl) rl = r; if (r > 1e-3) bad = bad " loss@" $2 }
                   else { if (d > 1e-2 * abs(x) + 2e-3) bad = bad " norm@" $2; if (d > dn) dn = d }
                   n++ }
      END { if (n == 0 && bad == "") bad = " no lines"
            if (bad != "") printf "FAIL:%s", bad
            else printf "PASS: %d fields within the bound (largest relative loss difference %.2e, grad norm difference %.3g)", n, rl, dn }'
  fi
}

# --record: the gloo side of every case, into FILE (tab-separated: "NAME<TAB>case<TAB>SPEC" with the case's whole
# line from the table above, then "NAME<TAB>FIELD LINE" per compared field, in fields' order). The cases go in
# by name (LC_ALL=C), not in the table's order, so that moving or adding a case in the table moves no recorded
# lines; the comparison finds a case by its name (ref_fields), so the order does not matter to it.
if [[ -n "$record" ]]; then
  {
    echo "# megatron-run gpu-check reference: the gloo (CPU backend) side of scripts/gpu-check-run.sh's cases"
    echo "# recorded by: scripts/gpu-check-run.sh BUILD --record FILE (docs/device.md); do not edit by hand"
    echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d'), $(uname -m), Torch_DIR $(sed -n 's/^Torch_DIR:[^=]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -1)"
  } >"$tmp/record"
  failed=0
  : >"$tmp/cases"
  for c in "${cases[@]}"; do
    IFS='|' read -r name mode flags ranks envs <<<"$c"
    read -r -a run_env <<<"$envs"
    [[ -n "$want" && " $want " != *" $name "* ]] && continue
    # shellcheck disable=SC2086
    if run "$tmp/$name.out" "$tmp/$name.err" --config configs/default.yaml --distributed-backend gloo $flags &&
       fields "$tmp/$name.out" >"$tmp/$name.f" && grep -q '^final' "$tmp/$name.f"; then
      printf '%s\tcase\t%s\n' "$name" "$c" >>"$tmp/cases"
      sed "s/^/$name\t/" "$tmp/$name.f" >>"$tmp/cases"
      echo "recorded $name ($(grep -c '^it' "$tmp/$name.f") fields)"
    else
      failed=1
      echo "gpu-check-run: $name failed on gloo; not recorded" >&2
      tail -n 5 "$tmp/$name.out" "$tmp/$name.err" >&2
    fi
  done
  # by name; stable, so each case's own lines keep their order (its "case" line first, then fields' order)
  LC_ALL=C sort -s -t$'\t' -k1,1 "$tmp/cases" >>"$tmp/record"
  (( failed == 0 )) && cp "$tmp/record" "$record" && echo "gpu-check-run: reference in $record"
  exit $failed
fi

# The recorded fields of a case into FILE: ref_fields NAME SPEC FILE -> 0 when recorded for this very case
# line, 1 when not recorded (prints "not recorded"), 2 when recorded for other flags (prints "stale").
ref_fields() {
  local spec
  spec=$(awk -F'\t' -v n="$1" '$1 == n && $2 == "case" { print $3; exit }' "$reference")
  if [[ -z "$spec" ]]; then echo "not recorded"; return 1; fi
  if [[ "$spec" != "$2" ]]; then echo "stale: recorded for other flags"; return 2; fi
  awk -F'\t' -v n="$1" '$1 == n && $2 != "case" { print $2 }' "$reference" >"$3"
}

failed=0
refdiff=0
if [[ -n "$reference" ]]; then
  echo "reference: $reference ($(sed -n '3s/^# //p' "$reference"))"
  printf '| case | %s | %s | verdict | %s against the reference |\n| --- | --- | --- | --- | --- |\n' "$a" "$b" "$b"
else
  printf '| case | %s | %s | verdict |\n| --- | --- | --- | --- |\n' "$a" "$b"
fi

# Two runs at once (parallel=1, the default; MR_GPU_CHECK_RUN_PARALLEL=0: one after the other): both OUT ERR ARGS
# lists, the second given after a lone "--". A's run goes to the background (on the device it is the CPU-only gloo
# run: 16 cores), B's runs here; each launcher draws its own free rendezvous port (docs/launch.md, MASTER_PORT), so
# two jobs at once do not meet. -> code_a, code_b. At most one of the two is on nccl, so the GPU holds one job at a
# time.
run_pair() {
  local args_a=() pid
  while [[ "$1" != -- ]]; do args_a+=("$1"); shift; done
  shift
  if (( parallel )); then
    run "${args_a[@]}" &
    pid=$!
    run "$@"
    code_b=$?
    wait "$pid"
    code_a=$?
  else
    run "${args_a[@]}"
    code_a=$?
    run "$@"
    code_b=$?
  fi
}

# One case of the table: its two runs (at once), the comparison, its row.
run_case() {
  local c=$1 name mode flags ranks envs ok timed ran_b code verdict refv sum_a sum_b be
  IFS='|' read -r name mode flags ranks envs <<<"$c"
  read -r -a run_env <<<"$envs"
  if [[ " $a $b " == *" nccl "* ]] && (( ${ranks:-1} > gpus )); then
    printf '| %s (%s) | | | SKIPPED: needs %s GPUs, %s visible |%s\n' "$name" "$mode" "${ranks:-1}" "$gpus" "${reference:+ |}"
    return 0
  fi
  ok=1
  timed=""
  ran_b=0
  # shellcheck disable=SC2086
  run_pair "$tmp/$name.$a.out" "$tmp/$name.$a.err" --config configs/default.yaml --distributed-backend "$a" $flags -- \
           "$tmp/$name.$b.out" "$tmp/$name.$b.err" --config configs/default.yaml --distributed-backend "$b" $flags
  for be in a b; do
    code=code_$be
    case ${!code} in
      0) [[ "$be" == b ]] && ran_b=1 ;;
      124) ok=0 timed="$timed ${!be}" ;;
      *) ok=0 ;;
    esac
  done
  sum_a=$(sed -n 's/.*(parameter checksum \([0-9a-f]*\);.*/\1/p' "$tmp/$name.$a.out")
  sum_b=$(sed -n 's/.*(parameter checksum \([0-9a-f]*\);.*/\1/p' "$tmp/$name.$b.out")
  fields "$tmp/$name.$b.out" >"$tmp/$name.$b.f"
  if [[ -n "$timed" ]]; then
    verdict="TIMEOUT: the run on${timed} passed ${case_s} s and was killed"
  elif (( ok == 0 )); then
    verdict="FAIL: a run failed"
  else
    fields "$tmp/$name.$a.out" >"$tmp/$name.$a.f"
    verdict=$(judge "$mode" "$tmp/$name.$a.f" "$tmp/$name.$b.f")
    [[ "$verdict" == PASS* ]] || ok=0
  fi
  refv=""
  if [[ -n "$reference" ]]; then
    if refv=$(ref_fields "$name" "$c" "$tmp/$name.ref.f"); then
      if (( ran_b )); then refv=$(judge "$mode" "$tmp/$name.ref.f" "$tmp/$name.$b.f")
      else refv="-: the $b run failed"; fi
      if [[ "$refv" == FAIL* ]]; then
        refdiff=1
        (( ok )) && refv="REF DIFF (the backends agree here): ${refv#FAIL: }"
      fi
    fi
  fi
  if (( ok == 0 )); then
    failed=1
    echo "--- $name: the tails of the two runs" >&2
    for be in "$a" "$b"; do tail -n 5 "$tmp/$name.$be.out" "$tmp/$name.$be.err" >&2; done
    if (( reran == 0 )) && [[ " $a $b " == *" nccl "* ]]; then
      reran=1
      # shellcheck disable=SC2086
      CUDA_LAUNCH_BLOCKING=1 MR_CUDA_SYNC_CHECK=1 run "$tmp/$name.rerun.out" "$tmp/$name.rerun.err" \
        --config configs/default.yaml --distributed-backend nccl $flags
      code=$?
      echo "--- $name: rerun on nccl with CUDA_LAUNCH_BLOCKING=1 MR_CUDA_SYNC_CHECK=1 (exit $code)" >&2
      tail -n 15 "$tmp/$name.rerun.out" "$tmp/$name.rerun.err" >&2
      verdict="$verdict (rerun with CUDA_LAUNCH_BLOCKING=1: exit $code, tail in the log)"
    fi
  fi
  printf '| %s (%s) | %s | %s | %s |%s\n' "$name" "$mode" "${sum_a:-?}" "${sum_b:-?}" "$verdict" "${reference:+ $refv |}"
}

# Checkpoints across the backends (--save through one backend's host copies, --load through the other's): 4
# iterations saved on one, resumed on the other up to 8, against 8 iterations in one go on the loader's backend
# (--lr-decay-iters 8 in all three, the resumed run keeping its own schedule): the final checksum, last loss and
# last grad norm identical. The two directions run side by side, one run per backend at a time: both saves, then
# both loads (each from the other backend's save), then both whole runs.
ckpt_round_trips() {
  local ckpt=(--config configs/default.yaml --lr-decay-iters 8) s l dir name d ok timed verdict resumed whole sum_r sum_w
  local -A code
  run_env=()
  # by direction, not by name: with one backend twice (gloo gloo, the script's own check) the names are the same
  local da="$tmp/ckpt.ab" db="$tmp/ckpt.ba"
  run_pair "$da.save.out" "$da.save.out" "${ckpt[@]}" --distributed-backend "$a" --train-iters 4 --save "$da" --save-interval 4 -- \
           "$db.save.out" "$db.save.out" "${ckpt[@]}" --distributed-backend "$b" --train-iters 4 --save "$db" --save-interval 4
  code[$da.save]=$code_a code[$db.save]=$code_b
  run_pair "$db.load.out" "$db.load.out" "${ckpt[@]}" --distributed-backend "$a" --train-iters 8 --load "$db" --override-opt-param-scheduler -- \
           "$da.load.out" "$da.load.out" "${ckpt[@]}" --distributed-backend "$b" --train-iters 8 --load "$da" --override-opt-param-scheduler
  code[$db.load]=$code_a code[$da.load]=$code_b
  run_pair "$db.whole.out" "$db.whole.out" "${ckpt[@]}" --distributed-backend "$a" --train-iters 8 -- \
           "$da.whole.out" "$da.whole.out" "${ckpt[@]}" --distributed-backend "$b" --train-iters 8
  code[$db.whole]=$code_a code[$da.whole]=$code_b
  for pair in "$a $b ab" "$b $a ba"; do
    read -r s l dir <<<"$pair"
    name="ckpt-$s-to-$l"
    d="$tmp/ckpt.$dir"
    ok=1
    timed=""
    for step in save load whole; do
      case ${code[$d.$step]} in 0) ;; 124) ok=0 timed="$timed $step" ;; *) ok=0 ;; esac
    done
    resumed=$(fields "$d.load.out" | grep '^final')
    whole=$(fields "$d.whole.out" | grep '^final')
    if [[ -n "$timed" ]]; then
      verdict="TIMEOUT: the${timed} run passed ${case_s} s and was killed"
    elif (( ok == 0 )); then
      verdict="FAIL: a run failed"
    elif ! grep -q "successfully loaded checkpoint" "$d.load.out"; then
      ok=0
      verdict="FAIL: the checkpoint was not loaded"
    elif [[ -n "$whole" && "$resumed" == "$whole" ]]; then
      verdict="PASS: saved on $s at 4, resumed on $l to 8: checksum, last loss and norm as in one run"
    else
      ok=0
      verdict="FAIL: resumed '$resumed' vs whole '$whole'"
    fi
    if (( ok == 0 )); then
      failed=1
      echo "--- $name: the tails of the three runs" >&2
      tail -n 5 "$d.save.out" "$d.load.out" "$d.whole.out" >&2
    fi
    sum_r=$(sed -n 's/.*(parameter checksum \([0-9a-f]*\);.*/\1/p' "$d.load.out")
    sum_w=$(sed -n 's/.*(parameter checksum \([0-9a-f]*\);.*/\1/p' "$d.whole.out")
    printf '| %s (exact) | %s | %s | %s |\n' "$name" "${sum_r:-?}" "${sum_w:-?}" "$verdict"
  done
}

# The order: first what no other point runs (first_cases: the run-side kernels of adam-bf16-extras and
# adam-fp16-inf, then the checkpoint round trips, "ckpt"), so that a part cut at its cap loses rows that other
# cases cover; then the table's cases in their order.
first_cases=(adam-bf16-extras adam-fp16-inf ckpt)
order=("${first_cases[@]}")
for c in "${cases[@]}"; do
  n=${c%%|*}
  [[ " ${first_cases[*]} " == *" $n "* ]] || order+=("$n")
done
for n in "${order[@]}"; do
  [[ -n "$want" && " $want " != *" $n "* ]] && continue
  if [[ "$n" == ckpt ]]; then ckpt_round_trips; continue; fi
  for c in "${cases[@]}"; do [[ "${c%%|*}" == "$n" ]] && run_case "$c"; done
done
(( refdiff )) && echo "note: a $b run differs from the recorded reference (the column above); where the two backends agree that is the recording machine's CPU side, not the GPU"
exit $failed
