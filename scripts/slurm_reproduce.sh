#!/usr/bin/env bash
# A sharded reproduction under a real single-node Slurm, checked against a local run.
#
#   scripts/slurm_reproduce.sh [N] [SPEC,...]     # default: 4 shards of the pset and wear specs
#
# Installs Debian's slurm-wlm (and munge) if missing, writes a private slurm.conf for this
# host in a temporary directory (SLURM_CONF points there: the system's /etc/slurm is left
# alone), starts munged if it is not running (and stops it again), starts slurmctld and slurmd, submits
# `locsim reproduce --quick --shard I/N` as an array job of N tasks (sbatch --wait), merges the
# shard files with `locsim merge`, runs the same specs locally without shards, and compares every
# output file byte for byte (the cache directories excepted). Stops the daemons it started.
# Needs root (apt-get, munge, slurmd) and the release build (cargo build --release).
# Exit status 0 when the merged outputs equal the local run's. See docs/faults.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4}
only=${2:-pset,wear}
bin=${LOCSIM_BIN:-$PWD/target/release/locsim}
[ -x "$bin" ] || cargo build --release --bin locsim

if ! command -v slurmctld >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm
fi
started_munge=""
if ! pgrep -x munged >/dev/null; then
  [ -f /etc/munge/munge.key ] || mungekey -c
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- munged
  started_munge=1
fi

work=$(mktemp -d /tmp/locsim-slurm.XXXXXX)
chmod 755 "$work"
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
mkdir -p "$work/state" "$work/spool" "$work/log"
cat >"$work/slurm.conf" <<EOF
ClusterName=locsim
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=locsim Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf

stop() {
  for d in slurmd slurmctld; do
    [ -f "$work/$d.pid" ] && kill "$(cat "$work/$d.pid")" 2>/dev/null || true
  done
  if [ -n "$started_munge" ] && [ -f /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
  fi
}
trap stop EXIT
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 1 60); do
  sinfo -h -o %T 2>/dev/null | grep -qx idle && break
  sleep 1
done
sinfo

exp=$PWD/experiments
cat >"$work/shard.sh" <<EOF
#!/usr/bin/env bash
set -euo pipefail
i=\$SLURM_ARRAY_TASK_ID
exec "$bin" reproduce --quick --no-bench --jobs 1 --only "$only" --experiments "$exp" \
  --shard "\$i/$n" --out "$work/shards/\$i"
EOF
chmod +x "$work/shard.sh"
start=$(date +%s)
sbatch --wait --array="0-$((n - 1))" --cpus-per-task=1 --output="$work/log/shard-%a.out" \
  --chdir="$work" "$work/shard.sh"
echo "array job of $n shards: $(($(date +%s) - start)) s"
"$bin" merge "$work"/shards/* --out "$work/merged"
"$bin" reproduce --quick --no-bench --only "$only" --experiments "$exp" --out "$work/local" >/dev/null
if diff -r -x cache "$work/merged" "$work/local"; then
  echo "slurm: $n shards merged = local run ($(ls "$work/local" | grep -vc cache) files identical) in $work"
else
  echo "slurm: merged outputs differ from the local run ($work)"
  exit 1
fi
