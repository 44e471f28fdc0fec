#!/usr/bin/env bash
# A `bench run` burst against cmd/local over a local DynamoDB API whose
# process is frozen (SIGSTOP, then SIGCONT) for a while during the run, then
# cmd/audit on the table. docs/benchmarks.md, "A burst through a store
# freeze", explains the measurement. Run from the repository root:
#
#   docs/bench/bench-freeze.sh            # or: make bench-freeze
#
# Settings (environment, defaults in brackets):
#   STORE       dynalite (npm install into $OUT, per-item locks) or moto
#               (moto_server on PATH; only safe if the server serialises
#               its requests) [dynalite]
#   USERS       virtual users, all entering at once [300]
#   RATE        admission rate, people per second [25]
#   FREEZE_AT   freeze this long after the bench starts: within the
#               burst of enters [0.5s]
#   FREEZE_FOR  freeze duration [3s]
#   TIMEOUT     the bench's -timeout [180s]
#   MAX_GAPS    largest fraction of the tickets that may be gaps [0.01]
#   OUT         binaries, logs and results [/tmp/bench-freeze]
#
# Exit status 0 when every user was admitted and the audit passed (no
# duplicate ticket, none out of range, gaps within MAX_GAPS); 1 otherwise.
set -euo pipefail

STORE=${STORE:-dynalite}
USERS=${USERS:-300}
RATE=${RATE:-25}
FREEZE_AT=${FREEZE_AT:-0.5s}
FREEZE_FOR=${FREEZE_FOR:-3s}
TIMEOUT=${TIMEOUT:-180s}
MAX_GAPS=${MAX_GAPS:-0.01}
OUT=${OUT:-/tmp/bench-freeze}
TABLE=benchfreeze

mkdir -p "$OUT/bin"
rm -rf "$OUT/run"
log() { printf '%s bench-freeze: %s\n' "$(date +%T.%3N)" "$*" | tee -a "$OUT/freeze.log" >&2; }
: >"$OUT/freeze.log"

# free_port prints a TCP port nobody listens on.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_port waits until something accepts connections on 127.0.0.1:$1.
wait_port() {
	for _ in $(seq 300); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	log "nothing listens on port $1 after 30 s"
	return 1
}

STORE_PID= LOCAL_PID=
cleanup() {
	[ -n "$STORE_PID" ] && kill -CONT "$STORE_PID" 2>/dev/null || true
	[ -n "$LOCAL_PID" ] && kill "$LOCAL_PID" 2>/dev/null || true
	[ -n "$STORE_PID" ] && kill "$STORE_PID" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT

log "building cmd/local, cmd/bench and cmd/audit into $OUT/bin"
go build -o "$OUT/bin/local" ./cmd/local
go build -o "$OUT/bin/bench" ./cmd/bench
go build -o "$OUT/bin/audit" ./cmd/audit

STORE_PORT=$(free_port)
case "$STORE" in
dynalite)
	if [ ! -f "$OUT/npm/node_modules/dynalite/cli.js" ]; then
		log "installing dynalite 4.0.0 into $OUT/npm"
		npm install --no-audit --no-fund --silent --prefix "$OUT/npm" dynalite@4.0.0 >/dev/null
	fi
	node "$OUT/npm/node_modules/dynalite/cli.js" --host 127.0.0.1 --port "$STORE_PORT" \
		--createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >"$OUT/store.log" 2>&1 &
	;;
moto)
	# exec: the pyenv shim becomes the server, so $! is the process to freeze.
	bash -c 'exec moto_server -H 127.0.0.1 -p "$1"' _ "$STORE_PORT" >"$OUT/store.log" 2>&1 &
	;;
*)
	log "STORE=$STORE: want dynalite or moto"
	exit 2
	;;
esac
STORE_PID=$!
wait_port "$STORE_PORT"
log "$STORE (pid $STORE_PID) on 127.0.0.1:$STORE_PORT"

API_PORT=$(free_port)
export DYNAMODB_ENDPOINT=http://127.0.0.1:$STORE_PORT TABLE_NAME=$TABLE
export ADMIN_TOKEN=freeze-$RANDOM$RANDOM LOG_LEVEL=${LOG_LEVEL:-warn}
"$OUT/bin/local" -addr "127.0.0.1:$API_PORT" -create-table -demo-program "" >"$OUT/local.log" 2>&1 &
LOCAL_PID=$!
wait_port "$API_PORT"
log "cmd/local (pid $LOCAL_PID) on 127.0.0.1:$API_PORT, table $TABLE"

(
	sleep "$FREEZE_AT"
	kill -STOP "$STORE_PID" && log "store frozen (SIGSTOP) for $FREEZE_FOR"
	sleep "$FREEZE_FOR"
	kill -CONT "$STORE_PID" && log "store resumed (SIGCONT)"
) &
FREEZER=$!

log "bench run: $USERS users, burst, admission $RATE/s, store frozen at +$FREEZE_AT for $FREEZE_FOR"
set +e
"$OUT/bin/bench" run -url "http://127.0.0.1:$API_PORT" -users "$USERS" -arrival burst -admit-rate "$RATE" \
	-poll server -timeout "$TIMEOUT" -program freeze -out "$OUT/run" | tee "$OUT/run.txt"
bench_status=${PIPESTATUS[0]}
wait "$FREEZER"
"$OUT/bin/audit" -max 20 -max-gaps "$MAX_GAPS" | tee "$OUT/audit.txt"
audit_status=${PIPESTATUS[0]}
set -e

admitted=$(sed -n 's/^ *"admitted": \([0-9]*\),$/\1/p' "$OUT/run/results.json" 2>/dev/null | head -1)
log "bench exit $bench_status, admitted ${admitted:-?} of $USERS; audit exit $audit_status (MAX_GAPS $MAX_GAPS)"
log "results in $OUT: run.txt, run/{results.json,report.md}, audit.txt, local.log, store.log"
if [ "$bench_status" = 0 ] && [ "${admitted:-0}" = "$USERS" ] && [ "$audit_status" = 0 ]; then
	log PASS
	exit 0
fi
log FAIL
exit 1
