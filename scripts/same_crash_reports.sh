#!/usr/bin/env bash
# Do two builds of locsim give the same crash reports? Runs `crashtest --json` over every
# protocol on SPS, the B+tree and the hash table at 1 and 4 cores, exhaustive checks, torn
# writes, aborts, Start-Gap, and every injected bug of the protocols whose checker has an
# incremental recoverer (kiln, loc-kiln, hoop), with each build; drops the host timings and
# provenance, and compares the reports case by case (key order kept: the JSON must be the same,
# not only its content).
#
#   scripts/same_crash_reports.sh REFBIN [BIN]   # BIN (default target/quick/locsim) against REFBIN
#   scripts/same_crash_reports.sh --dump BIN OUT # only write BIN's canonical reports to OUT
#   REF_REPORTS=OUT scripts/same_crash_reports.sh REFBIN  # REFBIN's reports from an earlier --dump
#
# Each case is one line of OUT: its arguments, a tab, the report. A case whose run fails is
# recorded with its exit status, so a build that fails where the other does not differs too.
set -euo pipefail
cd "$(dirname "$0")/.."

cases() {
  local all="baseline s-wal h-wal ec-wal loc-wal kiln loc-kiln atom proteus hoop"
  for c in 1 4; do
    for p in $all; do
      for w in sps btree hash; do
        echo "-w $w -p $p --cores $c"
      done
    done
  done
  # Every candidate state of a short run.
  for pw in "h-wal sps" "kiln btree" "loc-kiln hash" "hoop btree" "hoop sps" "loc-wal btree"; do
    set -- $pw
    echo "-w $2 -p $1 --exhaustive --txs 200"
  done
  echo "-w btree -p hoop --exhaustive --txs 200 --cores 4"
  echo "-w hash -p kiln --exhaustive --txs 200 --cores 4"
  # Torn writes, aborts, Start-Gap.
  for p in h-wal ec-wal loc-wal kiln loc-kiln atom proteus hoop; do
    echo "-w btree -p $p --atomicity 8 --txs 500"
    echo "-w sps -p $p --atomicity 8 --txs 500 --cores 4"
    echo "-w hash -p $p --abort-rate 0.1"
    echo "-w btree -p $p --abort-rate 0.1 --cores 4"
    echo "-w btree -p $p --set startgap.enabled=true --set startgap.psi_writes=8"
    echo "-w sps -p $p --set startgap.enabled=true --set startgap.psi_writes=8 --cores 4"
  done
  # Every injected bug of the formats with an incremental recoverer, with its violation count.
  for p in kiln loc-kiln hoop; do
    for b in $(bugs "$p"); do
      local extra=""
      case $b in
        startgap-regs-before-copy) extra="--set startgap.enabled=true --set startgap.psi_writes=8" ;;
      esac
      echo "-w sps -p $p --inject-bug $b --cores 2 $extra"
      echo "-w btree -p $p --inject-bug $b --cores 4 $extra"
      case $b in
        lost-invalidation | dependent-before-source | gc-own-region) ;;
        *) echo "-w btree -p $p --inject-bug $b $extra" ;;
      esac
    done
  done
  # The configurations the tests catch the bugs under (small caches that spill to Kiln's
  # fallback log, a hot SPS array shared by four cores).
  local tiny="--set l1.size_bytes=2048 --set l2.size_bytes=8192 --set llc.size_bytes=16384 --set workload.sps.swaps_per_tx=150"
  local hot="--set workload.sps.entries=1024"
  for p in kiln loc-kiln; do
    echo "-w sps -p $p --txs 40 --inject-bug evict-uncommitted-home $tiny"
    echo "-w sps -p $p --txs 40 --inject-bug evict-uncommitted-home --cores 4 $tiny"
    echo "-w sps -p $p --txs 40 --abort-rate 0.2 $tiny"
    echo "-w sps -p $p --txs 40 --abort-rate 0.2 --cores 4 --atomicity 8 $tiny"
    echo "-w hash -p $p --txs 300 --inject-bug ack-before-durable"
  done
  echo "-w sps -p loc-kiln --cores 4 --inject-bug dependent-before-source $hot"
  for p in h-wal kiln hoop; do
    echo "-w sps -p $p --cores 4 --inject-bug lost-invalidation $hot"
  done
  echo "-w sps -p hoop --cores 4 --txs 1000 --inject-bug gc-own-region $hot"
  echo "-w sps -p hoop --txs 600 --inject-bug truncate-before-checkpoint"
  echo "-w sps -p hoop --txs 600 --inject-bug truncate-before-checkpoint --atomicity 16"
}

# The injectable bugs of protocol $1, from `crashtest --list-bugs` of the reference build.
bugs() {
  "$listbin" crashtest --list-bugs | sed -n "s/^$1: //p" | tr ';' '\n' | sed 's/^ *//; s/ .*//'
}

dump() { # BIN OUT
  local bin=$1 out=$2
  : >"$out"
  listbin=${listbin:-$bin}
  cases | while read -r args; do
    # shellcheck disable=SC2086
    local json status=0
    json=$("$bin" crashtest $args --json </dev/null 2>&1) || status=$?
    printf '%s\t%s\t%s\n' "$args" "$status" "$(strip <<<"$json")" >>"$out"
  done
}

# Host timings and provenance differ between builds by design; everything else must not.
strip() {
  python3 -c '
import json, sys
text = sys.stdin.read()
drop = {"states_per_second", "check_seconds", "host_seconds", "worker_seconds", "version", "git_rev"}
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in drop}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
try:
    print(json.dumps(strip(json.loads(text))))
except ValueError:
    print(json.dumps(text.strip()))
'
}

if [ "${1:-}" = "--dump" ]; then
  dump "$2" "$3"
  exit 0
fi
ref=${1:?usage: scripts/same_crash_reports.sh REFBIN [BIN] | --dump BIN OUT}
bin=${2:-target/quick/locsim}
listbin=$ref
dir=$(mktemp -d)
# REF_REPORTS=FILE: REFBIN's reports written before with --dump (saves running it again).
if [ -n "${REF_REPORTS:-}" ]; then
  cp "$REF_REPORTS" "$dir/ref"
else
  dump "$ref" "$dir/ref" &
fi
dump "$bin" "$dir/new"
wait
differ=0
# Case by case, in the same order in both.
python3 - "$dir/ref" "$dir/new" <<'PY' || differ=1
import sys
ref, new = (open(p).read().splitlines() for p in sys.argv[1:])
bad = [r.split("\t")[0] for r, n in zip(ref, new) if r != n] + (["(case count)"] if len(ref) != len(new) else [])
for b in bad:
    print("DIFFERS:", b)
print(f"{len(ref) - len(bad)} of {len(ref)} cases the same, {len(bad)} differ")
sys.exit(1 if bad else 0)
PY
# The violation counts of the bug cases, for the record.
grep -- '--inject-bug' "$dir/ref" | python3 -c '
import json, sys
for line in sys.stdin:
    args, status, rep = line.rstrip("\n").split("\t", 2)
    r = json.loads(rep)
    n = r.get("violations") if isinstance(r, dict) else "error"
    print(f"  {args}: {n} violations")
'
echo "reports in $dir"
[ "$differ" -eq 0 ]
