#!/usr/bin/env bash
# Do two `locsim reproduce` output directories hold the same results? Compares every result file
# (CSV, per-spec JSON, SVG, REPORT.md, report.html) byte for byte after dropping what differs
# between builds and runs by design: the provenance (version, git revision) and the host timings
# (the simulator-speed section of the report, bench.csv). The cache, shard files and --timings
# files are not results and are left out. Used for changes that must not change any figure
# (the companion of scripts/same_results.sh, which does the same for `run`).
#
#   scripts/same_reproduce.sh DIR_A DIR_B
#   IGNORE=spec_hash scripts/same_reproduce.sh DIR_A DIR_B   # a change to the specs' [full]
#                                                            # lengths, compared in --quick
#
# Exit status 0 when they agree (prints how many files), 1 otherwise (prints the first
# differences).
set -euo pipefail
a=${1:?usage: scripts/same_reproduce.sh DIR_A DIR_B}
b=${2:?usage: scripts/same_reproduce.sh DIR_A DIR_B}
python3 - "$a" "$b" <<'PY'
import json, os, re, sys, difflib

a, b = sys.argv[1], sys.argv[2]
DROP = {"version", "git_rev"}  # provenance keys of the per-spec JSON
# Provenance keys a change alters on purpose: `spec_hash` hashes the spec's whole text, so an
# edit of its `[full]` lengths changes it in the `--quick` files, whose results stay the same.
DROP |= set(os.environ.get("IGNORE", "").split())

def results(d):
    out = set()
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if os.path.isfile(p) and (n.endswith((".csv", ".json", ".svg")) or n in ("REPORT.md", "report.html")):
            if n == "bench.csv" or n.startswith("shard-") or n.startswith("timings"):
                continue
            out.add(n)
    return out

def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v

PROV = re.compile(r"locsim \S+ \(git [^)]*\)")

def canonical(path, name):
    text = open(path, encoding="utf-8").read()
    if name.endswith(".json"):
        return json.dumps(strip(json.loads(text)), indent=1, sort_keys=True) + "\n"
    if name == "REPORT.md":
        text = text.split("\n## Simulator speed\n")[0]
    if name == "report.html":
        text = re.sub(r"<h2>Simulator speed</h2>.*?</table>\n", "", text, flags=re.S)
    return PROV.sub("locsim (provenance)", text)

fa, fb = results(a), results(b)
bad = 0
for n in sorted(fa ^ fb):
    print(f"only in {a if n in fa else b}: {n}")
    bad += 1
for n in sorted(fa & fb):
    x, y = canonical(os.path.join(a, n), n), canonical(os.path.join(b, n), n)
    if x != y:
        bad += 1
        print(f"differs: {n}")
        for line in list(difflib.unified_diff(x.splitlines(), y.splitlines(), a, b, lineterm="", n=0))[:12]:
            print("  " + line[:200])
if bad:
    print(f"{bad} result files differ or are missing")
    sys.exit(1)
print(f"same results: {len(fa)} files (provenance and host timings left out)")
PY
