#!/usr/bin/env bash
# Do two builds of locsim give the same results? Runs every workload x every protocol (plus the
# PCM device, Start-Gap, aborts and LOC's speculation degree, and the PCM journal's first traces)
# at a short length with each build, drops the host-timing and provenance fields, and diffs. Used
# for refactors that must not change any result.
#
#   scripts/same_results.sh REV            # this tree (release build) against commit REV
#   scripts/same_results.sh --dump BIN OUT # only write BIN's canonical results to OUT
set -euo pipefail
cd "$(dirname "$0")/.."
txs=${TXS:-1500}

dump() { # BIN OUT
  local bin=$1 out=$2
  : >"$out"
  local all=baseline,s-wal,h-wal,ec-wal,loc-wal,kiln,loc-kiln
  for w in sps btree hash rbtree sdg sqlite; do
    "$bin" run -w "$w" -p "$all" --txs "$txs" --warmup-txs 200 --json >>"$out"
    "$bin" run -w "$w" -p "$all" --txs "$txs" --warmup-txs 200 --abort-rate 0.1 --sd 4 --json >>"$out"
  done
  for w in sps btree; do
    "$bin" run -w "$w" -p "$all" --txs "$txs" --warmup-txs 200 --json --set memory.device=pcm \
      --set startgap.enabled=true --set startgap.psi_writes=8 >>"$out"
    "$bin" crashtest -w "$w" -p loc-wal --txs 300 --crashes 200 --json >>"$out" || true
  done
  # The PCM SQLite journal under its default devices (first traces: a few seconds each).
  for a in fb kt; do
    "$bin" journal --app "$a" --trace 1 --config RR,RR-S2X,RU20-S2X-WH64 --json >>"$out"
  done
  # Host timings and provenance differ between builds by design.
  python3 - "$out" <<'PY'
import json, os, re, sys
path = sys.argv[1]
text = open(path).read()
drop = {"host_seconds", "sim_mem_accesses_per_second", "git_rev", "states_per_second", "check_seconds", "worker_seconds", "version"}
# Keys a change adds on purpose (e.g. IGNORE="config_hash ordering" when a config section is
# added): say so in the commit that uses it.
drop |= set(os.environ.get("IGNORE", "").split())
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in drop}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
dec, i, out = json.JSONDecoder(), 0, []
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    v, i = dec.raw_decode(text, i)
    out.append(strip(v))
open(path, "w").write(json.dumps(out, indent=1, sort_keys=True) + "\n")
PY
}

if [ "${1:-}" = "--dump" ]; then
  dump "$2" "$3"
  exit 0
fi
rev=${1:?usage: scripts/same_results.sh REV | --dump BIN OUT}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q --detach "$tmp/old" "$rev"
# Reuse this tree's build directory for the dependencies.
[ -d target ] && cp -a target "$tmp/old/" 2>/dev/null || true
(cd "$tmp/old" && cargo build -q --release --bin locsim)
cargo build -q --release --bin locsim
dump "$tmp/old/target/release/locsim" "$tmp/old.json"
dump target/release/locsim "$tmp/new.json"
if diff -q "$tmp/old.json" "$tmp/new.json" >/dev/null; then
  echo "same results as $rev ($(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$tmp/new.json") result sets)"
else
  diff "$tmp/old.json" "$tmp/new.json" | head -40
  echo "results differ from $rev"
  exit 1
fi
