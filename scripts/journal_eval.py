#!/usr/bin/env python3
"""Run `locsim journal` over every application and trace and print the docs/journal-eval.md tables.

Usage: scripts/journal_eval.py [path/to/locsim] [--before OLD_LOCSIM] [--time] > out.md

--before OLD_LOCSIM also prints RU20-S2X-WH64 against RR-S2X from an older binary (the fields it
has: total and maximum bit updates, energy, command time; its `busy` fields stand for the
counted ones). --time prints only the time and energy tables (SQLite's CPU time per
application, RU20-S2X-WH64 against RR-S2X). A few minutes in all.
"""
import json, math, subprocess, sys

ARGS = [a for a in sys.argv[1:]]
TIME_ONLY = "--time" in ARGS
ARGS = [a for a in ARGS if a != "--time"]
BEFORE = None
if "--before" in ARGS:
    i = ARGS.index("--before")
    BEFORE = ARGS[i + 1]
    del ARGS[i:i + 2]
LOCSIM = ARGS[0] if ARGS else "target/release/locsim"
APPS = ["fb", "tw", "kt", "gm"]
GROUPS = {
    "main (Figs. 9, 13, 18, 19)": "RR,RR-S2,RR-S2X,RU,RU-S2,RU-S2X,RU20-S2X,RU20-S2X-WH64",
    "reuse limit per portion (Figs. 10, 14)": "RR,RR-S2X,RU2-S2X,RU5-S2X,RU20-S2X,RU-S2X",
    "reuse limit per frame, RUnF (Figs. 10, 14, the first model's reading)": "RR,RR-S2X,RU2F-S2X,RU5F-S2X,RU20F-S2X,RU-S2X",
    "header over-provisioning, n=20 (Fig. 11)": "RR,RR-S2X,RU20-S2X,RU20-S2X-WH2,RU20-S2X-WH4,RU20-S2X-WH8,RU20-S2X-WH64,RU20-S2X-WH128",
    "header over-provisioning, n=2 (Fig. 15)": "RR,RR-S2X,RU2-S2X,RU2-S2X-WH2,RU2-S2X-WH4,RU2-S2X-WH8,RU2-S2X-WH64,RU2-S2X-WH128",
    "incremental GC (Fig. 17)": "RR,RR-S2X,RU2-S2X-WH4,RU2-S2X-WH4-INV25,RU20-S2X-WH64,RU20-S2X-WH64-INV25",
}
ACCEPTANCE = "RR,RR-S2,RR-S2X,RU-S2X,RU2-S2X,RU20-S2X,RU20-S2X-WH64,RU20-S2X-WH64-INV25"
CHUNK_NS = [50, 150, 500, 1500, 5000]
CPU_NS = [0, 10000, 50000, 200000]


def run(app, trace, configs, extra=(), binary=None):
    cmd = [binary or LOCSIM, "journal", "--app", app, "--trace", str(trace), "--config", configs, "--json", *extra]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def table(title, names, rows, cell):
    print(f"\n### {title}\n")
    print("| trace | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for tr, rs in rows.items():
        print(f"| {tr} | " + " | ".join(cell(rs[n]) for n in names) + " |")


def groups():
    for title, configs in GROUPS.items():
        names = configs.split(",")
        rows = {f"{a.upper()}{t}": {r["config"]: r for r in run(a, t, configs)} for a in APPS for t in range(1, 5)}
        for metric, key in [("total bit updates / RR", "total_bit_updates_vs_rr"),
                            ("maximum bit updates / RR-S2X", "max_bit_updates_vs_rr_s2x")]:
            table(f"{title}: {metric}", names, rows, lambda r: f"{r[key]:.3f}")
            print("| geo. mean | " + " | ".join(f"{gmean([rs[n][key] for rs in rows.values()]):.3f}" for n in names) + " |")
        if title.startswith("main"):
            table(f"{title}: hottest cell", names, rows, lambda r: f"{r['max_bit_updates']} {r['hottest_cell']}")
            print(f"\n### {title}: energy / RR-S2X (whole command time / counted time), time per command (us: whole / counted / journal PCM part)\n")
            print("| trace | page writes | writes/page | <=64 B | " + " | ".join(names) + " | no journal |")
            print("|---|---:|---:|---:|" + "---:|" * (len(names) + 1))
            for tr, rs in rows.items():
                r0 = rs[names[0]]
                cells = [f"{rs[n]['energy_vs_rr_s2x']:.3f}, {rs[n]['energy_counted_vs_rr_s2x']:.3f} / {rs[n]['avg_cmd_latency_ns']/1e3:.1f}, {rs[n]['avg_cmd_counted_ns']/1e3:.2f}, {rs[n]['avg_cmd_journal_ns']/1e3:.2f}" for n in names]
                print(f"| {tr} | {r0['page_writes']} | {r0['db_writes_per_page']:.1f} | {r0['db_small_overwrite_fraction']:.2f} | " + " | ".join(cells) + f" | {r0['avg_cmd_latency_nojournal_ns']/1e3:.1f}, {r0['avg_cmd_counted_nojournal_ns']/1e3:.2f} |")
            print("\n| trace | RU20-S2X-WH64 area %, rebuild us | allocator (RU20-S2X-WH64) |\n|---|---:|---|")
            for tr, rs in rows.items():
                r = rs["RU20-S2X-WH64"]
                print(f"| {tr} | {r['area_overhead_percent']:.2f} %, {r['rebuild_ns']/1e3:.1f} | {json.dumps(r['allocator'])} |")
        r0 = next(iter(rows.values()))[names[0]]
        print(f"\nprovenance: locsim {r0['version']} ({r0['git_rev']}), seed {r0['seed']}, frames {r0['frames']}, timing {json.dumps(r0['timing'])}, chunk {r0['pcm_chunk_program_ns']} ns")


def cpu_table():
    print("\n### SQLite's CPU time per command (ARM instructions counted on the board's ISA, RR-S2X runs; host-calibrated variant beside)\n")
    print("| trace | commands | VM instructions per command: mean (p10-p90) | ARM instructions per command | CPU us per command | host-calibrated us |")
    print("|---|---:|---:|---:|---:|---:|")
    for a in APPS:
        for t in range(1, 5):
            r = run(a, t, "RR-S2X")[0]
            h = run(a, t, "RR-S2X", ["--cpu-time", "host-calibrated"])[0]
            print(f"| {a.upper()}{t} | {r['commands']} | {r['vm_steps_per_command']:.1f} ({r['vm_steps_per_command_p10']}-{r['vm_steps_per_command_p90']}) | {r['arm_instructions_per_command']:.0f} | {r['avg_cmd_cpu_ns']/1e3:.2f} | {h['avg_cmd_cpu_ns']/1e3:.2f} |")
    print(f"\ntiming {json.dumps(r['timing'])}, chunk {r['pcm_chunk_program_ns']} ns")


def acceptance(binary, label, new_fields):
    print(f"\n### RU20-S2X-WH64 against RR-S2X ({label})\n")
    head = "| trace | total bits RR-S2X -> RU20-S2X-WH64 (ratio) | max bits (ratio) | energy uJ (ratio) | command us (ratio) |"
    if new_fields:
        head += " counted us (ratio) | journal PCM us (ratio) | energy, counted time (ratio) |"
    print(head)
    print("|---|" + "---:|" * (head.count("|") - 2))
    for a in APPS:
        for t in range(1, 5):
            rs = {r["config"]: r for r in run(a, t, ACCEPTANCE, binary=binary)}
            b, n = rs["RR-S2X"], rs["RU20-S2X-WH64"]
            def c(key, scale=1.0, fmt="{:.0f}"):
                if key not in b:
                    key = key.replace("counted", "busy")
                return f"{fmt.format(b[key]*scale)} -> {fmt.format(n[key]*scale)} ({n[key]/b[key]:.3f})"
            row = f"| {a.upper()}{t} | {c('total_bit_updates')} | {c('max_bit_updates')} | {c('energy_nj', 1e-3, '{:.1f}')} | {c('avg_cmd_latency_ns', 1e-3, '{:.1f}')} |"
            if new_fields:
                row += f" {c('avg_cmd_counted_ns', 1e-3, '{:.2f}')} | {c('avg_cmd_journal_ns', 1e-3, '{:.2f}')} | {c('energy_counted_nj', 1e-3, '{:.1f}')} |"
            print(row)


def sweep():
    print("\n### Time cut of RU20-S2X-WH64 against RR-S2X vs the per-chunk program latency (trace 2; cut = 1 - RU20-S2X-WH64 / RR-S2X)\n")
    print("| app | CPU ns/command | " + " | ".join(f"{c} ns: counted / whole / PCM" for c in CHUNK_NS) + " |")
    print("|---|---:|" + "---:|" * len(CHUNK_NS))
    for a in APPS:
        for cpu in CPU_NS:
            cells = []
            for ch in CHUNK_NS:
                rs = {r["config"]: r for r in run(a, 2, "RR-S2X,RU20-S2X-WH64", ["--set", f"pcm.chunk_program_ns={ch}", "--cpu-ns-per-command", str(cpu)])}
                b, n = rs["RR-S2X"], rs["RU20-S2X-WH64"]
                cut = lambda k: 1 - n[k] / b[k]
                cells.append(f"{cut('avg_cmd_counted_ns'):.3f} / {cut('avg_cmd_latency_ns'):.4f} / {cut('avg_cmd_journal_ns'):.3f}")
            print(f"| {a} | {cpu} | " + " | ".join(cells) + " |")


if TIME_ONLY:
    cpu_table()
    acceptance(LOCSIM, "this model", True)
    if BEFORE:
        acceptance(BEFORE, "before", True)
else:
    groups()
    acceptance(LOCSIM, "this model", True)
    if BEFORE:
        acceptance(BEFORE, "before", False)
    sweep()
