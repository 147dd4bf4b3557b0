"""The binding's cost, for docs/python.md: a default `run` from Python against the same run of
the command line, and `sweep` with 4 jobs against 1.

    python python/bench/binding.py --bin target/release/locsim [--repeat 5]

Run it with the package built in release (`pip install ./python`) and the binary of the same
commit. Prints medians; the runs of the two ways alternate, so load on the host hits both.
"""

import argparse
import os
import statistics
import subprocess
import time

import locsim


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workload", default="btree")
    ap.add_argument("--no-sweep", action="store_true")
    a = ap.parse_args()
    cli, py = [], []
    for _ in range(a.repeat):
        cli.append(timed(lambda: subprocess.run([a.bin, "run", "-w", a.workload, "--json"], check=True,
                                                capture_output=True)))
        py.append(timed(lambda: locsim.run(a.workload)))
    c, p = statistics.median(cli), statistics.median(py)
    print(f"run -w {a.workload} (defaults): CLI median {c:.3f} s, Python median {p:.3f} s, "
          f"Python/CLI {p / c:.4f} (runs: CLI {[round(x, 3) for x in cli]}, Python {[round(x, 3) for x in py]})")

    if a.no_sweep:
        return
    grid = {"workload": ["sps", "hash", "btree"], "protocol": ["h-wal", "loc-wal"],
            "memory.write_latency_ns": [95, 300], "txs": [20000], "warmup_txs": [5000]}
    one, four = [], []
    for _ in range(max(1, a.repeat // 2)):
        one.append(timed(lambda: locsim.sweep(grid, jobs=1, progress=False)))
        four.append(timed(lambda: locsim.sweep(grid, jobs=4, progress=False)))
    o, f = statistics.median(one), statistics.median(four)
    print(f"sweep of 12 points: jobs=1 median {o:.2f} s, jobs=4 median {f:.2f} s, speed-up {o / f:.2f}x "
          f"on {os.cpu_count()} cores (runs: {[round(x, 2) for x in one]}, {[round(x, 2) for x in four]})")


if __name__ == "__main__":
    main()
