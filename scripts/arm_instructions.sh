#!/usr/bin/env bash
# ARM instructions SQLite executes per journal trace command, on the PCM journal board's ISA
# (ARMv7-A, a Cortex-A9), counted under qemu-arm: the table src/journal/arm_instructions.csv
# that `locsim journal` turns into SQLite's CPU time (docs/journal.md, "SQLite's CPU time").
#
#   scripts/arm_instructions.sh [OUT.csv]      (default: src/journal/arm_instructions.csv)
#   APPS="kt gm" scripts/arm_instructions.sh OUT.csv    (some applications only)
#
# Needs Debian's gcc-arm-linux-gnueabihf, libc6-armhf-cross, qemu-user (7.2, with plugin
# support), a host gcc, python3, and a built locsim (LOCSIM=path, default target/quick/locsim).
# What it does:
#   1. builds the SQLite amalgamation the journal links (libsqlite3-sys's bundled copy, the
#      same version and the -D options its build.rs gives `bundled`, at cc's -O3 as cargo's
#      release and quick profiles build it) for ARMv7-A: -march=armv7-a -mtune=cortex-a9
#      -mfpu=neon -mfloat-abi=hard (Thumb-2, the armhf default), linked statically with the
#      replay driver (arm_sqlite/driver.c); one option added, SQLITE_DEFAULT_SECTOR_SIZE=512,
#      so that SQLite's unix VFS reports the sector size locsim's journal VFS reports;
#   2. builds the QEMU plugin arm_sqlite/icount.c and checks it on loops of known length
#      (`driver selftest`): the two loops must differ by exactly 2 x 999 000 instructions; the
#      empty region's count (the marker calls' own instructions) is taken off every command;
#   3. for every application and trace 1..4 (seed 1), exports the trace with
#      `locsim journal --emit-trace`, replays it under qemu-arm with journal_mode=DELETE (the
#      journaled runs) and OFF (the no-journal reference), and checks that SQLite's
#      virtual-machine instructions per command (mean, 10th and 90th percentile) equal the ones
#      `locsim journal --json` reports for the same trace: the same command stream;
#   4. writes one row per application, trace and journal mode.
# Takes about 20 minutes on one core (the SQLite build 2-6 of them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
out="${1:-$root/src/journal/arm_instructions.csv}"
locsim="${LOCSIM:-$root/target/quick/locsim}"
work="${WORK:-$(mktemp -d)}"
for tool in arm-linux-gnueabihf-gcc qemu-arm gcc python3; do
  command -v "$tool" >/dev/null || { echo "arm_instructions.sh: $tool not found (apt-get install gcc-arm-linux-gnueabihf libc6-armhf-cross qemu-user)" >&2; exit 2; }
done
[ -x "$locsim" ] || { echo "arm_instructions.sh: $locsim not built (cargo build --profile quick, or LOCSIM=path)" >&2; exit 2; }
sq="$(ls -d "$HOME"/.cargo/registry/src/*/libsqlite3-sys-0.30.1/sqlite3 | head -1)"
[ -f "$sq/sqlite3.c" ] || { echo "arm_instructions.sh: libsqlite3-sys-0.30.1's sqlite3.c not in ~/.cargo/registry (cargo fetch)" >&2; exit 2; }

arch="-march=armv7-a -mtune=cortex-a9 -mfpu=neon -mfloat-abi=hard"
# libsqlite3-sys 0.30.1 build.rs, `bundled` on Linux, no other feature.
defs="-DSQLITE_CORE -DSQLITE_DEFAULT_FOREIGN_KEYS=1 -DSQLITE_ENABLE_API_ARMOR -DSQLITE_ENABLE_COLUMN_METADATA
 -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS5
 -DSQLITE_ENABLE_JSON1 -DSQLITE_ENABLE_LOAD_EXTENSION=1 -DSQLITE_ENABLE_MEMORY_MANAGEMENT -DSQLITE_ENABLE_RTREE
 -DSQLITE_ENABLE_STAT4 -DSQLITE_SOUNDEX -DSQLITE_THREADSAFE=1 -DSQLITE_USE_URI -DHAVE_USLEEP=1 -DHAVE_ISNAN
 -D_POSIX_THREAD_SAFE_FUNCTIONS -DHAVE_LOCALTIME_R"
# cc's defaults at OPT_LEVEL 3 without debug information.
cflags="-O3 -ffunction-sections -fdata-sections -fPIC"
if [ ! -f "$work/sqlite3.o" ]; then
  echo "building SQLite for ARMv7-A in $work ..." >&2
  # shellcheck disable=SC2086
  arm-linux-gnueabihf-gcc $arch $cflags $defs -DSQLITE_DEFAULT_SECTOR_SIZE=512 -I"$sq" -c "$sq/sqlite3.c" -o "$work/sqlite3.o"
fi
# shellcheck disable=SC2086
arm-linux-gnueabihf-gcc $arch -O3 -I"$sq" -c "$here/arm_sqlite/driver.c" -o "$work/driver.o"
arm-linux-gnueabihf-gcc -static -o "$work/driver" "$work/driver.o" "$work/sqlite3.o" -lpthread -ldl -lm 2>/dev/null
gcc -O2 -shared -fPIC -fvisibility=hidden -o "$work/icount.so" "$here/arm_sqlite/icount.c"

qemu-arm -plugin "$work/icount.so,out=$work/self.txt" "$work/driver" selftest >/dev/null 2>&1
mapfile -t self < "$work/self.txt"
overhead="${self[0]}"
if [ "$(( self[2] - self[1] ))" != 1998000 ]; then
  echo "arm_instructions.sh: the counter is off: loops of 1 000 and 1 000 000 iterations gave ${self[1]} and ${self[2]} instructions" >&2
  exit 1
fi
echo "counter checked: empty region $overhead, loops ${self[1]} and ${self[2]} instructions" >&2

rows="$work/rows.txt"
: > "$rows"
for app in ${APPS:-fb tw kt gm}; do
  for trace in 1 2 3 4; do
    "$locsim" journal --app "$app" --trace "$trace" --emit-trace > "$work/t.trace"
    want="$("$locsim" journal --app "$app" --trace "$trace" --config RR --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
r = r[0] if isinstance(r, list) else r
print(r["commands"], repr(r["vm_steps_per_command"]), r["vm_steps_per_command_p10"], r["vm_steps_per_command_p90"])')"
    for mode in delete off; do
      rm -rf "$work/db" && mkdir "$work/db"
      qemu-arm -plugin "$work/icount.so,out=$work/ins.txt" "$work/driver" run "$mode" "$work/t.trace" "$work/db" > "$work/vm.txt" 2>/dev/null
      python3 - "$app" "$trace" "$mode" "$overhead" "$want" "$work/vm.txt" "$work/ins.txt" >> "$rows" <<'PY'
import sys
app, trace, mode, overhead, want, vm_path, ins_path = sys.argv[1:]
vm = [int(x) for x in open(vm_path)]
ins = [int(x) - int(overhead) for x in open(ins_path)]
assert len(vm) == len(ins), (len(vm), len(ins))
def spread(v):
    s = sorted(v)
    return sum(s) / len(s), s[len(s) // 10], s[len(s) * 9 // 10]
m, p10, p90 = spread(vm)
got = f"{len(vm)} {m!r} {p10} {p90}"
if got != want:
    sys.exit(f"arm_instructions.sh: {app} trace {trace} ({mode}): VM instructions {got}, locsim's {want}")
im, i10, i90 = spread(ins)
print(f"{app},{trace},{mode},{len(ins)},{sum(vm)},{sum(ins)},{im:.1f},{i10},{i90}")
PY
      echo "$(tail -1 "$rows")" >&2
    done
  done
done
{
  echo "# ARM instructions SQLite executes per trace command (ARMv7-A, Thumb-2, gcc -O3, counted under qemu-arm)."
  echo "# Regenerate: scripts/arm_instructions.sh (docs/journal.md, \"SQLite's CPU time\"). Seed 1."
  echo "app,trace,journal_mode,commands,vm_steps,arm_instructions,mean,p10,p90"
  cat "$rows"
} > "$out"
echo "wrote $out" >&2
