#!/usr/bin/env bash
# The PMDK examples under every protocol (docs/pmdk.md): builds locsim-pmemobj and PMDK's
# example programs (Debian's libpmemobj-dev) at the plain level, records the acceptance set
# (data_store over its seven maps at 500 operations, mapcli over rtree with 1,000 inserts and
# removes, queue, string_store_tx) and the threaded tests/pmdk/threads.c (4 threads, replayed
# on 4 cores), and for each trace prints one table row per protocol: throughput over
# baseline, write traffic, and the verdict of `locsim crashtest --crashes N` (default 2000);
# then injected protocol bugs, which must be caught.
# Usage: scripts/pmdk_sweep.sh [CRASHES] (needs jq, gcc, libpmemobj-dev, libpmemblk-dev,
# libpmemlog-dev; run from the repo).
# PROTOCOLS="baseline s-undo" runs those only (the baseline first: the others are over it).
set -euo pipefail
crashes=${1:-2000}
root=$(pwd)
ex=/usr/share/doc/libpmemobj-dev/examples
for h in "$ex" /usr/include/libpmemblk.h /usr/include/libpmemlog.h; do
  [ -e "$h" ] || { echo "$h is missing: apt-get install libpmemobj-dev libpmemblk-dev libpmemlog-dev" >&2; exit 2; }
done
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build -q --profile quick -p locsim-pmemobj --bin locsim -p locsim
locsim=$CARGO_TARGET_DIR/quick/locsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sh tests/pmdk/build.sh "$ex" "$work/bin" -I"$root/crates/pmemobj/include" -- "$CARGO_TARGET_DIR/quick/liblocsim_pmemobj.a" -ldl
printf '#include <time.h>\ntime_t time(time_t *t) { if (t) *t = 1000; return 1000; }\n' > "$work/fixtime.c"
gcc -shared -fPIC -o "$work/fixtime.so" "$work/fixtime.c"
cd "$work"
traces=()
for m in btree ctree rbtree skiplist hashmap_tx hashmap_atomic hashmap_rp; do
  LD_PRELOAD=$work/fixtime.so bin/data_store $m ds-$m 500
  traces+=("data_store $m:ds-$m.trace")
done
{ for k in $(seq 1 1000); do echo "i $((k * 7919 % 100003))"; done
  for k in $(seq 1 3 1000); do echo "r $((k * 7919 % 100003))"; done; echo q; } > script
bin/mapcli rtree mapcli-rtree 1 < script > /dev/null
traces+=("mapcli rtree:mapcli-rtree.trace")
bin/mkpool queue.pool queue 8388608
for c in "new 64" "enqueue hello" "enqueue world" "dequeue" "enqueue again"; do bin/queue queue.pool $c > /dev/null; done
traces+=("queue (last run):queue.pool.trace")
echo hello | bin/string_store_tx_writer sstx.pool > /dev/null
traces+=("string_store_tx writer:sstx.pool.trace")
bin/threads threads.pool > /dev/null
# (name:file:cores; one core when not given)
traces+=("threads (4 threads, 4 cores):threads.pool.trace:4")
read -ra protocols <<< "${PROTOCOLS:-baseline s-undo s-wal h-wal ec-wal loc-wal kiln loc-kiln atom proteus hoop}"
echo "| program | transactions | $(IFS='|'; echo "${protocols[*]}" | sed 's/|/ | /g') |"
echo "|---|---|$(for p in "${protocols[@]}"; do printf -- '---|'; done)"
for t in "${traces[@]}"; do
  IFS=: read -r name file cores <<< "$t"
  cores=${cores:-1}
  json=$("$locsim" run --trace "$file" --cores "$cores" -p "$(IFS=,; echo "${protocols[*]}")" --json)
  row="| $name | $(echo "$json" | jq '.[0].txs_committed') |"
  for p in "${protocols[@]}"; do
    r=$(echo "$json" | jq -r --arg p "$p" '.[] | select(.protocol == $p) | "\(.normalized_throughput * 1000 | round / 1000) / \(.write_traffic * 100 | round / 100)"')
    if [ "$p" = baseline ]; then
      v="-"
    else
      v=$("$locsim" crashtest --trace "$file" --cores "$cores" -p "$p" --crashes "$crashes" --json | jq -r '.violations')
      [ "$v" = 0 ] && v="0 ✓" || v="$v ✗"
    fi
    row="$row $r / $v |"
  done
  echo "$row"
done
echo
out=$("$locsim" crashtest --trace ds-btree.trace -p h-wal --crashes "$crashes" --json --inject-bug ack-before-durable || true)
echo "injected ack-before-durable under h-wal on data_store btree: $(echo "$out" | jq '.violations') violations"
for pb in h-wal:ack-before-durable loc-wal:dependent-before-source; do
  out=$("$locsim" crashtest --trace threads.pool.trace --cores 4 -p "${pb%%:*}" --crashes "$crashes" --json --inject-bug "${pb#*:}" || true)
  echo "injected ${pb#*:} under ${pb%%:*} on threads, 4 cores: $(echo "$out" | jq '.violations') violations"
done
