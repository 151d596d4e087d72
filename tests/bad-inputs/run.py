#!/usr/bin/env python3
"""Runs megatron-run on every hand-made bad input under cases/ and checks the exit-code contract.

A case is one text file: header lines `key: value`, then the files it needs, each after a `--- NAME` line.
    args:   the command line after `megatron-run`, split like a shell; {NAME} is the path of file NAME,
            {dir} the case's temporary folder
    exit:   the expected exit code (1 or 2; never 3)
    expect: a fragment the output (stdout + stderr) must contain; may repeat
    env:    NAME=VALUE added to the environment; may repeat
    make:   `fifo NAME` (a named pipe), `dir NAME` (a folder), `link NAME TARGET` (a symbolic link)
    gen:    `NAME = PYTHON-EXPRESSION`: file NAME's bytes (str is UTF-8 encoded)
    gen-files: PYTHON-EXPRESSION, a dict of files NAME: bytes (str is UTF-8 encoded), for many files at once;
            may repeat (relative paths in args name them: the case runs in {dir})
    gen-args: PYTHON-EXPRESSION, a list of words appended to args (e.g. 100k words); may repeat
    gen-env: `NAME = PYTHON-EXPRESSION`: environment variable NAME's value (e.g. 100 KB); may repeat
    max-output: the most bytes the output (stdout + stderr) may have (a long value echoed in part only)
    memory: MiB, a tighter address-space bound than MEMORY_LIMIT_MIB for this case (a case that must stay small);
            not applied in a sanitized build, which keeps the common bound
    timeout: seconds (default 20)
Every case must also: exit within its timeout, not die by a signal, not exit 3, stay under the memory bound
(address space, MEMORY_LIMIT_MIB), print no stack trace or `internal error`, print only printable UTF-8 text.
Usage: run.py MEGATRON_RUN [CASES_DIR] [-j N] [-k SUBSTRING]
"""
import os, re, resource, shlex, subprocess, sys, tempfile, concurrent.futures as cf

MEMORY_LIMIT_MIB = 2048
MIN_CASES = 150
BANNED = ["internal error", "terminate called", "Segmentation fault", "Aborted", "AddressSanitizer",
          "runtime error:", "stack trace", "Traceback", "std::bad_alloc", "what():"]


def parse_case(path):
    header, files, cur = {"expect": [], "env": [], "make": [], "gen": [], "gen-files": [], "gen-args": [],
                          "gen-env": []}, {}, None
    with open(path, "rb") as f:
        data = f.read()
    for raw in data.split(b"\n"):
        if raw.startswith(b"--- ") and (cur is not None or True):
            cur = raw[4:].decode().strip()
            files[cur] = []
            continue
        if cur is not None:
            files[cur].append(raw)
            continue
        line = raw.decode()
        if not line.strip() or line.startswith("#"):
            continue
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k in ("expect", "env", "make", "gen", "gen-files", "gen-args", "gen-env"):
            header[k].append(v)
        else:
            header[k] = v
    # a file's text ends where the next `---` begins; the last newline before it belongs to the file
    files = {k: b"\n".join(v[:-1] if v and v[-1] == b"" else v) + (b"\n" if v and v[-1] == b"" else b"")
             for k, v in files.items()}
    return header, files


def printable(b):
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"invalid UTF-8 at byte {e.start}"
    for i, c in enumerate(s):
        if c in "\n\t":
            continue
        if ord(c) < 0x20 or ord(c) == 0x7f or 0x80 <= ord(c) < 0xa0:
            return f"control character U+{ord(c):04X} at {i}"
    return None


def subst(text, paths):
    # {NAME} -> its path; str.format would read {c.yaml} as an attribute of c
    return re.sub(r"\{([^{}]+)\}", lambda m: paths[m.group(1)], text)


SANITIZED = bool(os.environ.get("MR_SANITIZED"))  # an ASan build reserves terabytes of shadow address space


def limit(mib=MEMORY_LIMIT_MIB):
    if not SANITIZED:
        m = mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (m, m))
    os.setsid()


def run_case(binary, path):
    name = os.path.relpath(path, CASES)
    try:
        h, files = parse_case(path)
    except Exception as e:  # noqa: BLE001 - a malformed case file is a test failure
        return name, [f"bad case file: {e}"]
    errs = []
    with tempfile.TemporaryDirectory(prefix="mr-bad.") as d:
        paths = {"dir": d}
        for k, v in files.items():
            p = os.path.join(d, k)
            with open(p, "wb") as f:
                f.write(v)
            paths[k] = p
        for g in h["gen"]:
            k, _, expr = g.partition("=")
            k = k.strip()
            v = eval(expr, {})  # noqa: S307 - test data written in this repository
            p = os.path.join(d, k)
            with open(p, "wb") as f:
                f.write(v.encode() if isinstance(v, str) else v)
            paths[k] = p
        for g in h["gen-files"]:
            for k, v in eval(g, {}).items():  # noqa: S307 - test data written in this repository
                p = os.path.join(d, k)
                with open(p, "wb") as f:
                    f.write(v.encode() if isinstance(v, str) else v)
                paths[k] = p
        for m in h["make"]:
            w = m.split()
            p = os.path.join(d, w[1])
            paths[w[1]] = p
            if w[0] == "fifo":
                os.mkfifo(p)
            elif w[0] == "dir":
                os.mkdir(p)
            elif w[0] == "link":
                os.symlink(subst(w[2], paths), p)
            else:
                return name, [f"bad make: {m}"]
        try:
            args = [subst(a, paths) for a in shlex.split(h.get("args", ""))]
        except (KeyError, ValueError) as e:
            return name, [f"bad args: {e}"]
        for g in h["gen-args"]:
            args += [str(w) for w in eval(g, {})]  # noqa: S307 - test data written in this repository
        env = dict(os.environ)
        for e in h["env"]:
            k, _, v = e.partition("=")
            env[k] = v
        for g in h["gen-env"]:
            k, _, expr = g.partition("=")
            env[k.strip()] = str(eval(expr, {}))  # noqa: S307 - test data written in this repository
        env.setdefault("MR_LOG_LEVEL", "warning")
        if SANITIZED:  # the same memory bound, kept by the sanitizer's allocator
            # (added to the options CTest sets, so its suppressions file stays in force)
            env["ASAN_OPTIONS"] = ":".join(o for o in (env.get("ASAN_OPTIONS"), f"malloc_limit_mb={MEMORY_LIMIT_MIB}",
                                                       "detect_leaks=1") if o)
        # A sanitizer build runs 2-3x slower (1.1 million YAML nodes: 4.9 s of CPU against 1.9 s), so its bound
        # on hangs is three times the case's.
        timeout = float(h.get("timeout", 20)) * (3 if SANITIZED else 1)
        try:
            p = subprocess.run([binary] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, cwd=d, timeout=timeout,
                               preexec_fn=lambda: limit(min(int(h.get("memory", MEMORY_LIMIT_MIB)), MEMORY_LIMIT_MIB)))
        except subprocess.TimeoutExpired as e:
            # the process group: a child it started must not outlive the case
            return name, [f"hung: no exit within {timeout:g} s"]
        out = p.stdout + p.stderr
        text = out.decode("utf-8", "replace")
        if p.returncode < 0:
            errs.append(f"killed by signal {-p.returncode}")
        elif p.returncode == 3:
            errs.append("exit 3 (internal error) for a bad input")
        want = int(h.get("exit", "-1"))
        if p.returncode != want:
            errs.append(f"exit {p.returncode}, expected {want}")
        for frag in h["expect"]:
            if frag not in text:
                errs.append(f"output lacks {frag!r}")
        for b in BANNED:
            if b in text:
                errs.append(f"output has {b!r}")
        if "max-output" in h and len(out) > int(h["max-output"]):
            errs.append(f"{len(out)} bytes of output, more than {h['max-output']}")
        bad = printable(out)
        if bad:
            errs.append(f"unprintable output: {bad}")
        if errs:
            errs.append("output: " + text[:1500].replace("\n", "\n    "))
    return name, errs


def main():
    global CASES
    argv = sys.argv[1:]
    jobs, only = 2, None
    if "-j" in argv:
        i = argv.index("-j"); jobs = int(argv[i + 1]); del argv[i:i + 2]
    if "-k" in argv:
        i = argv.index("-k"); only = argv[i + 1]; del argv[i:i + 2]
    binary = os.path.abspath(argv[0])
    CASES = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "cases"))
    cases = sorted(os.path.join(r, f) for r, _, fs in os.walk(CASES) for f in fs if f.endswith(".case"))
    if only:
        cases = [c for c in cases if only in c]
    passed = failed = 0
    with cf.ThreadPoolExecutor(jobs) as ex:
        for name, errs in ex.map(lambda c: run_case(binary, c), cases):
            if errs:
                failed += 1
                print(f"FAIL {name}\n  " + "\n  ".join(errs))
            else:
                passed += 1
    if not only and len(cases) < MIN_CASES:
        print(f"FAIL: only {len(cases)} cases (at least {MIN_CASES} are kept)")
        failed += 1
    print(f"bad-inputs: {passed} passed, {failed} failed")
    return 1 if failed else 0


CASES = ""
if __name__ == "__main__":
    sys.exit(main())
