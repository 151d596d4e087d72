#!/bin/sh
# The `runtime_rules_tested` CTest test: every rule outside validation's stages (parse, plan, launch, run: the
# parser's and the launcher's warnings and refusals, the training run's workers'; config/rule.h) is named by a test.
#
# rules_all_tested proves validation's rules by their hits in test_config and the bad-input cases. These fire in
# test_launch, test_run and test_distributed, which start processes or need LibTorch: running them under the hit
# counter would take minutes (and LibTorch), so this check is static: each id must appear outside a comment in a
# file under tests/ other than this script (a test that triggers it and checks the id it prints). It also checks the other way: every
# id of these families that the sources (lib/, apps/) write as a string literal ("id" or "[id]") is a rule that
# `megatron-run rules` lists, so an id printed without its Rule (or misspelt) fails here. POSIX sh.
#
#   usage: runtime_rules_tested.sh MEGATRON_RUN SOURCE_ROOT
set -u
if [ "$#" -ne 2 ]; then
  echo "usage: $0 MEGATRON_RUN SOURCE_ROOT" >&2
  exit 2
fi
bin=$1
root=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-runtime-rules.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

if ! "$bin" rules --format text >"$tmp/rules.txt"; then
  echo "runtime_rules_tested: '$bin rules' failed"
  exit 1
fi
# "ID  [level]  (stage) description": the rules of the stages that are not validation's.
awk '$3 == "(parse)" || $3 == "(plan)" || $3 == "(launch)" || $3 == "(run)" || $3 == "(internal)" { print $1 }' "$tmp/rules.txt" |
  LC_ALL=C sort -u >"$tmp/runtime"
awk 'NF { print $1 }' "$tmp/rules.txt" | LC_ALL=C sort -u >"$tmp/all"
total=$(wc -l <"$tmp/runtime" | tr -d ' ')
if [ "$total" -eq 0 ]; then
  echo "runtime_rules_tested: '$bin rules' listed no rule of the parse, plan, launch or run stages"
  exit 1
fi
status=0

# The tests' text without comments: whole-line comments (#, //) and // comments after code, so that a test that
# only mentions an id in a comment does not count.
find "$root/tests" -type f ! -name 'runtime_rules_tested*.sh' ! -path '*/data/*' -print | LC_ALL=C sort |
  while read -r f; do
    sed -e 's/^[[:space:]]*#.*$//' -e 's/^[[:space:]]*\/\/.*$//' -e 's/[[:space:]]\/\/[[:space:]].*$//' "$f"
  done >"$tmp/tests.txt"
: >"$tmp/untested"
while read -r id; do
  if ! grep -qF -e "$id" "$tmp/tests.txt"; then echo "$id" >>"$tmp/untested"; fi
done <"$tmp/runtime"
if [ -s "$tmp/untested" ]; then
  echo "runtime_rules_tested: $(wc -l <"$tmp/untested" | tr -d ' ') of $total rules of the parse, plan, launch and run stages are named by no test under tests/:"
  sed 's/^/  /' "$tmp/untested"
  status=1
fi

# The ids of these families the sources write as literals: each must be a registered rule.
# Also any id a Diagnostic is built with as a literal (Diagnostic{Level, "id", ...}), whatever its family.
{
  grep -rhoE --include='*.cpp' --include='*.h' '["[](checkpoint|dist|launch|parse|run|schedule)\.[a-z0-9_-]+[]"]' \
    "$root/lib" "$root/apps" | sed 's/^.//; s/.$//'
  grep -rhoE --include='*.cpp' --include='*.h' 'Diagnostic\{Diagnostic::Level::[A-Za-z]+, "[^"]+"' "$root/lib" "$root/apps" |
    sed 's/.*, "//; s/"$//'
} | LC_ALL=C sort -u >"$tmp/literals"
LC_ALL=C comm -23 "$tmp/literals" "$tmp/all" | grep -v '\.\(h\|cpp\|inc\|def\)$' >"$tmp/unregistered"
if [ -s "$tmp/unregistered" ]; then
  echo "runtime_rules_tested: ids in lib/ or apps/ that no registered rule has (declare a Rule, print its id):"
  sed 's/^/  /' "$tmp/unregistered"
  status=1
fi
[ "$status" -eq 0 ] && echo "runtime_rules_tested: all $total rules of the parse, plan, launch and run stages are named by a test"
exit "$status"
