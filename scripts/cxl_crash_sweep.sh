#!/usr/bin/env bash
# The crash sweep of docs/cxl.md: every durable protocol on sps, btree and hash under the two
# Global Persistent Flush domains (CXL-attached memory) at 1 and 4 cores, and the cut-short GPF
# (`--gpf-budget-lines`) at 1 core. Prints one table row per check (violations, and the states
# the cut-short fault added); exit status 0 whatever the verdicts (the table is the result).
#
#   scripts/cxl_crash_sweep.sh BIN [CRASHES] [BUDGET]
set -euo pipefail
bin=${1:?usage: scripts/cxl_crash_sweep.sh BIN [CRASHES] [BUDGET]}
crashes=${2:-2000}
budget=${3:-64}
protocols="s-wal h-wal ec-wal loc-wal kiln loc-kiln atom proteus hoop s-undo"
echo "| check | protocol | workload | cores | crash points | violations | cut-short states |"
echo "|---|---|---|---|---|---|---|"
row() { # LABEL PROTOCOL WORKLOAD CORES ARGS...
  local label=$1 p=$2 w=$3 c=$4
  shift 4
  "$bin" crashtest -w "$w" -p "$p" --crashes "$crashes" --cores "$c" --threads 1 --json \
    --set memory.attach=cxl "$@" 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
g = r.get('gpf_cut') or {}
print(f\"| $label | $p | $w | $c | {r['crash_points']} | {r['violations']} | {g.get('states', '-')} |\")" || true
}
for d in gpf gpf-no-writeback; do
  for c in 1 4; do
    for w in sps btree hash; do
      for p in $protocols; do
        row "$d" "$p" "$w" "$c" --set "machine.persist_domain=$d"
      done
    done
  done
done
for w in sps btree hash; do
  for p in $protocols; do
    row "gpf cut at $budget" "$p" "$w" 1 --set machine.persist_domain=gpf --gpf-budget-lines "$budget"
  done
done
