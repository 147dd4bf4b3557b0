#!/usr/bin/env python3
"""How far do a spec's figures move between two `locsim reproduce` output directories run at
different lengths (e.g. old and new `[full]` lengths)? For each named spec, over its machines:
the largest relative change of a value its figure shows (the mean per x value and series of
each of its metrics; totals per measured transaction) and whether every claim's verdict is the
same. Prints one Markdown table row per spec (the table of docs/reproduce.md, "Convergence of
the full lengths").

    scripts/converged.py OLD_EXPERIMENTS_DIR OLD_OUT NEW_OUT SPEC [SPEC...]
"""
import json, sys, os, tomllib, collections
exp, old, new = sys.argv[1:4]
names = sys.argv[4:]
TOTALS = {'total_bit_updates','max_bit_updates','energy_nj','cycles','mem_write_bytes','program_write_bytes','log_write_bytes','txs_committed'}
def means(d, spec):
    x, s = spec['x'], spec['series']; txs = d['provenance'].get('txs') or 1
    acc = collections.defaultdict(list)
    for r in d['rows']:
        for m in spec['metrics']:
            v = r.get(m)
            if v is not None: acc[(m, str(r.get(x)), str(r.get(s)))].append(v / txs if m in TOTALS else v)
    return {k: sum(v)/len(v) for k, v in acc.items()}
def fmt(n): return f"{n:,}".replace(",", " ")
for base in names:
    spec = tomllib.load(open(os.path.join(exp, base + '.toml'), 'rb'))
    files = sorted(f for f in os.listdir(new) if f.endswith('.json') and f[:-5].split('@')[0] == base)
    per_metric = {}; claims_same = 0; claims_n = 0; flips = []
    for f in files:
        a = json.load(open(os.path.join(old, f))); b = json.load(open(os.path.join(new, f)))
        la = (a['provenance']['txs'], a['provenance']['warmup_txs']); lb = (b['provenance']['txs'], b['provenance']['warmup_txs'])
        ma, mb = means(a, spec), means(b, spec)
        mach = f[:-5].split('@')[1] if '@' in f else (spec.get('machines') or [''])[0]
        for k in ma:
            if k in mb and ma[k]:
                rel = abs(mb[k]-ma[k])/abs(ma[k])
                if k[0] not in per_metric or rel > per_metric[k[0]][0]:
                    per_metric[k[0]] = (rel, k[1], k[2], mach, ma[k], mb[k])
        for ca, cb in zip(a['claims'], b['claims']):
            claims_n += 1
            if ca['verdict'] == cb['verdict']: claims_same += 1
            else: flips.append(ca['text'])
    parts = []
    for m in spec['metrics']:
        if m in per_metric:
            rel, xv, sv, mach, va, vb = per_metric[m]
            where = f"{spec['x']} = {xv}, {sv}" + (f", {mach}" if mach else "")
            parts.append(f"`{m}` {100*rel:.1f} % ({where}: {va:.4g} to {vb:.4g})")
    print(f"| `{base}` | {fmt(la[0])} after {fmt(la[1])} | {fmt(lb[0])} after {fmt(lb[1])} | {'; '.join(parts)} | {claims_same} of {claims_n} the same" + (f"; flipped: {flips}" if flips else "") + " |")
