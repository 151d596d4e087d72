#!/bin/sh
# The `rules_all_tested` CTest test: every validation rule has a test that fires it.
#
# Runs the config test suite with MR_RULE_HITS_FILE pointing at a fresh temporary file (every process the
# suite starts, megatron-run included, appends "<id> <count>" for each rule whose failing branch fired; see
# lib/config/rule.h), then checks that every rule `megatron-run rules` lists appears there.
# Prints the ids that never fired. POSIX sh. The hits file and the suite's TMPDIR are fresh temporary
# directories, so runs do not share them with each other or with the `config` test.
#
#   usage: rules_all_tested.sh MEGATRON_RUN TEST_CONFIG [TEST_CONFIG ARGS...]
set -u
if [ "$#" -lt 2 ]; then
  echo "usage: $0 MEGATRON_RUN TEST_CONFIG [TEST_CONFIG ARGS...]" >&2
  exit 2
fi
bin=$1
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-rule-hits.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

status=0
mkdir "$tmp/tmp" || exit 2
if ! MR_RULE_HITS_FILE="$tmp/hits" TMPDIR="$tmp/tmp" "$@" >"$tmp/test.log" 2>&1; then
  echo "rules_all_tested: the test suite failed ($*); its last lines:"
  tail -n 40 "$tmp/test.log"
  status=1
fi
: >>"$tmp/hits"

if ! "$bin" rules --format text >"$tmp/rules.txt"; then
  echo "rules_all_tested: '$bin rules' failed"
  exit 1
fi
awk 'NF { print $1 }' "$tmp/rules.txt" | LC_ALL=C sort -u >"$tmp/all"
awk 'NF { print $1 }' "$tmp/hits" | LC_ALL=C sort -u >"$tmp/fired"
LC_ALL=C comm -23 "$tmp/all" "$tmp/fired" >"$tmp/missing"

total=$(wc -l <"$tmp/all" | tr -d ' ')
missing=$(wc -l <"$tmp/missing" | tr -d ' ')
if [ "$total" -eq 0 ]; then
  echo "rules_all_tested: '$bin rules' listed no rules"
  exit 1
fi
if [ "$missing" -ne 0 ]; then
  echo "rules_all_tested: $missing of $total rules never fired in the tests (no test triggers them):"
  sed 's/^/  /' "$tmp/missing"
  exit 1
fi
echo "rules_all_tested: all $total rules fired at least once"
exit "$status"
