# Sourced by scripts/gpu-check*.sh and device-build.sh (not run): what they share about the GPU machine's build.
#
#   gpu_default_build            the build folder when none is given: build-device where the .device/ bundle is here
#                                (.device/MANIFEST: the GPU machine, docs/device.md), else build-gpu
#   gpu_count                    the GPUs nvidia-smi -L lists (not its MIG lines); 0 without nvidia-smi
#   gpu_targets                  the targets the checks run (MR_GPU_TARGETS overrides; "all": every target, printed
#                                as nothing): test_distributed too where 2+ GPUs are visible, so that part 3b
#                                (gpu-check-distributed.sh) does not compile it inside its cap
#   gpu_configure BUILD          configures BUILD for CUDA unless it has a build.ninja already (a configured folder
#                                keeps its configuration): the .device/ bundle (-DMEGATRON_RUN_DEPS_DIR) where
#                                .device/MANIFEST exists, Torch_DIR from the Python torch package where Debian's
#                                libtorch-dev is absent, nvcc by path, the GPU's compute capability (CUDA_ARCHS)
#   gpu_edges BUILD TARGET...    how many build steps (ninja edges) a build of TARGETs would run now (`ninja -n` on a
#                                copy of the manifest, past CMake's glob check, which a dry run of build.ninja
#                                itself stops at; none named: every target); "?" where ninja cannot say. A full
#                                rebuild where none was expected (the copied tree newer than the objects) shows at
#                                once
#   gpu_build SECONDS BUILD TARGET...
#                                cmake --build BUILD (-j nproc) of TARGETs, stopped after SECONDS (GNU timeout: its
#                                process group, ninja and the compilers; KILL 10 s later) -> cmake's exit code, 124
#                                when it ran out of time (then it says so and how many edges are left; what was
#                                compiled stays, and the next build goes on from there)
#   gpu_pin_mtimes BUILD         with MR_DEVICE_PIN_MTIMES=1 only: every file of the tree outside .git and the build
#                                folders, the carried .device/ bundle included (its headers and .a files are inputs
#                                of the objects and links too, and the tool carries it anew with each call), gets
#                                one fixed old time (2000-01-01), so that a tree copied anew for the next device
#                                call (new mtimes) does not look newer than the last call's objects and rebuild
#                                everything. The files' sha256 are kept in BUILD/.mr-source-sums:
#                                a file changed since the last pin keeps its time and is rebuilt. Only for a fresh
#                                copy whose every build ran after a pin (the device machine): in a working checkout
#                                an edit made before the first pin would be hidden from ninja
# Run from the repository root.

gpu_default_build() {
  if [[ -f .device/MANIFEST ]]; then echo build-device; else echo build-gpu; fi
}

gpu_count() {
  { nvidia-smi -L 2>/dev/null || true; } | grep -c '^GPU'
}

gpu_targets() {
  local t=${MR_GPU_TARGETS:-megatron-run megatron-run-worker megatron-run-bench test_optim test_run}
  [[ "$t" == all ]] && return 0
  if [[ -z "${MR_GPU_TARGETS:-}" ]] && (( $(gpu_count) >= 2 )); then t="$t test_distributed"; fi
  echo "$t"
}

# The GPU's own architecture (nvidia-smi's compute_cap, "9.0" -> 90); CMake's "native" needs CMake 3.24.
gpu_archs() {
  local a=${CUDA_ARCHS:-}
  if [[ -z "$a" ]]; then
    a=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .') || true
    [[ "$a" =~ ^[0-9]+$ ]] || a=native
  fi
  echo "$a"
}

gpu_configure() {  # BUILD -> cmake's exit code (0 when already configured)
  local build=$1
  [[ -f "$build/build.ninja" ]] && return 0
  local extra=()
  if [[ -n "${TORCH_DIR:-}" ]]; then
    extra+=(-DTorch_DIR="$TORCH_DIR")
  elif [[ ! -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake ]] && python3 -c 'import torch' 2>/dev/null; then
    extra+=(-DTorch_DIR="$(python3 -c 'import torch, os; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')")
  fi
  [[ -f .device/MANIFEST ]] && extra+=(-DMEGATRON_RUN_DEPS_DIR="$PWD/.device")
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGATRON_RUN_CUDA=ON -DMEGATRON_RUN_TORCH=ON \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DMR_OPTIM_CUDA_ARCHITECTURES="$(gpu_archs)" "${extra[@]}"
}

gpu_pin_mtimes() {  # BUILD
  [[ "${MR_DEVICE_PIN_MTIMES:-0}" == 1 ]] || return 0
  local build=${1:-build-device} now old changed pinned
  build=${build#./}
  now=$(mktemp) old="$build/.mr-source-sums" changed=$(mktemp)
  # .device/ is pinned as well (review gpu37 #1): the device tool replaces carried paths with each call, so its
  # headers and archives would otherwise arrive newer than the last call's objects.
  find . \( -path ./.git -o -path './build*' -o -path "./$build" \) -prune -o -type f -print0 |
    sort -z | xargs -0 -r sha256sum >"$now"
  # A file whose contents differ from the last pinned tree's keeps its new time, so ninja rebuilds it (an edit
  # between the device calls is not hidden); the first call pins everything.
  if [[ -f "$old" ]]; then
    grep -vxF -f "$old" "$now" | sed 's/^[0-9a-f]*  //' >"$changed" || true
  fi
  local paths
  paths=$(mktemp)
  sed 's/^[0-9a-f]*  //' "$now" | { if [[ -s "$changed" ]]; then grep -vxF -f "$changed"; else cat; fi; } >"$paths" || true
  tr '\n' '\0' <"$paths" | xargs -0 -r touch -h -d @946684800 --
  pinned=$(wc -l <"$paths")
  rm -f "$paths"
  mkdir -p "$build" && cp "$now" "$old"
  echo "gpu_pin_mtimes: $pinned files of the tree set to 2000-01-01 (MR_DEVICE_PIN_MTIMES=1); $(wc -l <"$changed") changed since the last pin, left newer: $(head -5 "$changed" | tr '\n' ' ')"
  rm -f "$now" "$changed"
}

gpu_edges() {  # BUILD TARGET... -> a number, or "?"
  local build=$1 out
  shift
  [[ -f "$build/build.ninja" ]] || { echo "?"; return 0; }
  # Not `ninja -n` on build.ninja itself: CMake's glob check (CONFIGURE_DEPENDS) is always dirty in a dry run, so
  # ninja -n "regenerates" the manifest ("Re-checking globbed directories...", "Re-running CMake...") and ends
  # there, 2 steps whatever is left. A copy of the manifest under another name has no edge that regenerates it.
  cp "$build/build.ninja" "$build/.mr-edges.ninja" 2>/dev/null || { echo "?"; return 0; }
  if out=$(ninja -C "$build" -f .mr-edges.ninja -n "$@" 2>/dev/null); then
    grep -c '^\[' <<<"$out" || true
  else
    echo "?"
  fi
  rm -f "$build/.mr-edges.ninja"
}

gpu_build() {  # SECONDS BUILD TARGET... -> cmake's exit code, 124 at the bound
  local limit=$1 build=$2 code
  shift 2
  (( limit < 1 )) && limit=1
  timeout --kill-after=10 "$limit" cmake --build "$build" -j "$(nproc)" ${1:+--target "$@"}
  code=$?
  (( code == 137 )) && code=124
  if (( code == 124 )); then
    echo "gpu_build: the build of ${*:-every target} in $build passed its bound, $limit s, and was stopped;" \
         "$(gpu_edges "$build" "$@") build steps (ninja edges) are left; what was compiled stays in $build" >&2
  fi
  return "$code"
}

# Bounded runs that stop everything they started. GNU timeout signals one process group, but a command's children
# may make groups of their own (a nested GNU timeout does, the launcher does for its workers), which then outlive
# the bound. A session holds them all (setsid; nothing here starts another session).
#   run_in_session SECONDS OUTFILE COMMAND...   runs COMMAND in a session of its own, stdout and stderr into
#                                               OUTFILE; at SECONDS (or when COMMAND ends) every process left in
#                                               the session gets TERM, then KILL 10 s (MR_SESSION_GRACE_S) later;
#                                               -> COMMAND's exit code, 124 when it ran out of time. The session's id
#                                               is in $session_sid while it runs (for a TERM trap: stop_session).
# The caller must not have job control on (set +m, a script's default): a background child then leads no process
# group, so setsid does not fork and the child's pid is the session's id.
session_sid=""

signal_session() {  # SIGNAL SID: every process of that session, by its id
  local pids
  pids=$(ps -eo pid=,sid= | awk -v s="$2" '$2 == s { print $1 }')
  # shellcheck disable=SC2086
  [[ -n "$pids" ]] && kill "-$1" $pids 2>/dev/null
  return 0
}
session_alive() { ps -eo sid= | awk -v s="$1" '$1 == s { f = 1 } END { exit !f }'; }
stop_session() {  # SID: TERM to all of it, KILL to what is left after the grace
  local sid=$1 i
  session_alive "$sid" || return 0
  signal_session TERM "$sid"
  for (( i = 0; i < ${MR_SESSION_GRACE_S:-10} * 10; ++i )); do session_alive "$sid" || return 0; sleep 0.1; done
  signal_session KILL "$sid"
}
run_in_session() {
  local limit=$1 out=$2 code=0 end c
  shift 2
  setsid "$@" >"$out" 2>&1 </dev/null &
  session_sid=$!
  end=$((SECONDS + limit))
  # Short sleeps, not one wait: a TERM trap of the caller runs between them.
  while kill -0 "$session_sid" 2>/dev/null && (( SECONDS < end )); do sleep 0.2; done
  kill -0 "$session_sid" 2>/dev/null && code=124
  stop_session "$session_sid"
  wait "$session_sid" 2>/dev/null
  c=$?
  (( code == 124 )) || code=$c
  session_sid=""
  return "$code"
}
