#!/usr/bin/env bash
# Line and branch coverage of the validation chain (lib/config/validate/) by the config tests.
#
# Builds with gcov instrumentation (-DMEGATRON_RUN_COVERAGE=ON: --coverage -O0) into build-coverage/, runs
# test_config (which also runs the instrumented megatron-run), and writes an lcov HTML report of
# lib/config/validate/ to build-coverage/coverage/index.html, then prints a one-line summary. Also checks,
# through MR_RULE_HITS_FILE, how many of the rules `megatron-run rules` lists fired during the run.
#
#   scripts/coverage.sh            # MR_COVERAGE_BUILD_DIR (default build-coverage), MR_COVERAGE_JOBS (2)
#
# Needs lcov/genhtml (Debian package lcov); installs it when run as root and it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${MR_COVERAGE_BUILD_DIR:-$root/build-coverage}
jobs=${MR_COVERAGE_JOBS:-2}
report=$build/coverage

if ! command -v lcov >/dev/null 2>&1 || ! command -v genhtml >/dev/null 2>&1; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "coverage: installing lcov" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lcov >/dev/null
  else
    echo "coverage: lcov/genhtml not found; install them (Debian: sudo apt-get install -y lcov)" >&2
    exit 1
  fi
fi

# lcov 1.x and 2.x spell the branch-coverage switches differently.
lcov_major=$(lcov --version | sed -n 's/.*version \([0-9]*\).*/\1/Ip' | head -n 1)
if [[ ${lcov_major:-1} -ge 2 ]]; then
  rc=(--rc branch_coverage=1 --rc no_exception_branch=1)
  lcov_quiet=(--quiet --ignore-errors unused,inconsistent)
else
  rc=(--rc lcov_branch_coverage=1 --rc geninfo_no_exception_branch=1)
  lcov_quiet=(--quiet)
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMEGATRON_RUN_COVERAGE=ON \
  -DMEGATRON_RUN_TORCH=OFF -DMEGATRON_RUN_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target megatron-run test_config

# Fresh counters, then the tests (test_config runs the instrumented megatron-run too; gcov merges).
find "$build" -name '*.gcda' -delete
rm -rf "$report"
mkdir -p "$report"
hits=$report/rule-hits.txt
: >"$hits"
MR_RULE_HITS_FILE=$hits "$build/bin/test_config" >"$report/test_config.log" 2>&1 || {
  tail -n 40 "$report/test_config.log" >&2
  echo "coverage: test_config failed (log: $report/test_config.log)" >&2
  exit 1
}

# lcov's chatter (and any warnings) goes to lcov.log; it is shown when a step fails.
log=$report/lcov.log
run_lcov() {
  if ! "$@" 2>>"$log"; then
    cat "$log" >&2
    echo "coverage: '$1' failed (log: $log)" >&2
    exit 1
  fi
}
run_lcov lcov "${lcov_quiet[@]}" "${rc[@]}" --capture --directory "$build/lib/config" --base-directory "$root" \
  --output-file "$report/all.info"
run_lcov lcov "${lcov_quiet[@]}" "${rc[@]}" --extract "$report/all.info" "$root/lib/config/validate/*" \
  --output-file "$report/validate.info"
run_lcov genhtml --quiet "${rc[@]}" --branch-coverage --legend --title "megatron-run lib/config/validate" \
  --prefix "$root" --output-directory "$report" "$report/validate.info"

summary=$(lcov "${rc[@]}" --summary "$report/validate.info" 2>&1)
lines=$(sed -n 's/^ *lines\.*: *\(.*\)$/\1/p' <<<"$summary")
branches=$(sed -n 's/^ *branches\.*: *\(.*\)$/\1/p' <<<"$summary")
functions=$(sed -n 's/^ *functions\.*: *\(.*\)$/\1/p' <<<"$summary")
# Rules `megatron-run rules` lists whose failing branch fired (the rules_all_tested test checks all do).
"$build/bin/megatron-run" rules --format text | awk 'NF { print $1 }' | LC_ALL=C sort -u >"$report/rules.txt"
awk 'NF { print $1 }' "$hits" | LC_ALL=C sort -u >"$report/fired.txt"
total_rules=$(wc -l <"$report/rules.txt" | tr -d ' ')
fired_rules=$(LC_ALL=C comm -12 "$report/rules.txt" "$report/fired.txt" | wc -l | tr -d ' ')
echo "lib/config/validate coverage: lines ${lines:-?}, branches ${branches:-?}, functions ${functions:-?};" \
  "rules fired ${fired_rules} of ${total_rules}; report: ${report#"$root"/}/index.html"
