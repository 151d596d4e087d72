#!/usr/bin/env python3
"""The `docs_commands` CTest test: every concrete megatron-run command shown in README.md and docs/*.md runs as
written on this (CPU) machine.

It takes the lines of fenced code blocks that start with `megatron-run ` or `build/bin/megatron-run `, after any
`NAME=value ` environment prefixes (joining `\\` continuations, dropping a trailing `# comment`), leaves out synopsis
lines with placeholders (`FILE`, `F`,
`[...]`, `...`, `job.yaml`, `a|b` choices, `~/`), and runs each with bash in a scratch folder that links the
repository's configs/, tests/, docs/ and scripts/, with build/bin first on PATH. A command passes when it exits
0, or the code its comment names (`# exit 1`). The `grep ` lines of fenced blocks (docs/contributing.md's "Find a
flag") run in the repository itself and pass when they find something (exit 0), so that they follow the files they
search when those move. A `check` synopsis (`check ... FILE...`, in a block or in the text) must name its operands
as `megatron-run help check` does (FILE|DIR...). Prints every failure with its output.

usage: docs_commands.py REPO_ROOT BIN_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

# `NAME=value ` before the command (`WORLD_SIZE=8 megatron-run ...`): run with it, as bash does.
ENV_PREFIX = r"[A-Z_][A-Z0-9_]*=\S*\s+"
PLACEHOLDERS = re.compile(r"(\bFILE\b|\bF\b|\bF\.yaml\b|\.\.\.|\[|\bjob\.yaml\b|\w\|\w|~/|\bN\b|\bSIZE\b)")


def commands(path):
    out, block, pending = [], False, ""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                block, pending = not block, ""
                continue
            if not block:
                continue
            text = line.rstrip("\n")
            if pending:
                text = pending + " " + text.strip()
                pending = ""
            elif not re.match(r"^\s*((%s)*(build/bin/)?megatron-run( |$)|grep )" % ENV_PREFIX, text):
                continue
            if text.rstrip().endswith("\\"):
                pending = text.rstrip()[:-1].rstrip()
                continue
            out.append((number, text.strip()))
    return out


# A `check` synopsis's operands (`check --yaml-cfg FILE...`): the placeholder word before `...`.
CHECK_OPERANDS = re.compile(r"\bcheck\b[^`\n]*?\b([A-Z][A-Z|]*\.\.\.)")


def check_synopsis_mismatches(files, bin_dir, env):
    """The `check` synopses of `files` whose operands are not the ones `megatron-run help check` shows."""
    usage = subprocess.run([os.path.join(bin_dir, "megatron-run"), "help", "check"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT).stdout.decode("utf-8", "replace")
    m = re.search(r"(\S+\.\.\.)\n\n", usage)  # the last word of the usage lines
    if not m:
        return [("megatron-run help check", 0, "no FILE... operand in its usage:\n" + usage[:500])]
    operands, out = m.group(1), []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for found in CHECK_OPERANDS.finditer(line):
                    if found.group(1) != operands:
                        out.append((path, number, f"{found.group(1)} where `megatron-run help check` shows {operands}"))
    return out


def main():
    root, bin_dir = sys.argv[1], sys.argv[2]
    files = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""), PYTHON_EXEC="/usr/bin/python3")
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    ran, failed, skipped = 0, [], 0
    synopses = check_synopsis_mismatches(files, bin_dir, env)
    with tempfile.TemporaryDirectory(prefix="mr-docs-") as scratch:
        for d in ("configs", "tests", "docs", "scripts"):
            os.symlink(os.path.join(root, d), os.path.join(scratch, d))
        os.makedirs(os.path.join(scratch, "build"))
        os.symlink(bin_dir, os.path.join(scratch, "build", "bin"))
        for path in files:
            for number, cmd in commands(path):
                expected = 0
                m = re.search(r"\s#\s*exit (\d+)", cmd)
                if m:
                    expected = int(m.group(1))
                cmd = re.sub(r"\s+#.*$", "", cmd)
                if PLACEHOLDERS.search(cmd):
                    skipped += 1
                    continue
                ran += 1
                try:
                    where = root if cmd.startswith("grep ") else scratch
                    p = subprocess.run(["bash", "-c", cmd], cwd=where, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, timeout=180)
                    code, output = p.returncode, p.stdout.decode("utf-8", "replace")
                except subprocess.TimeoutExpired:
                    code, output = "timeout", ""
                if code != expected:
                    failed.append((os.path.relpath(path, root), number, cmd, code, expected, output[-1500:]))
    for f, n, cmd, code, expected, output in failed:
        print(f"{f}:{n}: exit {code} (expected {expected}): {cmd}\n{output}\n")
    for path, number, what in synopses:
        print(f"{os.path.relpath(path, root)}:{number}: check synopsis: {what}")
    print(f"docs_commands: {ran} commands run, {len(failed)} failed, {skipped} synopsis lines with placeholders left out"
          f", {len(synopses)} check synopses not as `megatron-run help check` shows them")
    return 1 if failed or synopses or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
