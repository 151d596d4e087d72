#!/bin/sh
# The `rules_all_tested_selftest` CTest test: tests/rules_all_tested.sh on fake suites and a fake `rules` listing.
# A failed first suite must not hide what a later suite fired (every suite runs and their hits merge), and the
# failure must be named as the suite's, apart from the rules that never fired. POSIX sh.
#   usage: rules_all_tested_selftest.sh RULES_ALL_TESTED_SH
set -u
script=${1:?usage: $0 RULES_ALL_TESTED_SH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-rat-selftest.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
# launch.w is a rule of a stage rules_all_tested leaves out (runtime_rules_tested.sh's): never fired, not missing.
printf '#!/bin/sh\nprintf "a.x one\\nb.y two\\ninput.z three\\nlaunch.w  [warning]  (launch) four\\n"\n' >"$tmp/rules"
chmod +x "$tmp/rules"
fail=0
check() {  # check WHAT EXPECTED_EXIT PATTERN... (each a fixed string the output must contain)
  what=$1 want=$2
  shift 2
  if [ "$code" -ne "$want" ]; then echo "FAIL ($what): exit $code, expected $want"; fail=1; fi
  for p in "$@"; do
    if ! grep -qF -- "$p" "$tmp/out"; then echo "FAIL ($what): no '$p' in:"; sed 's/^/  | /' "$tmp/out"; fail=1; fi
  done
}
fire() { echo "echo '$1 1' >>\"\$MR_RULE_HITS_FILE\""; }
# The first suite fails: the second still runs, its rules count, and the failure is the suite's.
sh "$script" "$tmp/rules" "$(fire a.x); echo boom; exit 3" "$(fire b.y); $(fire input.z)" >"$tmp/out" 2>&1
code=$?
check "first suite fails" 1 "suite 1 failed (exit 3)" "| boom" "all 3 rules fired" "1 of 2 suites failed"
if grep -q "never fired" "$tmp/out"; then echo "FAIL (first suite fails): rules listed as never fired"; fail=1; fi
# Both pass, a rule never fires: listed, no suite named.
sh "$script" "$tmp/rules" "$(fire a.x)" "$(fire b.y)" >"$tmp/out" 2>&1
code=$?
check "a rule never fires" 1 "1 of 3 rules never fired" "  input.z"
if grep -q "suites failed" "$tmp/out"; then echo "FAIL (a rule never fires): a suite named as failed"; fail=1; fi
# Both pass, every rule fires.
sh "$script" "$tmp/rules" "$(fire a.x)" "$(fire b.y); $(fire input.z)" >"$tmp/out" 2>&1
code=$?
check "all fire" 0 "all 3 rules fired at least once"
[ "$fail" -eq 0 ] && echo "rules_all_tested_selftest: ok"
exit "$fail"
