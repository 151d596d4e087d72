#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs one for SECONDS.
#   scripts/fuzz.sh TARGET SECONDS      TARGET: config_file | cli | yaml_cfg | convert | check | checkpoint | tokenizer | all
# Seeds come from tests/data (the corpus) and tests/bad-inputs; a dictionary of flag names from the schema.
# A crash, leak, timeout (10 s an input) or UB report stops the run and leaves the input in build-fuzz/findings/.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
targets=(config_file cli yaml_cfg convert check checkpoint tokenizer)
if [[ $target == all ]]; then
  for t in "${targets[@]}"; do "$0" "$t" "$seconds"; done
  exit 0
fi
[[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz.sh: unknown target '$target' (${targets[*]} all)" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ and libclang-rt-14-dev (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

if [[ ! -f build-fuzz/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMEGATRON_RUN_FUZZ=ON -DMEGATRON_RUN_SANITIZE=address,undefined \
    -DMEGATRON_RUN_TORCH=OFF -DMEGATRON_RUN_CUDA=OFF >/dev/null
fi
cmake --build build-fuzz -j2 --target "fuzz_$target"

work=build-fuzz/work/$target seeds=build-fuzz/seeds/$target
mkdir -p "$work" "$seeds" build-fuzz/findings
if [[ -z "$(ls -A "$seeds")" ]]; then
  case $target in
    config_file|check)
      cp tests/data/corpus/functional-tests/*.yaml "$seeds/"
      find tests/bad-inputs/cases -name '*.case' -exec sh -c 'for f; do cp "$f" "$0/$(echo "$f" | tr / _)"; done' "$seeds" {} + ;;
    yaml_cfg)
      cp tests/data/corpus/functional-tests/*.yaml "$seeds/"
      cp configs/examples/* "$seeds/" 2>/dev/null || true ;;
    cli)
      # each reference argv, its words NUL-separated, alone and as a program launch
      /usr/bin/env python3 - "$seeds" <<'PY'
import glob, json, os, sys
for f in glob.glob("tests/data/corpus/reference/*.json"):
    argv = json.load(open(f)).get("argv") or []
    open(os.path.join(sys.argv[1], os.path.basename(f)[:-5]), "wb").write("\0".join(argv).encode())
    # and as a program launch: half of the flags before the program, half after it (fuzz_cli.cpp)
    half = len(argv) // 2
    launch = argv[:half] + ["PROG"] + argv[half:]
    open(os.path.join(sys.argv[1], os.path.basename(f)[:-5] + ".prog"), "wb").write("\0".join(launch).encode())
PY
      ;;
    convert)
      i=0
      for w in '([1]*3+[0]*1)*3' '[1,0,1]' '4' '(1,2)' '1,2' '{"a": [1, 2.5, null]}' 'SIGTERM' 'flash' '0x10' '1e-3' \
               'inf' 'attn=64' '[[1]*2]*2' 'full_iteration'; do
        for t in $(seq 0 18); do printf "\\$(printf %03o "$t")%s" "$w" > "$seeds/s$((i++))"; done
      done ;;
    checkpoint)
      # the first byte picks the reader: 0 safetensors, 1 metadata JSON, 2 tracker
      /usr/bin/env python3 - "$seeds" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
hdr = json.dumps({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                  "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}).encode()
hdr += b" " * (-(len(hdr) + 8) % 8)
open(os.path.join(d, "st"), "wb").write(b"\0" + struct.pack("<Q", len(hdr)) + hdr + bytes(22))
piece = {"tensor": "w", "key": "w", "kind": "param", "dtype": "F32", "global_shape": [4, 2], "global_offset": [2, 0],
         "local_shape": [2, 2], "flattened_range": [0, 4]}
meta = {"format": "megatron-run checkpoint", "version": 1, "iteration": 10, "consumed_samples": 80,
        "skipped_iterations": 0, "optimizer_steps": 10, "world_size": 2, "rank": 1,
        "layout": {"tp": 2, "pp": 1, "cp": 1, "dp": 1, "ep": 1, "etp": 1, "expert_dp": 2, "tp_rank": 1, "pp_rank": 0,
                   "dp_rank": 0, "ep_rank": 0, "etp_rank": 0, "expert_dp_rank": 1, "shard": [0, 8], "expert_shard": [8, 8]},
        "optimizer": "adam", "params_dtype": "fp32", "distributed_optimizer": False, "rng": {"seed": "1234"},
        "opt_param_scheduler": None, "grad_scaler": None, "tensors": "rank_00001.safetensors", "pieces": [piece],
        "args": {}}
open(os.path.join(d, "meta"), "wb").write(b"\1" + json.dumps(meta).encode())
open(os.path.join(d, "tracker"), "wb").write(b"\2" + b"10")
PY
      ;;
    tokenizer)
      # the first byte picks the reader: odd a SentencePiece model, even a tokenizer.json (tests/data/tokenizers)
      { printf '\001'; cat tests/data/tokenizers/spm_bpe60.model; } > "$seeds/spm"
      for t in hf_bpe hf_unigram; do { printf '\000'; cat "tests/data/tokenizers/$t/tokenizer.json"; } > "$seeds/$t"; done ;;
  esac
fi
dict=build-fuzz/flags.dict
grep -ho '"--[a-z0-9-]*"' lib/config/schema/*.inc | sort -u > "$dict"
printf '"MODEL_ARGS:"\n"ENV_VARS:"\n"&a"\n"*a"\n"<<:"\n"${"\n"!!"\n"---"\n' >> "$dict"

echo "fuzz.sh: fuzz_$target for ${seconds}s"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
"build-fuzz/bin/fuzz_$target" "$work" "$seeds" -dict="$dict" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="build-fuzz/findings/$target-" 2>&1 | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)' | tail -n 30
