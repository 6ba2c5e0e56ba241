#!/usr/bin/env bash
# callgrind-gate.sh [M...]: the instructions Redis runs for one idempotent request in the
# HTTP gate's reserve_gate, counted by callgrind (Debian's valgrind): a figure that does
# not move with the host's speed or its neighbours, as Redis's time for the same calls
# does. It starts a scratch redis-server under callgrind (only FCALL's own instructions
# are collected), runs TestReserveGateForCallgrind (4,800 new Idempotency-Keys of one API
# key, in calls of M requests; each answer then stored by a plain HSET, not counted),
# and prints the count per request. M: 1 and 16 unless given. PORT: 6391.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind-gate: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
port=${PORT:-6391}
work=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go test -c -o "$work/httpserver.test" ./lib/httpserver/
for m in "${@:-1 16}"; do
  for m1 in $m; do
    valgrind --tool=callgrind --toggle-collect=fcallCommand --callgrind-out-file="$work/cg.$m1" \
      redis-server --port "$port" --save "" --appendonly no >"$work/valgrind.$m1.log" 2>&1 &
    vg=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
    SVC_CALLGRIND_REDIS=127.0.0.1:$port SVC_CALLGRIND_M=$m1 "$work/httpserver.test" -test.run '^TestReserveGateForCallgrind$' -test.count 1
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$vg" || true
    total=$(awk '/^totals:/ {print $2}' "$work/cg.$m1")
    echo "reserve_gate, $m1 request(s) a call: $((total / 4800)) instructions a request (callgrind, FCALL's own, 4800 requests)"
  done
done
