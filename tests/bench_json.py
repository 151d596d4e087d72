#!/usr/bin/env python3
"""The `bench_json` CTest test: `megatron-run-bench --json` prints exactly one JSON document on stdout.

Runs the benchmark runner with --json --quick on the given benchmark names and parses the whole of its stdout
with json.loads (no line may come before or after the document: benchmark details and library output go to
stderr). Checks the document is a list with one result per name, each with the runner's fields (the target and
its direction among them: docs/performance.md), and that an unknown name, an empty name and `--json=true` give
exit 2 with a JSON error document on stdout; --list --json is a JSON list of names (an unknown one refused);
--help and -h print the usage, as plain text also with --json.
Usage: bench_json.py MEGATRON_RUN_BENCH NAME...
"""
import json, subprocess, sys


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    try:
        doc = json.loads(p.stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        sys.exit(f"FAIL {' '.join(argv)}: stdout is not one JSON document ({e}):\n{p.stdout[:2000]!r}")
    return p.returncode, doc


def main():
    bench, names = sys.argv[1], sys.argv[2:]
    rc, doc = run([bench, "--json", "--quick"] + names)
    if rc != 0:
        sys.exit(f"FAIL: exit {rc}")
    if not isinstance(doc, list) or [r.get("name") for r in doc] != names:
        sys.exit(f"FAIL: expected one result per benchmark {names}, got {doc!r}")
    for r in doc:
        missing = {"name", "value", "unit", "baseline", "baseline_value", "ratio", "higher_is_better", "target",
                   "below_target"} - set(r)
        if missing:
            sys.exit(f"FAIL: result {r!r} lacks {sorted(missing)}")
        t = r["target"]
        if not isinstance(r["higher_is_better"], bool) or not isinstance(r["below_target"], bool):
            sys.exit(f"FAIL: higher_is_better and below_target are booleans: {r!r}")
        if t is None:
            if r["below_target"]:
                sys.exit(f"FAIL: a result without a target cannot be below it: {r!r}")
            continue
        if set(t) != {"of", "op", "bound"} or t["of"] not in ("ratio", "value") or t["op"] not in (">=", ">", "<=", "<"):
            sys.exit(f"FAIL: a target is {{of: ratio|value, op: >=|>|<=|<, bound}}: {r!r}")
        x, b = r[t["of"]], t["bound"]
        meets = {">=": x >= b, ">": x > b, "<=": x <= b, "<": x < b}[t["op"]]
        if r["below_target"] == meets:
            sys.exit(f"FAIL: below_target disagrees with the target: {r!r}")
    # The stated targets of these, where the docs state one (cli.dry_run's is absolute, on its value).
    expected = {"cli.dry_run": {"of": "value", "op": "<=", "bound": 5}, "cpu.sha256": None,
                "run.checkpoint_save": {"of": "ratio", "op": ">=", "bound": 0.8},
                "run.checkpoint_load": {"of": "ratio", "op": ">=", "bound": 0.8},
                "gloo.allreduce_256mb": {"of": "ratio", "op": ">=", "bound": 0.95}}
    for r in doc:
        if r["name"] in expected and r["name"] != "cpu.sha256" and r["target"] != expected[r["name"]]:
            sys.exit(f"FAIL: {r['name']}'s target should be {expected[r['name']]}: {r!r}")
    rc, doc = run([bench, "--json", "--list"])
    if rc != 0 or not isinstance(doc, list) or not set(names) <= set(doc):
        sys.exit(f"FAIL: --json --list should be a JSON list of the benchmark names, got exit {rc}: {doc!r}")
    rc, doc = run([bench, "--json", "no.such.benchmark"])
    if rc != 2 or not isinstance(doc, dict) or "no.such.benchmark" not in doc.get("error", ""):
        sys.exit(f"FAIL: an unknown benchmark should exit 2 with a JSON error document, got exit {rc}: {doc!r}")
    for argv in (["--json", "--list", "no.such.benchmark"], ["--json", ""], ["--json=true", names[0]]):
        rc, doc = run([bench] + argv)  # an unknown name with --list, an empty name, a value given to --json
        if rc != 2 or not isinstance(doc, dict) or not doc.get("error"):
            sys.exit(f"FAIL: {argv!r} should exit 2 with a JSON error document, got exit {rc}: {doc!r}")
    # A benchmark that cannot run here (the gpu.* ones without a GPU) is an entry with the reason: skipped when
    # asked for by a prefix, failed (exit 1) when asked for by its whole name. On a GPU machine they run.
    rc, doc = run([bench, "--json", "--quick", "gpu."])
    if not isinstance(doc, list) or not doc or not all(r.get("name", "").startswith("gpu.") for r in doc):
        sys.exit(f"FAIL: gpu. should give one entry per gpu.* benchmark, got exit {rc}: {doc!r}")
    for r in doc:
        if "skipped" in r and (rc != 0 or not r["skipped"]):
            sys.exit(f"FAIL: a skipped benchmark needs its reason and exit 0, got exit {rc}: {r!r}")
    skipped = [r["name"] for r in doc if "skipped" in r]
    if skipped:
        name = skipped[0]
        rc, one = run([bench, "--json", "--quick", name])
        if rc != 1 or len(one) != 1 or not one[0].get("failed"):
            sys.exit(f"FAIL: {name} asked for by name where it cannot run: exit 1 and a failed entry, got {rc}: {one!r}")
    for flag in ("--help", "-h", "--json --help"):  # the usage, exit 0 (was "unrecognised option", exit 2)
        h = subprocess.run([bench] + flag.split(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if h.returncode != 0 or b"--quick" not in h.stdout or b"--names" in h.stdout:
            sys.exit(f"FAIL: {flag} should print the usage and exit 0, got exit {h.returncode}: {h.stdout!r} {h.stderr!r}")
    print(f"bench_json: {len(names)} benchmark(s), stdout parsed as one JSON document")


if __name__ == "__main__":
    main()
