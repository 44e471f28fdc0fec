#!/usr/bin/env bash
# Series and bytes of /metrics on cmd/local before and after N requests
# with made-up methods (M00000, M00001, …) to the API, the page and an
# unknown path: made-up methods add no series (docs/security.md). Run
# from the repository root:
#
#   docs/bench/labels.sh            # HEAD
#   REV=0441536 docs/bench/labels.sh  # another commit, built in a worktree
#
# Settings: N requests [5000], REV [HEAD], OUT [/tmp/bench-labels].
set -euo pipefail
N=${N:-5000}
REV=${REV:-HEAD}
OUT=${OUT:-/tmp/bench-labels}
mkdir -p "$OUT"
src=$OUT/src-$REV
[ -d "$src" ] || git worktree add -q --detach "$src" "$REV"
(cd "$src" && go build -o "$OUT/local-$REV" ./cmd/local)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port
"$OUT/local-$REV" -addr "127.0.0.1:$port" -demo-crowd 0 >"$OUT/server-$REV.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; git worktree remove --force "$src" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "$base/metrics" >/dev/null && break; sleep 0.1; done
scrape() { curl -fs "$base/metrics" >"$OUT/metrics-$REV-$1"; printf '%s: %d series, %d bytes\n' "$1" "$(grep -vc '^#' "$OUT/metrics-$REV-$1")" "$(wc -c <"$OUT/metrics-$REV-$1")"; }
scrape before
targets=(/api/v1/queues/programs/demo /waiting-room/demo /made/up/)
# One curl per 250 requests (--next starts the next request).
for ((i = 0; i < N; i += 250)); do
  args=()
  for ((j = i; j < i + 250 && j < N; j++)); do
    args+=(-s -o /dev/null -X "$(printf 'M%05d' "$j")" "$base${targets[j % 3]}" --next)
  done
  curl "${args[@]}" -s -o /dev/null "$base/made/up/" || true
done
scrape "after-$N"
