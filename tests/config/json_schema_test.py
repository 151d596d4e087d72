#!/usr/bin/env python3
"""The `json_schema` CTest test: `megatron-run schema --format json-schema` checked by a real validator
(Debian's python3-jsonschema, Draft 2020-12) against what megatron-run itself accepts and refuses.

  1. The schema is a valid draft 2020-12 schema.
  2. Every corpus config (tests/data/corpus/functional-tests, Megatron CI's layout) that megatron-run parses
     validates, and so does each one's plain-layout twin in the dest spelling (`--dry-run --parse-only --format
     json`: every argument); those it refuses for a flag it does not know are rejected.
  3. Every config file of the bad-input cases (tests/bad-inputs/cases) that megatron-run refuses for an unknown
     flag or a value of the wrong type or choice is rejected by the schema; those it accepts validate.
  4. Probes of forms neither has (signal names and numbers, one-element lists in MODEL_ARGS): the same rule, with
     megatron-run's verdict on each.
YAML is read with PyYAML's safe_load, the loader Megatron uses. A missing python3-jsonschema fails the test.

    usage: json_schema_test.py MEGATRON_RUN
"""
import importlib.util, json, os, re, subprocess, sys, tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "data", "corpus", "functional-tests")
CASES = os.path.join(ROOT, "tests", "bad-inputs", "cases")
# megatron-run's refusals that are about a key or a value's type: the schema must refuse the same files.
TYPE_ERRORS = re.compile(r"unknown argument|unrecognized arguments|invalid (int|float|choice|signal)|invalid \w+ value|"
                         r"expects (true or false|a single value)|takes true or false|expected \d+ values?|"
                         r"expected a list of ints|cannot be set from a file")

try:
    import jsonschema
    import yaml
except ImportError as e:
    print(f"FAIL: {e}: install python3-jsonschema and python3-yaml (scripts/setup.sh installs them)")
    sys.exit(1)


def type_error(stderr):
    """Whether megatron-run refused a file for a key or a value's type. Not: a value that only fails because an
    unset ${VAR} became /placeholder/VAR (with the variable set it may be right, and the schema accepts ${VAR}),
    and not an ENV_VARS value (the environment is not typed by the schema)."""
    return (bool(TYPE_ERRORS.search(stderr)) and not re.search(r"(value|choice): '/placeholder/", stderr)
            and "environment variable" not in stderr)


def run(mr, *args):
    return subprocess.run([mr, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)


def load_yaml(path):
    try:
        with open(path, "rb") as f:
            return True, yaml.safe_load(f)
    except Exception:  # noqa: BLE001 - a file PyYAML cannot read is not the schema's business
        return False, None


def main():
    mr = os.path.abspath(sys.argv[1])
    r = run(mr, "schema", "--format", "json-schema")
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    errors = []

    def expect(doc, valid, what):
        errs = list(v.iter_errors(doc))
        if valid and errs:
            e = jsonschema.exceptions.best_match(errs)
            while e.context:  # the deepest reason, not "not valid under any of the given schemas" at the top
                e = jsonschema.exceptions.best_match(e.context)
            errors.append(f"{what}: rejected by the schema: {e.json_path}: {e.message[:300]}")
        if not valid and not errs:
            errors.append(f"{what}: megatron-run refuses it, the schema accepts it")

    # 2. The corpus, in its own layout and in both spellings of the plain layout.
    files = sorted(os.path.join(CORPUS, f) for f in os.listdir(CORPUS) if f.endswith(".yaml"))
    checked = twins = corpus_refused = 0
    for path in files:
        p = run(mr, "--dry-run", "--parse-only", "--format", "json", "--env-placeholder", "/placeholder",
                "--config", path)
        ok, doc = load_yaml(path)
        assert ok, path
        if p.returncode == 2:
            # megatron-run does not parse it: the inference and multimodal configs' flags of other parsers
            if type_error(p.stderr):
                expect(doc, False, os.path.basename(path))
                corpus_refused += 1
            continue
        expect(doc, True, os.path.basename(path))
        checked += 1
        expect(json.loads(p.stdout), True, os.path.basename(path) + " as dests (--parse-only --format json)")
        twins += 1
    assert checked >= 120, f"only {checked} corpus files checked"
    assert twins == checked

    # 3. Bad inputs: the config files of every case, with megatron-run's verdict on each.
    spec = importlib.util.spec_from_file_location("bad_inputs", os.path.join(ROOT, "tests", "bad-inputs", "run.py"))
    bad = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bad)
    refused = accepted = 0
    with tempfile.TemporaryDirectory() as d:
        for root, _, fs in os.walk(CASES):
            for fn in sorted(fs):
                if not fn.endswith(".case"):
                    continue
                header, contents = bad.parse_case(os.path.join(root, fn))
                if header["make"] or header["env"]:
                    continue  # special files or an environment: not about the document
                for name, data in contents.items():
                    if "--config {" + name + "}" not in header.get("args", ""):
                        continue  # not a --config file (a --yaml-cfg or --target-env file, ...)
                    path = os.path.join(d, "doc.yaml")
                    with open(path, "wb") as f:
                        f.write(data)
                    ok, doc = load_yaml(path)
                    if not ok or not isinstance(doc, (dict, type(None))):
                        continue
                    p = run(mr, "--dry-run", "--parse-only", "--env-placeholder", "/placeholder", "--config", path)
                    what = f"{os.path.relpath(os.path.join(root, fn), CASES)}:{name}"
                    if p.returncode == 2 and type_error(p.stderr):
                        expect(doc, False, what)
                        refused += 1
                    elif p.returncode in (0, 1):
                        expect(doc, True, what)
                        accepted += 1
    assert refused >= 10, f"only {refused} refused bad inputs checked"

    # 4. Probes: megatron-run's verdict decides, as in 3.
    probes = [
        "--exit-signal: SIGUSR1", "--exit-signal: Signals.SIGUSR1", "--exit-signal: 10", "--exit-signal: '10'",
        "--exit-signal: SIGFOO", "exit_signal: SIGIOT",
        "MODEL_ARGS:\n  --exit-signal: SIGUSR1", "MODEL_ARGS:\n  --exit-signal: 10",
        "MODEL_ARGS:\n  --exit-signal: Signals.SIGUSR1", "MODEL_ARGS:\n  --attention-backend: AttnBackend.flash",
        "MODEL_ARGS:\n  --attention-backend: flash", "attention_backend: AttnBackend.flash",
        # Megatron's one argparse mutually exclusive group, in each spelling and layout.
        "kitchen_config_file: k.yaml\nkitchen_recipe_number: 1", "--kitchen-config-file: k.yaml\nkitchen-recipe-number: 2",
        "kitchen_config_file: null\nkitchen_recipe_number: 1", "kitchen_config_file: k.yaml\nkitchen_recipe_number: null",
        "kitchen_recipe_number: 3", "MODEL_ARGS:\n  --kitchen-config-file: k.yaml\n  --kitchen-recipe-number: 1",
        "MODEL_ARGS:\n  --kitchen-config-file: ''\n  --kitchen-recipe-number: 1",
        "MODEL_ARGS:\n  --kitchen-recipe-number: 1",
        "MODEL_ARGS:\n  --cuda-graph-modules: [CudaGraphModule.attn]", "MODEL_ARGS:\n  --cuda-graph-modules: [attn, mlp]",
        "MODEL_ARGS:\n  --cuda-graph-modules: [bogus]", "cuda_graph_modules: [CudaGraphModule.attn, mlp]",
        "cuda_graph_modules: full_iteration", "--cuda-graph-modules: [bogus]",
        "MODEL_ARGS:\n  --num-layers: [12]", "MODEL_ARGS:\n  --num-layers: '[12]'",
        "MODEL_ARGS:\n  --num-layers: [12, 13]", "MODEL_ARGS:\n  --num-layers: []",
        "MODEL_ARGS:\n  --lr-decay-style: [cosine]", "MODEL_ARGS:\n  --lr-decay-style: [nope]",
    ]
    probed = 0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "probe.yaml")
        for text in probes:
            with open(path, "w") as f:
                f.write(text + "\n")
            ok, doc = load_yaml(path)
            assert ok, text
            p = run(mr, "--dry-run", "--parse-only", "--config", path)
            what = "probe " + repr(text)
            if p.returncode == 2:
                expect(doc, False, what)
            else:
                assert p.returncode in (0, 1), (text, p.stderr)
                expect(doc, True, what)
            probed += 1

    for e in errors[:40]:
        print("FAIL", e)
    if errors:
        print(f"json_schema: {len(errors)} disagreement(s) between the schema and megatron-run")
        return 1
    print(f"json_schema: valid draft 2020-12 schema; {checked} corpus files and {twins} dest-spelling twins "
          f"validate, {corpus_refused} refused corpus files are rejected; {refused} refused bad inputs are "
          f"rejected, {accepted} accepted ones validate; {probed} probes agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
