#!/usr/bin/env bash
# The crash sweep of docs/ordering.md under the strictest reading of the LOC papers' ordering
# (`ordering.preset=strictest`: every persistent write of a transaction in program order, each
# durable before the next): every durable protocol on sps, btree, hash, rbtree and sdg, on one
# core. Prints one table row per check; exit status 1 if any check found a violation or failed
# to run (the table is printed in full either way). Extra arguments go to every crashtest, e.g.
# `--set ordering.log_order=exempt-ec-loc` for the reading with Eager Commit's and LOC's log
# writes exempt.
#
#   scripts/strictest_crash_sweep.sh BIN [CRASHES] [CRASHTEST ARGS...]
set -uo pipefail
bin=${1:?usage: scripts/strictest_crash_sweep.sh BIN [CRASHES] [CRASHTEST ARGS...]}
crashes=${2:-2000}
shift $(($# < 2 ? $# : 2))
protocols=${PROTOCOLS:-"s-wal h-wal ec-wal loc-wal kiln loc-kiln atom proteus hoop"}
workloads=${WORKLOADS:-"sps btree hash rbtree sdg"}
echo "| workload | protocol | crash points | violations |"
echo "|---|---|---|---|"
bad=0
for w in $workloads; do
  for p in $protocols; do
    if out=$("$bin" crashtest -w "$w" -p "$p" --crashes "$crashes" --json --set ordering.preset=strictest "$@" 2>&1); then
      row=$(printf '%s' "$out" | python3 -c "
import json, sys
r = json.load(sys.stdin)
print(f\"| $w | $p | {r['crash_points']} | {r['violations']} |\")
sys.exit(1 if r['violations'] else 0)") || bad=1
      echo "$row"
    else
      echo "| $w | $p | failed: $(printf '%s' "$out" | tail -1) | - |"
      bad=1
    fi
  done
done
exit $bad
