#!/bin/sh
# The `rules_all_tested` CTest test: every validation rule has a test that fires it.
#
# The rules of the stages that are not validation's (parse, plan, launch, run, internal: the parser's and the launcher's
# warnings and refusals, the workers'; `(STAGE)` in `rules --format text`) fire in test_launch, test_run and
# test_distributed, too slow (and LibTorch's) to run here under the hit counter: they are left out, and
# runtime_rules_tested.sh checks statically that a test names each.
#
# Runs each test suite given (the config test suite, the bad-input cases) with MR_RULE_HITS_FILE pointing at one
# fresh temporary file (every process a suite starts, megatron-run included, appends "<id> <count>" for each rule
# whose failing branch fired; see lib/config/rule.h), then checks that every rule `megatron-run rules` lists
# appears there. Every suite runs even when an earlier one failed, so the rules only a later suite fires (the
# input stage's refusals, in the bad-input cases) are not reported as never fired because of it; a suite that
# failed is named on its own, with its last lines, and fails the test.
# Prints the ids that never fired. POSIX sh. The hits file and each suite's TMPDIR are fresh temporary
# directories, so runs do not share them with each other or with the `config` test.
#
#   usage: rules_all_tested.sh MEGATRON_RUN SUITE_COMMAND [SUITE_COMMAND...]
#   each SUITE_COMMAND is one shell command line (run with `sh -c`), e.g. "'build/bin/test_config'"
set -u
if [ "$#" -lt 2 ]; then
  echo "usage: $0 MEGATRON_RUN SUITE_COMMAND [SUITE_COMMAND...]" >&2
  exit 2
fi
bin=$1
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-rule-hits.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

: >"$tmp/hits"
: >"$tmp/failed"
n=0
for suite in "$@"; do
  n=$((n + 1))
  mkdir "$tmp/tmp$n" || exit 2
  MR_RULE_HITS_FILE="$tmp/hits" TMPDIR="$tmp/tmp$n" sh -c "$suite" >"$tmp/suite$n.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "rules_all_tested: suite $n failed (exit $rc): $suite"
    echo "  its last lines:"
    tail -n 40 "$tmp/suite$n.log" | sed 's/^/  | /'
    echo "suite $n (exit $rc): $suite" >>"$tmp/failed"
  fi
done

if ! "$bin" rules --format text >"$tmp/rules.txt"; then
  echo "rules_all_tested: '$bin rules' failed"
  exit 1
fi
awk 'NF && $3 != "(parse)" && $3 != "(plan)" && $3 != "(launch)" && $3 != "(run)" && $3 != "(internal)" { print $1 }' "$tmp/rules.txt" |
  LC_ALL=C sort -u >"$tmp/all"
awk 'NF { print $1 }' "$tmp/hits" | LC_ALL=C sort -u >"$tmp/fired"
LC_ALL=C comm -23 "$tmp/all" "$tmp/fired" >"$tmp/missing"

total=$(wc -l <"$tmp/all" | tr -d ' ')
missing=$(wc -l <"$tmp/missing" | tr -d ' ')
failed=$(wc -l <"$tmp/failed" | tr -d ' ')
if [ "$total" -eq 0 ]; then
  echo "rules_all_tested: '$bin rules' listed no rules"
  exit 1
fi
status=0
if [ "$missing" -ne 0 ]; then
  echo "rules_all_tested: $missing of $total rules never fired in the tests (no test triggers them):"
  sed 's/^/  /' "$tmp/missing"
  if [ "$failed" -ne 0 ]; then
    echo "  (a failed suite may have stopped before the test that fires some of them)"
  fi
  status=1
else
  echo "rules_all_tested: all $total rules fired at least once"
fi
if [ "$failed" -ne 0 ]; then
  echo "rules_all_tested: FAILED because $failed of $n suites failed (see their last lines above):"
  sed 's/^/  /' "$tmp/failed"
  status=1
fi
exit "$status"
