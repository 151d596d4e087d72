#!/bin/sh
# The `runtime_rules_tested_selftest` CTest test: tests/runtime_rules_tested.sh on a fake tree and a fake `rules`
# listing. A rule named only in a comment is untested; a literal id (a family's, or a Diagnostic's) that no rule
# has is unregistered; a tree where a test names each rule and every literal is registered passes. POSIX sh.
#   usage: runtime_rules_tested_selftest.sh RUNTIME_RULES_TESTED_SH
set -u
script=${1:?usage: $0 RUNTIME_RULES_TESTED_SH}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mr-rrt-selftest.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\nprintf "%%s\\n" "launch.a  [error]  (launch) one" "run.b  [error]  (run) two" "v.c  [error]  three"\n' \
  >"$tmp/rules"
chmod +x "$tmp/rules"
fail=0
tree() {  # tree TEST_TEXT SOURCE_TEXT: a fresh fake source root
  rm -rf "$tmp/root" && mkdir -p "$tmp/root/tests/x" "$tmp/root/lib/y" "$tmp/root/apps"
  printf '%s\n' "$1" >"$tmp/root/tests/x/t_test.cpp"
  printf '%s\n' "$2" >"$tmp/root/lib/y/s.cpp"
}
check() {  # check WHAT EXPECTED_EXIT PATTERN...
  what=$1 want=$2
  shift 2
  if [ "$code" -ne "$want" ]; then echo "FAIL ($what): exit $code, expected $want"; sed 's/^/  | /' "$tmp/out"; fail=1; fi
  for p in "$@"; do
    if ! grep -qF -- "$p" "$tmp/out"; then echo "FAIL ($what): no '$p' in:"; sed 's/^/  | /' "$tmp/out"; fail=1; fi
  done
}
ok_src='print("[launch.a] x"); Rule r{"run.b"};'
tree 'CHECK(out == "error[launch.a]"); CHECK(out == "run.b");' "$ok_src"
sh "$script" "$tmp/rules" "$tmp/root" >"$tmp/out" 2>&1; code=$?
check "all named" 0 "all 2 rules"
tree '  // run.b is checked elsewhere
CHECK(out == "error[launch.a]");  // and run.b
# run.b' "$ok_src"
sh "$script" "$tmp/rules" "$tmp/root" >"$tmp/out" 2>&1; code=$?
check "named in comments only" 1 "1 of 2 rules" "  run.b"
tree 'CHECK(out == "error[launch.a]"); CHECK(out == "run.b");' "$ok_src print(\"[launch.made-up] y\");"
sh "$script" "$tmp/rules" "$tmp/root" >"$tmp/out" 2>&1; code=$?
check "unregistered family literal" 1 "  launch.made-up"
tree 'CHECK(out == "error[launch.a]"); CHECK(out == "run.b");' \
  "$ok_src return Diagnostic{Diagnostic::Level::Error, \"loose-id\", e.what()};"
sh "$script" "$tmp/rules" "$tmp/root" >"$tmp/out" 2>&1; code=$?
check "unregistered Diagnostic literal" 1 "  loose-id"
[ "$fail" -eq 0 ] && echo "runtime_rules_tested_selftest: ok"
exit "$fail"
