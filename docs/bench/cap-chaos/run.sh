#!/bin/bash
# 2,000 people through a capped program on dynalite while an operator
# changes its settings at random; then cmd/audit reads the table.
set -u
BIN=${BIN:-/tmp/wrload}   # go build -o /tmp/wrload/ ./cmd/local ./cmd/bench ./cmd/audit ./cmd/wrctl
cd "$(git rev-parse --show-toplevel)"
export DYNAMODB_ENDPOINT=http://127.0.0.1:8124 ADMIN_TOKEN=load-secret LOG_LEVEL=warn AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_REGION=us-east-1 WR_URL=http://127.0.0.1:3202
.tools/dynalite/4.0.0/node_modules/.bin/dynalite --host 127.0.0.1 --port 8124 --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 > ${OUT:-/tmp}/dyn2.log 2>&1 &
DYN=$!
sleep 2
TABLE_NAME=chaos PROGRAM_CACHE_TTL=1s $BIN/local -addr 127.0.0.1:3202 -create-table -demo-program "" > ${OUT:-/tmp}/local2.log 2>&1 &
LOC=$!
sleep 3
( until id=$($BIN/wrctl list -json | grep -o '"programId":"chaos[^"]*"' | head -1 | cut -d'"' -f4) && [ -n "$id" ]; do sleep 1; done
  echo "program $id"
  RANDOM=7; end=$((SECONDS+560)); window=600
  while [ $SECONDS -lt $end ]; do
    sleep $((3 + RANDOM % 6))
    case $((RANDOM % 7)) in
      0) $BIN/wrctl put $id -rate $((5 + RANDOM % 16)) ;;
      1) $BIN/wrctl put $id -paused ; sleep $((RANDOM % 5)); $BIN/wrctl put $id -paused=false ;;
      2) window=$((window + 30)); $BIN/wrctl put $id -window ${window}s ;;
      3) $BIN/wrctl put $id -window 60s ;;          # shorter: refused
      4) $BIN/wrctl put $id -no-show $((5 + RANDOM % 60))s ;;  # refused once started
      5) $BIN/wrctl put $id -max-active 40 ;;       # lower: refused
      6) $BIN/wrctl put $id -policy steady ; sleep 3; $BIN/wrctl put $id -policy eta ;;
    esac
  done ) > ${OUT:-/tmp}/chaos-admin.log 2>&1 &
CHAOS=$!
$BIN/bench run -url http://127.0.0.1:3202 -program chaos -users 2000 -arrival uniform:60s -admit-rate 10 -poll server:eta -max-active 50 -no-show-seconds 5 \
  -no-show 0.3 -session 5s-20s -seed 2 -timeout 900s -out ${OUT:-/tmp}/chaos > ${OUT:-/tmp}/chaos-run.log 2>&1
echo "run exit $?" >> ${OUT:-/tmp}/chaos-run.log
wait $CHAOS
TABLE_NAME=chaos $BIN/audit > ${OUT:-/tmp}/chaos-audit.log 2>&1
echo "audit exit $?" >> ${OUT:-/tmp}/chaos-audit.log
kill $LOC $DYN
