#!/usr/bin/env python3
"""Regenerates tests/optim/data/schedule_golden.json: learning rates and weight decays computed by Megatron-LM's
own OptimizerParamScheduler, for tests/optim/schedule_test.cpp. A developer tool; CI does not run it.

    /tmp/venv/bin/python scripts/dev/schedule_golden.py [--mirror DIR] [--shared DIR] [--out FILE]

What runs is Megatron's code, unmodified, taken from a Megatron-LM git mirror with `git show HEAD:...`:
  - megatron/core/optimizer_param_scheduler.py, imported as a module (its only Megatron import,
    megatron.core.utils.log_single_rank, is replaced by a do-nothing stand-in; torch must be importable);
  - get_optimizer_param_scheduler() from megatron/training/training.py, cut out of the file with `ast` and
    executed with three stand-ins: get_args() (returns the case's arguments), update_train_iters() (sets only
    args.train_iters, which the scheduler does not read) and the real OptimizerParamScheduler.
The optimizer is a stand-in holding only `param_groups` (dicts with max_lr / min_lr / start_wd / end_wd /
wd_mult, as Megatron's _get_param_groups builds them). Each case is driven by the real step(increment) from one
sample count to the next and the groups' 'lr' and 'weight_decay' are read back.

Before the derivation, the script applies the weight-decay rule of the public tree's validate_args (constant
increment style: start = end = --weight-decay), which the seed's validate_args no longer contains (the seed's
resolved namespaces keep start/end_weight_decay None); ScheduleConfig::from_args applies the same rule.

Cases: (a) hand-picked argument sets covering every decay style, WSD annealing style, warmup form, sample-based
training, weight-decay increment style and group overrides; (b) every accepted config of
../shared/corpus/reference/*.json, from its "resolved" namespace (Megatron's own parse + validate_args).
"""

import argparse
import ast
import json
import math
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The arguments the derivation and ScheduleConfig::from_args read, with the seed parser's defaults.
DEFAULT_ARGS = {
    "lr": 1e-4,
    "min_lr": 0.0,
    "lr_warmup_init": 0.0,
    "lr_decay_style": "linear",
    "lr_wsd_decay_style": "exponential",
    "lr_decay_iters": None,
    "lr_decay_samples": None,
    "lr_wsd_decay_iters": None,
    "lr_wsd_decay_samples": None,
    "lr_warmup_fraction": None,
    "lr_warmup_iters": 0,
    "lr_warmup_samples": 0,
    "train_iters": None,
    "train_samples": None,
    "global_batch_size": 32,
    "weight_decay": 0.01,
    "start_weight_decay": None,
    "end_weight_decay": None,
    "weight_decay_incr_style": "constant",
    "decoupled_lr": None,
    "decoupled_min_lr": None,
    "use_checkpoint_opt_param_scheduler": False,
    "override_opt_param_scheduler": False,
    "skip_train": False,
}

# A group with every override Megatron's ParamGroupOverride allows the scheduler to read.
WIDE_GROUP = {"max_lr": 3e-4, "min_lr": 2e-6, "wd_mult": 0.5}
WD_RANGE_GROUP = {"start_wd": 0.02, "end_wd": 0.3, "wd_mult": 1.0}


def hand_picked():
    """(name, argument overrides, extra groups, extra sample counts)."""
    it = {"train_iters": 1000, "global_batch_size": 32}
    cases = [
        ("linear_warmup_iters", {**it, "lr_warmup_iters": 100, "min_lr": 1e-5}, [WIDE_GROUP], []),
        ("linear_no_warmup", {**it, "min_lr": 1e-6}, [], []),
        ("linear_decay_shorter_than_train", {**it, "lr_decay_iters": 600, "lr_warmup_iters": 10, "min_lr": 1e-6},
         [], []),
        ("linear_decay_longer_than_train", {**it, "lr_decay_iters": 5000, "lr_warmup_iters": 10}, [], []),
        ("linear_min_equals_max", {**it, "lr": 2e-4, "min_lr": 2e-4, "lr_warmup_iters": 5}, [], []),
        ("cosine_warmup_fraction", {**it, "lr_decay_style": "cosine", "lr_warmup_fraction": 0.013,
                                    "min_lr": 1e-5}, [WIDE_GROUP], []),
        ("cosine_warmup_init", {**it, "lr_decay_style": "cosine", "lr_warmup_iters": 50, "lr_warmup_init": 1e-6,
                                "min_lr": 1e-5, "lr": 3e-4}, [WIDE_GROUP], []),
        ("cosine_gbs7_fraction", {"train_iters": 777, "global_batch_size": 7, "lr_decay_style": "cosine",
                                  "lr_warmup_fraction": 0.0371, "lr": 6e-4, "min_lr": 6e-5}, [], []),
        ("constant_warmup", {**it, "lr_decay_style": "constant", "lr_warmup_iters": 100, "min_lr": 1e-5},
         [WIDE_GROUP], []),
        ("constant_no_warmup", {**it, "lr_decay_style": "constant"}, [], []),
        ("isr_warmup", {**it, "lr_decay_style": "inverse-square-root", "lr_warmup_iters": 100, "min_lr": 1e-5},
         [WIDE_GROUP], []),
        ("isr_no_warmup", {**it, "lr_decay_style": "inverse-square-root", "min_lr": 1e-6}, [], []),
        ("isr_floor_reached", {**it, "lr_decay_style": "inverse-square-root", "lr_warmup_iters": 2,
                               "min_lr": 5e-5}, [], []),
    ]
    for style in ("exponential", "linear", "cosine", "minus_sqrt"):
        cases.append((f"wsd_{style}", {**it, "lr_decay_style": "WSD", "lr_wsd_decay_style": style,
                                       "lr_warmup_iters": 50, "lr_wsd_decay_iters": 200, "min_lr": 1e-5},
                      [WIDE_GROUP], []))
    cases += [
        ("wsd_fraction_decay_iters", {**it, "lr_decay_style": "WSD", "lr_wsd_decay_style": "cosine",
                                      "lr_warmup_fraction": 0.02, "lr_decay_iters": 800,
                                      "lr_wsd_decay_iters": 150, "min_lr": 1e-6}, [], []),
        ("wsd_anneal_longer_than_decay", {**it, "lr_decay_style": "WSD", "lr_wsd_decay_style": "linear",
                                          "lr_warmup_iters": 100, "lr_wsd_decay_iters": 950}, [], []),
        ("wsd_zero_anneal", {**it, "lr_decay_style": "WSD", "lr_wsd_decay_iters": 0, "lr_warmup_iters": 10,
                             "min_lr": 1e-6}, [], []),
        ("samples_linear", {"train_samples": 100000, "lr_warmup_samples": 1000, "min_lr": 1e-5}, [WIDE_GROUP], []),
        ("samples_cosine_fraction", {"train_samples": 123457, "lr_decay_samples": 100003,
                                     "lr_decay_style": "cosine", "lr_warmup_fraction": 0.0123, "min_lr": 1e-6},
         [], []),
        ("samples_wsd_minus_sqrt", {"train_samples": 50000, "lr_decay_style": "WSD",
                                    "lr_wsd_decay_style": "minus_sqrt", "lr_wsd_decay_samples": 7777,
                                    "lr_warmup_samples": 333, "min_lr": 2e-6}, [], []),
        ("samples_isr", {"train_samples": 64000, "lr_decay_style": "inverse-square-root",
                         "lr_warmup_samples": 640, "min_lr": 1e-6}, [], []),
        ("wd_linear", {**it, "lr_warmup_iters": 10, "weight_decay_incr_style": "linear",
                       "start_weight_decay": 0.01, "end_weight_decay": 0.1}, [WD_RANGE_GROUP, WIDE_GROUP], []),
        ("wd_cosine", {**it, "lr_decay_style": "cosine", "lr_warmup_iters": 10, "weight_decay_incr_style": "cosine",
                       "start_weight_decay": 0.0, "end_weight_decay": 0.05}, [WD_RANGE_GROUP], []),
        ("wd_cosine_samples", {"train_samples": 90001, "lr_warmup_samples": 900, "weight_decay_incr_style": "cosine",
                               "start_weight_decay": 0.033, "end_weight_decay": 0.07}, [WD_RANGE_GROUP], []),
        ("decoupled_lr", {**it, "lr_decay_style": "cosine", "lr_warmup_iters": 20, "min_lr": 1e-5,
                          "decoupled_lr": 5e-4, "decoupled_min_lr": 4.5e-5}, [], []),
        ("decoupled_lr_default_min", {**it, "lr_warmup_iters": 20, "min_lr": 1e-5, "decoupled_lr": 2e-4}, [], []),
        ("weight_decay_0_1", {**it, "weight_decay": 0.1, "lr_warmup_iters": 1, "min_lr": 1e-7}, [], []),
    ]
    return cases


# Cases on which Megatron's own code raises; the C++ must throw std::invalid_argument for each.
ERROR_CASES = [
    ("min_lr_above_lr", {"train_iters": 100, "lr": 1e-5, "min_lr": 1e-4}),
    ("negative_min_lr", {"train_iters": 100, "min_lr": -1e-6}),
    ("warmup_init_above_lr", {"train_iters": 100, "lr_warmup_init": 1e-3}),
    ("warmup_not_shorter_than_decay", {"train_iters": 100, "lr_warmup_iters": 100}),
    ("warmup_fraction_one", {"train_iters": 100, "lr_warmup_fraction": 1.0}),
    ("zero_decay", {"train_iters": 100, "lr_decay_iters": 0}),
    ("wsd_without_phase", {"train_iters": 100, "lr_decay_style": "WSD"}),
    ("wsd_samples_without_phase", {"train_samples": 1000, "lr_decay_style": "WSD", "lr_wsd_decay_iters": 10}),
    ("neither_iters_nor_samples", {}),
    ("no_lr", {"train_iters": 100, "lr": None}),
    ("end_wd_below_start", {"train_iters": 100, "weight_decay_incr_style": "linear", "start_weight_decay": 0.1,
                            "end_weight_decay": 0.01}),
    ("negative_start_wd", {"train_iters": 100, "weight_decay_incr_style": "cosine", "start_weight_decay": -0.1,
                           "end_weight_decay": 0.01}),
    ("override_and_use_checkpoint", {"train_iters": 100, "override_opt_param_scheduler": True,
                                     "use_checkpoint_opt_param_scheduler": True}),
]


def load_megatron(mirror: Path, tmp: Path):
    def show(path):
        return subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{path}"], check=True,
                              capture_output=True, text=True).stdout

    commit = subprocess.run(["git", "-C", str(mirror), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    pkg = tmp / "megatron" / "core"
    pkg.mkdir(parents=True)
    (tmp / "megatron" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    # Stand-in for the one helper the scheduler imports from megatron.core.utils.
    (pkg / "utils.py").write_text("def log_single_rank(logger, *args, rank=0, **kwargs):\n    pass\n")
    (pkg / "optimizer_param_scheduler.py").write_text(show("megatron/core/optimizer_param_scheduler.py"))
    sys.path.insert(0, str(tmp))
    import megatron.core.optimizer_param_scheduler as ops  # noqa: E402

    # get_optimizer_param_scheduler, verbatim, from training.py.
    training = show("megatron/training/training.py")
    tree = ast.parse(training)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_optimizer_param_scheduler")
    source = ast.get_source_segment(training, fn)
    env = {"OptimizerParamScheduler": ops.OptimizerParamScheduler}
    exec(compile(source, "training.py:get_optimizer_param_scheduler", "exec"), env)
    return commit, env, ops


class FakeOptimizer:
    def __init__(self, groups):
        self.param_groups = groups


def groups_for(args, extra):
    """Megatron's param groups: the default one, then the decoupled embedding/output one, then `extra`."""
    base = {"max_lr": args["lr"], "min_lr": args["min_lr"], "wd_mult": 1.0}
    groups = [({}, dict(base))]
    if args["decoupled_lr"] is not None:
        o = {"max_lr": args["decoupled_lr"]}
        if args["decoupled_min_lr"] is not None:
            o["min_lr"] = args["decoupled_min_lr"]
        groups.append(({"decoupled": True}, {**base, **o}))
    for g in extra:
        groups.append((dict(g), {**base, **g}))
    return groups


def build(env, args, extra_groups):
    ns = types.SimpleNamespace(**args)
    # The public tree's validate_args weight-decay rule (gone from the seed's validate_args).
    if ns.weight_decay_incr_style == "constant":
        assert ns.start_weight_decay is None and ns.end_weight_decay is None
        ns.start_weight_decay = ns.weight_decay
        ns.end_weight_decay = ns.weight_decay
    else:
        assert ns.start_weight_decay is not None and ns.end_weight_decay is not None
    groups = groups_for(args, extra_groups)
    opt = FakeOptimizer([g for _, g in groups])
    env["get_args"] = lambda: ns

    def update_train_iters(a):  # what training.py's does without a batch-size schedule
        if not a.train_iters:
            a.train_iters = a.train_samples // a.global_batch_size

    env["update_train_iters"] = update_train_iters
    sched = env["get_optimizer_param_scheduler"](opt)
    return sched, opt, [o for o, _ in groups]


def sample_points(s, args, extra):
    """Sample counts around every boundary of the schedule, in iterations and in raw samples."""
    gbs = args["global_batch_size"]
    iter_based = bool(args["train_iters"])
    w, d, inc = s.lr_warmup_steps, s.lr_decay_steps, s.wd_incr_steps
    marks = {0, 1, d, inc}
    marks |= {math.floor(w), math.ceil(w)}
    for q in (0.25, 0.5, 0.75):
        marks.add(int(w + q * (d - w)))
        marks.add(int(q * inc))
    if s.wsd_decay_steps is not None:
        marks.add(d - s.wsd_decay_steps)
    pts = set()
    for m in marks:
        for k in (-1, 0, 1):
            pts.add(m + k)
            if iter_based:  # the same boundary on the iteration grid
                it = m // gbs
                pts.add((it + k) * gbs)
    pts |= {2 * d, d + 12345}
    pts |= set(extra)
    return sorted(p for p in pts if p >= 0)


def run_case(env, args, extra_groups, extra_points=()):
    sched, opt, overrides = build(env, args, extra_groups)
    points = sample_points(sched, args, extra_points)
    rows = []
    for p in points:
        sched.step(increment=p - sched.num_steps)
        row = [sched.num_steps]
        for g in opt.param_groups:
            lr = g["lr"]
            row += [float(lr), float(g["weight_decay"])]
        rows.append(row)
    derived = {
        "init_lr": sched.init_lr, "max_lr": sched.max_lr, "min_lr": sched.min_lr,
        "lr_warmup_steps": float(sched.lr_warmup_steps), "lr_decay_steps": sched.lr_decay_steps,
        "lr_decay_style": sched.lr_decay_style, "wsd_decay_steps": sched.wsd_decay_steps,
        "lr_wsd_decay_style": sched.lr_wsd_decay_style, "start_wd": sched.start_wd, "end_wd": sched.end_wd,
        "wd_incr_steps": sched.wd_incr_steps, "wd_incr_style": sched.wd_incr_style,
    }
    return {"groups": overrides, "derived": derived, "points": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default="/work/.mirror/NVIDIA+Megatron-LM/repo")
    ap.add_argument("--shared", default=str(ROOT / "tests" / "data"))
    ap.add_argument("--out", default=str(ROOT / "tests/optim/data/schedule_golden.json"))
    opts = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        commit, env, _ = load_megatron(Path(opts.mirror), Path(tmp))

        hand = []
        for name, over, extra, pts in hand_picked():
            args = {**DEFAULT_ARGS, **over}
            case = run_case(env, args, extra, pts)
            hand.append({"name": name, "args": args, **case})

        errors = []
        for name, over in ERROR_CASES:
            args = {**DEFAULT_ARGS, **over}
            try:
                build(env, args, [])
            except Exception as e:  # noqa: BLE001 - Megatron raises AssertionError, TypeError, Exception
                errors.append({"name": name, "args": args, "python_error": type(e).__name__})
            else:
                raise SystemExit(f"error case {name}: Megatron accepted it")

        corpus, first_with = [], {}
        ref_dir = Path(opts.shared) / "corpus" / "reference"
        for f in sorted(ref_dir.glob("*.json")):
            ref = json.loads(f.read_text())
            if not ref.get("accepted"):
                continue
            resolved = ref["resolved"]
            args = {k: resolved[k] for k in DEFAULT_ARGS}
            case = run_case(env, args, [])
            # Most corpus configs share a schedule: their rows are stored once, under the first file that has
            # them; the others name it ("rows_of"). Same derived settings and same rows, so the same test.
            key = json.dumps([case["derived"], case["groups"], case["points"]])
            if key in first_with:
                case["rows_of"] = first_with[key]
                del case["points"]
            else:
                first_with[key] = f.stem
            corpus.append({"file": f.stem, "args": args, **case})

    out = {
        "generator": "scripts/dev/schedule_golden.py",
        "megatron_commit": commit,
        "sources": ["megatron/core/optimizer_param_scheduler.py",
                    "megatron/training/training.py:get_optimizer_param_scheduler"],
        "python": sys.version.split()[0],
        "row_layout": "[num_steps, lr(group 0), wd(group 0), lr(group 1), wd(group 1), ...]; a corpus case "
                      "without points has those of the case named by rows_of",
        "hand_picked": hand,
        "errors": errors,
        "corpus": corpus,
    }
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(out, separators=(",", ":"))
    # One case per line keeps diffs readable.
    text = text.replace(',{"name":', ',\n{"name":').replace(',{"file":', ',\n{"file":')
    Path(opts.out).write_text(text + "\n")
    n_points = sum(len(c.get("points", [])) for c in hand + corpus)
    print(f"{opts.out}: {len(hand)} hand-picked, {len(errors)} error, {len(corpus)} corpus cases, "
          f"{n_points} points, {os.path.getsize(opts.out)} bytes; Megatron-LM {commit}")


if __name__ == "__main__":
    main()
