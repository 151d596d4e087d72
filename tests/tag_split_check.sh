#!/bin/sh
# The `<name>_split_complete` CTest tests: a Catch2 binary that CTest runs as two entries, one per test spec
# (tests/CMakeLists.txt, mr_split_test), runs every one of its cases exactly once that way.
#
# Lists the binary's cases with no spec and with each of the two specs, and fails, naming the cases, when a case
# is in neither half, in both, or when a half is empty. POSIX sh.
#
#   usage: tag_split_check.sh BINARY SPEC_A SPEC_B
set -u
if [ "$#" -ne 3 ]; then
  echo "usage: $0 BINARY SPEC_A SPEC_B" >&2
  exit 2
fi
bin=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-tag-split.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Catch2 v2 exits with the number of cases it listed: the status says nothing here; an empty list is caught below.
list() { "$bin" --list-test-names-only "$@" | sed '/^$/d' | LC_ALL=C sort; }
list >"$tmp/all"
list "$2" >"$tmp/a"
list "$3" >"$tmp/b"

status=0
for half in a b; do
  if [ ! -s "$tmp/$half" ]; then
    [ "$half" = a ] && spec=$2 || spec=$3
    echo "$bin: no case matches '$spec': that CTest entry would run nothing" >&2
    status=1
  fi
done
LC_ALL=C sort "$tmp/a" "$tmp/b" >"$tmp/both"
both=$(LC_ALL=C uniq -d "$tmp/both")
if [ -n "$both" ]; then
  printf '%s: in both halves (run twice):\n%s\n' "$bin" "$both" >&2
  status=1
fi
missing=$(LC_ALL=C comm -23 "$tmp/all" "$tmp/both")
if [ -n "$missing" ]; then
  printf '%s: in neither half (never run):\n%s\n' "$bin" "$missing" >&2
  status=1
fi
extra=$(LC_ALL=C comm -13 "$tmp/all" "$tmp/both" | LC_ALL=C uniq)
if [ -n "$extra" ]; then
  printf '%s: listed by a half but not by the whole list (hidden cases):\n%s\n' "$bin" "$extra" >&2
  status=1
fi
[ "$status" = 0 ] && echo "$(wc -l <"$tmp/all") cases: $(wc -l <"$tmp/a") in '$2', $(wc -l <"$tmp/b") in '$3'"
exit "$status"
