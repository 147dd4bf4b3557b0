#!/usr/bin/env python3
"""Crash checks of random configurations, through the binary (docs/faults.md, "Random crash
campaigns").

Each run draws a protocol, a workload, a core count (1 - 16), transaction sizes, a cache size,
an ordering preset, a persistence domain, the ideal or the PCM device, Start-Gap, the key
distribution, partitioned structures, a small LPQ, a write latency, aborts, a speculation
degree and torn writes (16- or 32-byte atomicity, with each protocol's torn-write fixes on), and
runs `locsim crashtest --json` on it. A run must exit 0 with 0 violations; anything else is
printed with the command that replays it, and the script exits 1. The same `--seed` draws the
same runs.

    scripts/random_crash_campaign.py [--bin target/release/locsim] [--seed 1] [--runs 100]
        [--protocols s-wal,h-wal,...] [--crashes 400] [--timeout 300]

A run longer than `--timeout` seconds is printed as TIMEOUT (slow, not wrong); `--slow S`
prints the runs that take longer than S seconds.
"""
import argparse
import json
import random
import subprocess
import sys
import time

PROTOCOLS = "s-wal,h-wal,ec-wal,loc-wal,kiln,loc-kiln,proteus,atom,hoop,s-undo"
# The key that sizes a workload's transactions.
TX_SIZE = {"sps": "swaps_per_tx", "btree": "ops_per_tx", "hash": "ops_per_tx", "rbtree": "ops_per_tx",
           "sdg": "ops_per_tx"}
# The torn-write fixes of docs/faults.md (off by default: without them a torn write is a
# documented recovery error, not a finding).
TORN_FIXES = {"ec-wal": ["log.meta_checksum=true"], "loc-wal": ["log.meta_checksum=true", "loc.two_slot_head=true"],
              "atom": ["atom.checked_meta=true"], "hoop": ["hoop.two_slot_head=true"],
              "s-wal": ["swal.packed_headers=true"]}


def draw(r, protocols):
    """One random crashtest command line (without the binary)."""
    p = r.choice(protocols)
    w = r.choice(list(TX_SIZE))
    cores = r.choice([1, 2, 3, 4, 6, 8, 12, 16])
    atomicity = r.choice([64, 64, 64, 32, 16])
    sets = [f"workload.{w}.{TX_SIZE[w]}={r.choice([1, 4, 16, 64])}"]
    if r.random() < 0.5:
        sets += ["llc.size_bytes=131072", "l2.size_bytes=16384", "l1.size_bytes=4096"]
    if atomicity < 64:
        sets += TORN_FIXES.get(p, [])
    if r.random() < 0.3:
        sets.append(f"ordering.preset={r.choice(['paper', 'strictest', 'overlapped'])}")
    domain = r.choice(["adr", "eadr", "bbb"]) if r.random() < 0.4 else "memory"
    if domain != "memory":
        sets.append(f"machine.persist_domain={domain}")
    if r.random() < 0.3:
        sets.append("memory.device=pcm")
    # Start-Gap is modelled with the memory and adr domains only.
    if r.random() < 0.15 and domain in ("memory", "adr"):
        sets += ["startgap.enabled=true", f"startgap.psi_writes={r.choice([1, 7, 100])}"]
        if atomicity < 64:
            sets.append("startgap.two_register_copies=true")
    # SPS and SDG have no key distribution.
    if w not in ("sps", "sdg") and r.random() < 0.3:
        sets.append(f"workload.{w}.keys.distribution={r.choice(['zipfian', 'latest'])}")
    if w in ("btree", "rbtree") and r.random() < 0.3:
        sets.append(f"workload.{w}.trees={r.choice([2, 4, 8])}")
    if w in ("hash", "sdg") and r.random() < 0.3:
        sets.append(f"workload.{w}.allocators={r.choice([2, 4])}")
    if p == "proteus" and r.random() < 0.5:
        sets.append(f"proteus.lpq_entries={r.choice([4, 8, 16])}")
    if r.random() < 0.3:
        sets.append(f"memory.write_latency_ns={r.choice([35, 95, 300, 1000])}")
    cmd = ["crashtest", "-w", w, "-p", p, "--cores", str(cores), "--txs", str(r.choice([100, 300])),
           "--seed", str(r.randrange(1000)), "--abort-rate", str(r.choice([0, 0.05, 0.2])),
           "--atomicity", str(atomicity), "--sd", str(r.choice([1, 4, 16])), "--threads", "1"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/locsim")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--protocols", default=PROTOCOLS)
    ap.add_argument("--crashes", type=int, default=400)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--slow", type=float, default=None, help="print runs longer than this many seconds")
    a = ap.parse_args()
    r = random.Random(a.seed)
    protocols = a.protocols.split(",")
    found = 0
    for i in range(a.runs):
        cmd = draw(r, protocols) + ["--crashes", str(a.crashes)]
        line = "locsim " + " ".join(cmd)
        start = time.time()
        try:
            out = subprocess.run([a.bin] + cmd + ["--json"], capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            print(f"TIMEOUT after {a.timeout:.0f} s: {line}", flush=True)
            continue
        took = time.time() - start
        try:
            report = json.loads(out.stdout)
            violations = report["violations"]
            replay = (report.get("first_violation") or {}).get("replay")
        except (ValueError, KeyError, TypeError):
            violations, replay = None, None
        if out.returncode != 0 or violations != 0:
            found += 1
            err = out.stderr.strip().splitlines()[-1:] if out.stderr.strip() else []
            print(f"FOUND (exit {out.returncode}, violations {violations}): {line}", flush=True)
            if replay:
                print(f"  replay: {replay}", flush=True)
            for e in err:
                print(f"  {e}", flush=True)
        elif a.slow is not None and took > a.slow:
            print(f"slow ({took:.1f} s): {line}", flush=True)
    print(f"{a.runs} runs, {found} found (seed {a.seed})")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
