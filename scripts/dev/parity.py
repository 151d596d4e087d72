#!/usr/bin/env python3
"""Developer aid: compare `megatron-run check` over the corpus with Megatron's reference decisions.

usage: scripts/dev/parity.py [--bin build/bin/megatron-run] [--fields f1,f2] [--files substr] [--verbose]
Prints decision mismatches (exit code) and resolved-value mismatches per field. The C++ test
tests/config/corpus_parity_test.cpp asserts the same thing; this script only makes the diff readable.
"""
import argparse, collections, glob, json, math, os, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
shared = os.path.join(root, 'tests', 'data')  # copied from ../shared (tests/data/README.md)

def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) == type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b

ap = argparse.ArgumentParser()
ap.add_argument('--bin', default=os.path.join(root, 'build/bin/megatron-run'))
ap.add_argument('--fields', default='')
ap.add_argument('--files', default='')
ap.add_argument('--verbose', action='store_true')
a = ap.parse_args()
files = sorted(f for f in glob.glob(os.path.join(shared, 'corpus/functional-tests/*.yaml')) if a.files in f)
out = subprocess.run([a.bin, 'check', '--world-size', '8', '--env-placeholder', '/placeholder', '--format', 'json'] + files,
                     capture_output=True, text=True)
ours = {os.path.basename(r['file']): r for r in json.loads(out.stdout)}
fields = set(filter(None, a.fields.split(',')))
dec_bad, val_bad = [], collections.defaultdict(list)
for f in files:
    name = os.path.basename(f)
    ref = json.load(open(os.path.join(shared, 'corpus/reference', name[:-5] + '.json')))
    r = ours[name]
    ref_exit = ref['validate_args']['exit'] if not ref['validate_args']['ok'] else (0 if ref['accepted'] else 1)
    if r['exit'] != ref_exit:
        errs = [e['rule'] + ': ' + e['message'][:160] for e in r['errors'] if e['level'] == 'error']
        dec_bad.append((name, ref_exit, r['exit'], (ref['validate_args'].get('reason') or str(ref.get('optimizer_config')))[:200], errs))
        continue
    if ref_exit == 0 and r['resolved'] is not None:
        rr, oo = ref['resolved'], r['resolved']
        for k in sorted(set(rr) | set(oo)):
            if fields and k not in fields: continue
            if k not in oo: val_bad[k].append((name, rr[k], '<absent>'))
            elif k not in rr: val_bad[k].append((name, '<absent>', oo[k]))
            elif not same(rr[k], oo[k]): val_bad[k].append((name, rr[k], oo[k]))
print(f'decisions: {len(files) - len(dec_bad)}/{len(files)} match')
for name, re_, oe, reason, errs in dec_bad:
    print(f'  {name}: reference exit {re_} ({reason}) / ours {oe} {errs}')
print(f'fields with value mismatches: {len(val_bad)}')
for k, lst in sorted(val_bad.items(), key=lambda kv: -len(kv[1])):
    print(f'  {k}: {len(lst)} file(s), e.g. {lst[0][0]}: reference {json.dumps(lst[0][1])[:80]} / ours {json.dumps(lst[0][2])[:80]}')
    if a.verbose:
        for x in lst[1:6]: print(f'      {x[0]}: reference {json.dumps(x[1])[:80]} / ours {json.dumps(x[2])[:80]}')
