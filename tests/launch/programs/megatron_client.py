# A Megatron-flavoured client: the way a Megatron training script reads its command line. It builds an argparse
# parser from Megatron's argument table (tests/data/spec/reference-schema.json: option strings, dest, type,
# nargs, action, choices), parses the Megatron flags megatron-run appended after the program's own arguments,
# and checks every value it parsed against megatron-run's namespaces.
#
# usage: megatron_client.py SCHEMA.json PARSED.json RESOLVED.json [MEGATRON FLAGS...]
#   PARSED:   `megatron-run --dry-run --parse-only --format json` of the same configs and flags (Megatron's
#             parse_args): every value parsed here must equal it;
#   RESOLVED: `megatron-run --dry-run --format json` (after validate_args): every value parsed here equals it too,
#             except those validate_args rewrites (as Megatron's does: a one-element list unwrapped,
#             --sequence-parallel off with TP=1, a dtype name turned into torch's), which are named.
#   "-" for both only parses (exit 2 on a bad flag, as argparse does: the launch.fail_fast benchmark's client).
# Prints "megatron client: N values parsed, all equal megatron-run's parsed namespace; K equal its resolved
# namespace, validate_args rewrote: ..." and exits 0, or lists every difference and exits 1.
import argparse
import json
import math
import sys

PLAIN = {"int": int, "float": float, "str": str, "bool": bool}


def build_parser(schema):
    p = argparse.ArgumentParser(prog="megatron-client", allow_abbrev=False, add_help=False)
    custom = set()
    for a in schema:
        flags = a["option_strings"]
        kw = {"dest": a["dest"], "default": argparse.SUPPRESS}
        action = a["action"]
        if action == "_StoreTrueAction":
            kw["action"] = "store_true"
        elif action == "_StoreFalseAction":
            kw["action"] = "store_false"
        elif action == "BooleanOptionalAction":
            kw["action"] = argparse.BooleanOptionalAction
            flags = [f for f in flags if not f.startswith("--no-")]
        else:
            t = a["type"]
            if t is None or t in PLAIN:
                kw["type"] = PLAIN.get(t, str)
                if a["choices"] is not None:
                    kw["choices"] = a["choices"]
            else:
                kw["type"] = str  # Megatron's own converters (enums, JSON, tuples): compared as given
                custom.add(a["dest"])
            if a["nargs"] is not None:
                kw["nargs"] = a["nargs"]
        p.add_argument(*flags, **kw)
    return p, custom


def equal(got, want):
    if isinstance(got, list):
        return isinstance(want, list) and len(got) == len(want) and all(equal(g, w) for g, w in zip(got, want))
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want
    if isinstance(got, float) or isinstance(want, float):
        return isinstance(want, (int, float)) and (got == want or math.isclose(got, want, rel_tol=1e-15))
    return got == want


def custom_equal(got, want):
    """A Megatron converter's result (an enum, a list literal, JSON) against the text given for it."""
    if isinstance(got, list):
        return isinstance(want, list) and len(got) == len(want) and all(custom_equal(g, w) for g, w in zip(got, want))
    if equal(got, want):
        return True
    if isinstance(want, str) and want.endswith("." + str(got)):
        return True  # an enum: Class.member
    return json.dumps(want, separators=(",", ":")) == str(got).replace(" ", "")


def main():
    schema_path, parsed_path, resolved_path, flags = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with open(schema_path) as f:
        parser, custom = build_parser(json.load(f))
    ns = vars(parser.parse_args(flags))
    if parsed_path == "-":
        print("megatron client: %d values parsed" % len(ns))
        return 0
    with open(parsed_path) as f:
        parsed = json.load(f)
    with open(resolved_path) as f:
        resolved = json.load(f)
    bad, rewritten = [], []
    for dest, got in sorted(ns.items()):
        same = custom_equal if dest in custom else equal
        if dest not in parsed:
            bad.append("%s: parsed %r, missing from megatron-run's parsed namespace" % (dest, got))
        elif not same(got, parsed[dest]):
            bad.append("%s: parsed %r, megatron-run parsed %r" % (dest, got, parsed[dest]))
        elif dest not in resolved:
            bad.append("%s: parsed %r, missing from megatron-run's resolved namespace" % (dest, got))
        elif not same(got, resolved[dest]):
            rewritten.append("%s %r -> %r" % (dest, got, resolved[dest]))
    for b in bad:
        print("megatron client: " + b)
    if bad:
        return 1
    print("megatron client: %d values parsed, all equal megatron-run's parsed namespace; %d equal its resolved "
          "namespace, validate_args rewrote: %s" % (len(ns), len(ns) - len(rewritten), ", ".join(rewritten) or "none"))
    return 0


sys.exit(main())
