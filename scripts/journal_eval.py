#!/usr/bin/env python3
"""Run `locsim journal` over every application and trace and print the docs/journal-eval.md tables.

Usage: scripts/journal_eval.py [path/to/locsim] > out.md   (about a minute per figure group)
"""
import json, math, subprocess, sys

LOCSIM = sys.argv[1] if len(sys.argv) > 1 else "target/release/locsim"
APPS = ["fb", "tw", "kt", "gm"]
GROUPS = {
    "main (Figs. 9, 13, 18, 19)": "RR,RR-S2,RR-S2X,RU,RU-S2,RU-S2X,RU20-S2X,RU20-S2X-WH64",
    "reuse limit (Figs. 10, 14)": "RR,RR-S2X,RU2-S2X,RU5-S2X,RU20-S2X,RU-S2X",
    "header over-provisioning, n=20 (Fig. 11)": "RR,RR-S2X,RU20-S2X,RU20-S2X-WH2,RU20-S2X-WH4,RU20-S2X-WH8,RU20-S2X-WH64,RU20-S2X-WH128",
    "header over-provisioning, n=2 (Fig. 15)": "RR,RR-S2X,RU2-S2X,RU2-S2X-WH2,RU2-S2X-WH4,RU2-S2X-WH8,RU2-S2X-WH64,RU2-S2X-WH128",
    "incremental GC (Fig. 17)": "RR,RR-S2X,RU2-S2X-WH4,RU2-S2X-WH4-INV25,RU20-S2X-WH64,RU20-S2X-WH64-INV25",
}


def run(app, trace, configs):
    out = subprocess.run([LOCSIM, "journal", "--app", app, "--trace", str(trace), "--config", configs, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    for title, configs in GROUPS.items():
        names = configs.split(",")
        rows = {}
        for app in APPS:
            for t in range(1, 5):
                rows[f"{app.upper()}{t}"] = {r["config"]: r for r in run(app, t, configs)}
        for metric, key in [("total bit updates / RR", "total_bit_updates_vs_rr"),
                            ("maximum bit updates / RR-S2X", "max_bit_updates_vs_rr_s2x")]:
            print(f"\n### {title}: {metric}\n")
            print("| trace | " + " | ".join(names) + " |")
            print("|---|" + "---:|" * len(names))
            for tr, rs in rows.items():
                print(f"| {tr} | " + " | ".join(f"{rs[n][key]:.3f}" for n in names) + " |")
            print("| geo. mean | " + " | ".join(f"{gmean([rs[n][key] for rs in rows.values()]):.3f}" for n in names) + " |")
        if title.startswith("main"):
            print(f"\n### {title}: energy / RR-S2X, device time per command (us), journal part (us)\n")
            print("| trace | page writes | writes/page | <=64 B | " + " | ".join(names) + " | no journal |")
            print("|---|---:|---:|---:|" + "---:|" * (len(names) + 1))
            for tr, rs in rows.items():
                r0 = rs[names[0]]
                cells = [f"{rs[n]['energy_vs_rr_s2x']:.2f} / {rs[n]['avg_cmd_latency_ns']/1e3:.1f} / {rs[n]['avg_cmd_journal_ns']/1e3:.2f}" for n in names]
                print(f"| {tr} | {r0['page_writes']} | {r0['db_writes_per_page']:.1f} | {r0['db_small_overwrite_fraction']:.2f} | " + " | ".join(cells) + f" | {r0['avg_cmd_latency_nojournal_ns']/1e3:.1f} |")
            print("\n| trace | " + " | ".join(f"{n} area %, rebuild us" for n in names[-1:]) + " |\n|---|---:|")
            for tr, rs in rows.items():
                r = rs[names[-1]]
                print(f"| {tr} | {r['area_overhead_percent']:.2f} %, {r['rebuild_ns']/1e3:.1f} |")
        print(f"\nprovenance: locsim {r0['version']} ({r0['git_rev']}), seed {r0['seed']}, frames {r0['frames']}")


main()
