#!/usr/bin/env bash
# callgrind-gate.sh [M...]: the instructions Redis runs for one idempotent request in the
# HTTP gate's reserve_gate, counted by callgrind (Debian's valgrind): a figure that does
# not move with the host's speed or its neighbours, as Redis's time for the same calls
# does. It starts a scratch redis-server under callgrind (only FCALL's own instructions
# are collected), runs TestReserveGateForCallgrind (4,800 new Idempotency-Keys of one API
# key, in calls of M requests; each answer then stored by a plain HSET, not counted),
# and prints the count per request; then the same for a Redis Cluster's reservation, a
# reserve_record call a request (TestReserveRecordForCallgrind). M: 1 and 16 unless
# given. PORT: 6391. REDIS_SERVER: the redis-server to run (Debian's by default; one
# built with symbols names Lua's own functions: bench/METHOD.md). KEEP=dir keeps each
# run's callgrind output there (callgrind_annotate reads it) and prints the functions
# that ran the most instructions of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind-gate: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
port=${PORT:-6391}
server=${REDIS_SERVER:-redis-server}
keep=${KEEP:-}
[ -z "$keep" ] || mkdir -p "$keep"
work=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go test -c -o "$work/httpserver.test" ./lib/httpserver/

# count TEST M LABEL: TEST's FCALL instructions a request, against a fresh Redis.
count() {
  valgrind --tool=callgrind --toggle-collect=fcallCommand --callgrind-out-file="$work/cg.out" \
    "$server" --port "$port" --save "" --appendonly no >"$work/valgrind.log" 2>&1 &
  local vg=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  SVC_CALLGRIND_REDIS=127.0.0.1:$port SVC_CALLGRIND_M=$2 "$work/httpserver.test" -test.run "^$1\$" -test.count 1 >/dev/null
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$vg" || true
  local total
  total=$(awk '/^totals:/ {print $2}' "$work/cg.out")
  echo "$3: $((total / 4800)) instructions a request (callgrind, FCALL's own, 4800 requests)"
  if [ -n "$keep" ]; then
    cp "$work/cg.out" "$keep/$1-$2.callgrind"
    callgrind_annotate "$keep/$1-$2.callgrind" 2>/dev/null | sed -n '/file:function/,$p' | sed -n 3,22p
  fi
  rm -f "$work"/cg.out*
}

for m in ${*:-1 16}; do
  count TestReserveGateForCallgrind "$m" "reserve_gate, $m request(s) a call"
done
count TestReserveRecordForCallgrind 16 "reserve_record alone (a Redis Cluster's reservation; its take is a call on another master)"
