#!/usr/bin/env bash
# The README's test command: `cargo test --workspace --profile quick --no-fail-fast` (arguments
# after it are passed on; every test binary runs even when one fails, so the count is whole), whose tests install what they need themselves (crates/testenv), then one closing
# line over every test binary that names what was missing:
#
#   612 passed, 0 failed, 3 skipped (needs chromium: 1; needs libpmemobj-dev: 2)
#
# A test that could not run for want of something prints `ignored, needs WHAT: WHY` (with `CI`
# set it fails instead); those are the skipped ones. Tests marked `#[ignore]` (measurements
# run by hand) are not run and not counted: a line above the last says how many there were.
# The exit status is cargo's.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --profile quick --no-fail-fast "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# The doc-tests of testenv repeat, as ignored, the tests the harness binaries reported skipped
# (crates/testenv, "The run's last line"): left out of the count.
awk '
  /Doc-tests testenv$/ { repeat = 1 }
  /^test .* \.\.\. ignored, needs / && !repeat {
    what = $0; sub(/^.* \.\.\. ignored, needs /, "", what); sub(/: .*$/, "", what)
    if (!(what in need)) order[++n] = what
    need[what]++; skipped++
  }
  /^test result:/ {
    if (!repeat) for (i = 1; i < NF; i++) {
      if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) ig += $i
    }
    repeat = 0
  }
  END {
    if (ig > skipped) printf "(%d marked #[ignore], measurements run by hand: not run, not counted)\n", ig - skipped
    why = ""
    for (i = 1; i <= n; i++) why = why (i > 1 ? "; " : "") "needs " order[i] ": " need[order[i]]
    printf "%d passed, %d failed, %d skipped%s\n", p, f, skipped, (n ? " (" why ")" : "")
  }' "$log"
exit "$status"
