#!/usr/bin/env python3
"""The `layers` CTest test: every #include "..." under lib/ and apps/ goes down the layer order, and the top
level of the tree holds only what the design card names.

A file may include headers of its own layer and of the layers listed before it in LAYERS, except those the
table says it must not use; an include of a later layer, or of a banned one, fails, naming file:line.
An include is ours whether written "..." or <...> (every lib target has lib/ on its include path, so
<run/train.h> compiles), with a comment before the name or a path through ".."; a header generated into the
build tree (config/args.def) is ours by its folder. Standard and third-party headers are not checked.

    usage: layers.py [SOURCE_DIR]
           layers.py --selftest   (plants includes against the order in a scratch tree: each must be caught)
"""
import os
import re
import subprocess
import sys

# The layers, lowest first, and the folders each one is. A file may include its own layer and any layer before
# it in this list, except those its entry names under "not": lower layers it must not use.
CONFIG_UPPER = ["config/parse", "config/validate"]
LAYERS = [
    # (layer, folders (prefixes of paths in the tree), lower layers it must not include)
    ("util", ["lib/util/"], []),
    ("config/core", ["lib/config/"], []),  # lib/config/*.{h,cpp} and lib/config/schema/*.inc
    ("config/parse", ["lib/config/parse/"], []),
    ("config/validate", ["lib/config/validate/"], []),
    # After validation the layers read the resolved arguments (config core), never the parser or the chain.
    ("parallel", ["lib/parallel/"], CONFIG_UPPER),  # the torch-free rank layout
    # launch and parallel are independent of each other (docs/design.md).
    ("launch", ["lib/launch/"], CONFIG_UPPER + ["parallel"]),  # launch environment, spawner, worker input
    ("distributed", ["lib/distributed/"], CONFIG_UPPER),  # store, communicators, runtime, worker
    # optim depends on config and util only: not on the rank layout, the launcher or the communicators.
    ("optim", ["lib/optim/"], CONFIG_UPPER + ["parallel", "launch", "distributed"]),
    ("run", ["lib/run/"], CONFIG_UPPER),
    ("apps", ["apps/"], []),
]

# The top level of the tree, as the design card has it (docs/design.md), and the few files that tooling needs.
TOP_LEVEL = {"CMakeLists.txt", "apps", "lib", "configs", "tests", "scripts", "docs", "README.md", "bench",
             "cmake", ".ci", ".gitignore"}

# `#include "x"` or `#include <x>`, comments allowed between the directive and the name.
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:/\*.*?\*/\s*)*(?:"([^"]+)"|<([^>]+)>)')
SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")


def layer_of(path):
    """The layer a path under the source tree (lib/..., apps/...) belongs to: the longest matching prefix."""
    best = None
    for name, prefixes, _ in LAYERS:
        for p in prefixes:
            if path.startswith(p) and (best is None or len(p) > best[1]):
                best = (name, len(p))
    return best[0] if best else None


def resolve(root, src, inc, quoted=True):
    """The tree path an include names: relative to the including file (quoted only) or lib/-relative
    ("config/x.h"), normalised; a name under a layer's folder that is in no source file (a header generated into
    the build tree) by its folder; None for a standard or third-party header."""
    if quoted:
        here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
        if os.path.isfile(os.path.join(root, here)):
            return here
    in_lib = os.path.normpath(os.path.join("lib", inc))
    if os.path.isfile(os.path.join(root, in_lib)):
        return in_lib
    if in_lib.startswith("lib/") and layer_of(in_lib) not in (None, "apps"):
        first = in_lib.split("/")[1]
        if os.path.isdir(os.path.join(root, "lib", first)):
            return in_lib  # generated, or missing: the compiler says which; its folder gives its layer
    return None


def top_level_entries(root):
    """The names at the top of the tree: git's tracked files in a checkout, else what is there but build output."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and out.stdout.strip():
            return {line.split("/", 1)[0] for line in out.stdout.splitlines()}
    except (OSError, subprocess.SubprocessError):
        pass
    return {n for n in os.listdir(root) if not n.startswith("build") and n not in (".git", ".cache", ".device")}


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    errors = [f"{name}: not a top-level entry of the design card (docs/design.md; table TOP_LEVEL in tests/layers.py)"
              for name in sorted(top_level_entries(root) - TOP_LEVEL)]
    rank = {name: i for i, (name, _, _) in enumerate(LAYERS)}
    banned = {name: set(nots) for name, _, nots in LAYERS}
    checked = 0
    for top in ("lib", "apps"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SUFFIXES):
                    continue
                src = os.path.relpath(os.path.join(dirpath, fn), root)
                mine = layer_of(src)
                if mine is None:
                    errors.append(f"{src}: not in any layer (add its folder to the table in tests/layers.py)")
                    continue
                with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        name = m.group(1) if m.group(1) is not None else m.group(2)
                        target = resolve(root, src, name, quoted=m.group(1) is not None)
                        if target is None:
                            continue  # a standard or third-party header; not ours to order
                        checked += 1
                        theirs = layer_of(target)
                        if theirs is None:
                            errors.append(f"{src}:{lineno}: includes {name}, which is in no layer")
                        elif rank[theirs] > rank[mine] or theirs in banned[mine]:
                            errors.append(f"{src}:{lineno}: {mine} includes {name} ({theirs}), against "
                                          f"the layer order")
    for e in errors:
        print(e)
    if errors:
        print(f"layers: {len(errors)} problem(s): includes against the layer order or stray top-level entries "
              f"(tables at the top of tests/layers.py)")
        return 1
    print(f"layers: {checked} includes checked, all follow the layer order")
    return 0


def selftest():
    """Plants each spelling of an include against the order in a scratch tree; all must be caught, and their
    neighbours that follow it (the same headers from the run layer, a standard header) pass."""
    import shutil
    import tempfile
    here = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    bad = ['#include "run/train.h"', '#include <run/train.h>', '#include /* c */ "run/train.h"',
           '#include "config/../run/train.h"', '#include "../run/train.h"', '#  include<run/train.h>',
           '#include "run/generated_only.def"']
    good = ['#include "config/value.h"', '#include <vector>', '#include <boost/program_options.hpp>']
    failures = []
    for planted, expect_caught in [(b, True) for b in bad] + [(g, False) for g in good]:
        with tempfile.TemporaryDirectory() as d:
            for sub in ("lib/config", "lib/run"):
                os.makedirs(os.path.join(d, sub))
            shutil.copy(os.path.join(here, "lib/config/value.h"), os.path.join(d, "lib/config/value.h"))
            open(os.path.join(d, "lib/run/train.h"), "w").close()
            with open(os.path.join(d, "lib/config/planted.cpp"), "w") as f:
                f.write("// planted\n" + planted + "\n")
            out = subprocess.run([sys.executable, os.path.abspath(__file__), d], capture_output=True, text=True)
            caught = "lib/config/planted.cpp:2:" in out.stdout
            if caught != expect_caught:
                failures.append(f"{planted!r}: {'caught' if caught else 'not caught'}; expected the opposite "
                                f"({out.stdout.strip()[-200:]})")
    for f in failures:
        print("layers selftest:", f)
    print(f"layers selftest: {len(bad)} planted includes against the order, {len(good)} neighbours: "
          f"{'all as expected' if not failures else str(len(failures)) + ' wrong'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(selftest() if sys.argv[1:] == ["--selftest"] else main())
