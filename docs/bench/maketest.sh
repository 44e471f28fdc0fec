#!/usr/bin/env bash
# How long `make test` takes, on this tree and on another commit, side by
# side: one warm-up run of REV (its build cache), then RUNS rounds of this
# tree and REV in turn. Each run prints its wall time and the machine's
# busy CPU time (from /proc/stat: the test servers are grandchildren that
# a process's own CPU time leaves out), and the script ends with the
# medians. docs/benchmarks.md, "make test", gives the results. Run from
# the repository root, with nothing else running:
#
#   REV=25267f8 docs/bench/maketest.sh
#
# Settings: REV [HEAD~1], RUNS [3], OUT [/tmp/bench-maketest].
set -euo pipefail
REV=${REV:-HEAD~1}
RUNS=${RUNS:-3}
OUT=${OUT:-/tmp/bench-maketest}
mkdir -p "$OUT"
here=$PWD
src=$OUT/src
[ -d "$src" ] || git worktree add -q --detach "$src" "$REV"
[ -e "$src/.tools" ] || ln -s "$here/.tools" "$src/.tools"
trap 'git -C "$here" worktree remove --force "$src" 2>/dev/null || true' EXIT

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
# run SIDE DIR: one make test in DIR; appends "SIDE wall busy" to results.
# This tree must pass. REV's suite may be the flaky one being compared
# with: a failed run of it is kept in its log, listed as "SIDE-failed" and
# left out of the medians, and run again.
run() {
  local b0 t0 b1 t1 side=$1
  b0=$(busy); t0=$(date +%s.%N)
  if ! (cd "$2" && make test >"$OUT/$1.log" 2>&1); then
    [ "$1" != this ] || { echo "make test failed on this tree: $OUT/$1.log" >&2; exit 1; }
    side=$1-failed; cp "$OUT/$1.log" "$OUT/$1-failed-$(date +%s).log"
  fi
  b1=$(busy); t1=$(date +%s.%N)
  echo "$side $(echo "$t1 - $t0" | bc) $(echo "($b1 - $b0) / $(getconf CLK_TCK)" | bc -l)" | tee -a "$OUT/results"
  [ "$side" = "$1" ] || [ "$1" = warm-up ] || run "$1" "$2"
}

: >"$OUT/results"
run warm-up "$src"
for i in $(seq "$RUNS"); do
  run this "$here"
  run "$REV" "$src"
done
# Medians of wall and busy CPU seconds per side.
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for side in this "$REV"; do
  printf '%s: median wall %.0f s, median busy CPU %.0f s, over %d runs\n' "$side" \
    "$(awk -v s="$side" '$1 == s {print $2}' "$OUT/results" | median)" \
    "$(awk -v s="$side" '$1 == s {print $3}' "$OUT/results" | median)" "$RUNS"
done
