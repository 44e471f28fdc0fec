#!/usr/bin/env bash
# Where make test's CPU goes: each of its four targets alone, in turn,
# warm, with its wall time and the machine's busy CPU seconds (from
# /proc/stat, which counts the test servers too). docs/benchmarks.md,
# "make test", gives the result. Run from the repository root, after one
# make test, with nothing else running: docs/bench/maketargets.sh
set -euo pipefail
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
for t in lint unit-others race emulator; do
  b0=$(busy); t0=$(date +%s.%N)
  make --no-print-directory "$t" SHUFFLE=1 >"/tmp/maketargets-$t.log" 2>&1 || { echo "$t failed: /tmp/maketargets-$t.log" >&2; exit 1; }
  b1=$(busy); t1=$(date +%s.%N)
  printf '%s: wall %.1f s, busy CPU %.0f s\n' "$t" "$(echo "$t1 - $t0" | bc)" "$(echo "($b1 - $b0) / $(getconf CLK_TCK)" | bc -l)"
done
