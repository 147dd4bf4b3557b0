#!/usr/bin/env python3
"""Every numeric configuration key at extreme values, through the binary (docs/faults.md,
"Fuzzed inputs").

For each key that `locsim config` prints, each value below is set alone (`--set KEY=VALUE`) on
a short run of every protocol, on one core, on four cores and with the PCM device. A run must
exit 0, or exit 2 with one line on standard error; a panic, an abort, another status, a second
line or a run longer than the time limit is reported. Keys of a workload run that workload; the
others run SPS.

    scripts/extreme_config_sweep.py [--bin target/release/locsim] [--timeout 120] [--keys PREFIX]

A slow run is not necessarily a defect (two buckets for half a million keys, or SQLite rows of a
whole database per transaction, are simply long); the report says which it was.
"""
import argparse
import re
import subprocess
import sys

VALUES = ["0", "1", "-1", "2", "3", "7", "17", "33", "63", "64", "65", "100", "1000", "4097", "65536",
          "4294967296", "18446744073709551615", "99999999999999999999", "1e19", "1e308", "-0.5", "0.5",
          "1.5", "nan", "inf", '"x"', '""', "true", "false"]
PROTOCOLS = "baseline,s-wal,h-wal,ec-wal,loc-wal,kiln,loc-kiln,proteus,atom,hoop,s-undo"
WORKLOADS = ["btree", "hash", "rbtree", "sdg", "sqlite"]


def keys(binary):
    """(dotted key, default) of every non-string, non-boolean key of the configuration."""
    text = subprocess.run([binary, "config"], capture_output=True, text=True, check=True).stdout
    section, out = None, []
    for line in text.splitlines():
        if m := re.match(r"\[(.*)\]", line):
            section = m.group(1)
        elif m := re.match(r"(\w+) = (.*)", line):
            if not m.group(2).startswith('"') and m.group(2) not in ("true", "false"):
                out.append((f"{section}.{m.group(1)}", m.group(2)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/locsim")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--keys", default="", help="only keys starting with this prefix")
    a = ap.parse_args()
    found = 0
    for key, _ in keys(a.bin):
        if not key.startswith(a.keys):
            continue
        workload = next((w for w in WORKLOADS if key.startswith(f"workload.{w}.")), "sps")
        for value in VALUES:
            for extra in ([], ["--cores", "4"], ["--set", "memory.device=pcm"]):
                if workload == "sqlite" and extra[:1] == ["--cores"]:
                    continue  # SQLite runs on one core
                cmd = [a.bin, "run", "-w", workload, "-p", PROTOCOLS, "--txs", "300", "--warmup-txs", "100",
                       "--set", f"{key}={value}"] + extra
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                                       env={"RUST_BACKTRACE": "0", "PATH": "/usr/bin:/bin"})
                except subprocess.TimeoutExpired:
                    found += 1
                    print(f"slow ({a.timeout:.0f} s): {' '.join(cmd[1:])}", flush=True)
                    continue
                err = r.stderr.strip()
                if r.returncode == 0 or (r.returncode == 2 and "\n" not in err and "panicked" not in err):
                    continue
                found += 1
                last = err.splitlines()[-1] if err else ""
                print(f"status {r.returncode}: {' '.join(cmd[1:])}: {last[:200]}", flush=True)
    print(f"{found} findings")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
