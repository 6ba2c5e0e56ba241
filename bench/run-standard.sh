#!/usr/bin/env bash
# run-standard.sh: the standard benchmark suite behind `make bench` (a few minutes).
#
# It starts its own `svc dev` (every role and the embedded Kafka broker) on free ports,
# with a scratch data directory and a scratch ClickHouse database, runs the scenarios,
# writes every report (JSON + HTML) and a summary under bench/results/<time>/, and stops
# and removes everything it started. Redis and ClickHouse must be up (`make services`).
#
# Environment:
#   BENCH_SCALE=1      multiply every duration (0.5 for a quicker pass)
#   BENCH_NOTE=...     what else shared the machine; goes into each report
#   BENCH_ONLY="ingest200k e2e"  run only these steps (ingest200k ingest300k ingest500k vegeta ids flood e2e read soak direct)
#                      "vegeta" adds, after each ingest step run, the same scenario driven
#                      by vegeta and the comparison of the two; "ids" adds, after
#                      ingest-200k and ingest-500k, the same with every event carrying a
#                      client event_id of its own (-event-ids), then both again in the
#                      other order, and the comparison of each pair
#   BENCH_VEGETA=path  a vegeta binary to use instead of installing one
#   BENCH_ROUNDS=2     rounds of A B B A at 200k with "ids" (four runs a side; 1 at 500k
#                      unless BENCH_ROUNDS_500K): more rounds, medians of more runs
#   BENCH_ROUNDS_500K=1
#   BENCH_FLOOD_ARGS="-rate 40 -flood-rate 100"  flags appended to the flood step (the
#                      last of a repeated flag wins): a short check at low rates
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
svc=$root/bin/svc
[ -x "$svc" ] || { echo "bin/svc missing: run make build" >&2; exit 1; }
scale=${BENCH_SCALE:-1}
only=${BENCH_ONLY:-ingest200k ingest300k ingest500k vegeta ids flood e2e read soak direct}
for v in BENCH_ROUNDS BENCH_ROUNDS_500K; do
  case "${!v:-1}" in
  '' | *[!0-9]* | 0) echo "$v=${!v}: want a whole number of rounds, 1 or more" >&2; exit 2 ;;
  esac
done
stamp=$(date -u +%Y%m%d-%H%M%S)
out=$root/bench/results/$stamp
mkdir -p "$out"
dur() { awk -v s="$1" -v k="$scale" 'BEGIN { printf "%ds", (s*k < 5 ? 5 : s*k) }'; }
want() { case " $only " in *" $1 "*) return 0 ;; esac; return 1; }

# Free TCP ports on 127.0.0.1: random ones that nothing answers on, from 20000 up to the
# kernel's range of ephemeral ports (32768 by default). A port inside that range may be
# the local end of some outgoing connection, and then listening on it fails though
# nothing answers there (run 20261125-041901 lost its svc dev so).
free_port() {
  local p lo=32768
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$lo" -gt 21000 ] 2>/dev/null || lo=32768
  while :; do
    p=$((20000 + RANDOM % (lo - 20000)))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
ports="$(free_port) $(free_port) $(free_port) $(free_port)"
read -r http_port metrics_port kafka_port rollup_port <<<"$ports"

data=$(mktemp -d /tmp/svc-bench.XXXXXX)
db=bench_std_$(date +%s)_$$
export SVC_HTTP_ADDR=127.0.0.1:$http_port
export SVC_METRICS_ADDR=127.0.0.1:$metrics_port
export SVC_EMBEDDED_KAFKA_ADDR=127.0.0.1:$kafka_port
export SVC_DATA_DIR=$data
export SVC_CLICKHOUSE_DB=$db
export SVC_LOG_LEVEL=${SVC_LOG_LEVEL:-info}
chhttp=${BENCH_CLICKHOUSE_HTTP:-http://127.0.0.1:8123}

# vegeta, the external second opinion, installed through the Go module proxy into a
# bench-local GOBIN (bench/.bin, not committed). Without it the vegeta steps are skipped
# and the summary says why.
vegeta_version=v12.13.0
vegeta=${BENCH_VEGETA:-}
if want vegeta && [ -z "$vegeta" ]; then
  vegeta=$root/bench/.bin/vegeta
  if [ ! -x "$vegeta" ] || ! go version -m "$vegeta" 2>/dev/null | grep -q "vegeta/v12[[:space:]]*$vegeta_version"; then
    echo "== installing vegeta $vegeta_version into bench/.bin"
    if ! GOBIN=$root/bench/.bin go install "github.com/tsenart/vegeta/v12@$vegeta_version"; then
      echo "== vegeta $vegeta_version could not be installed: the vegeta steps are skipped" >&2
      vegeta=""
    fi
  fi
fi

# Redis rewrites its append-only file automatically (auto-aof-rewrite-min-size, 1 GB for
# the local server, deploy/local/services.sh); a step at 500k events/s with event ids grows
# the file by about 1 GB, so a step could meet a rewrite in its middle however recently the
# one before it rewrote (rewrite_aof). For the suite's duration the threshold is 4 GB, so
# that rewrite_aof's rewrite before a step (past half-way) leaves room for any step; the
# setting before is put back at the end.
redis_cli=(redis-cli -u "${SVC_REDIS_URL:-redis://127.0.0.1:6379/0}") # the target's Redis
aof_min=$("${redis_cli[@]}" config get auto-aof-rewrite-min-size 2>/dev/null | tail -1) || true
if [ "${aof_min:-x}" -ge 0 ] 2>/dev/null && [ "$aof_min" -lt $((4 << 30)) ]; then
  "${redis_cli[@]}" config set auto-aof-rewrite-min-size $((4 << 30)) >/dev/null 2>&1 || aof_min=""
else
  aof_min=""
fi

dev_pid=""
rollup_pid=""
cleanup() {
  set +e
  [ -n "$aof_min" ] && "${redis_cli[@]}" config set auto-aof-rewrite-min-size "$aof_min" >/dev/null 2>&1
  for p in $rollup_pid $dev_pid; do
    kill "$p" 2>/dev/null
  done
  for p in $rollup_pid $dev_pid; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  done
  cp "$data/svc-dev.log" "$out/svc-dev.log" 2>/dev/null
  cp "$data/svc-rollup.log" "$out/svc-rollup.log" 2>/dev/null
  curl -fsS "$chhttp/" --data-binary "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
  rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== svc bench standard suite: results in $out"
echo "== scratch: data $data, database $db, http $SVC_HTTP_ADDR, metrics $SVC_METRICS_ADDR, kafka $SVC_EMBEDDED_KAFKA_ADDR"
"$svc" migrate
start_dev() { # svc dev (and svc rollup beside it when dev has no rollup role), ready
  "$svc" dev >>"$data/svc-dev.log" 2>&1 &
  dev_pid=$!
  local ready=""
  for _ in $(seq 1 150); do
    if curl -fsS "http://$SVC_HTTP_ADDR/readyz" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "$dev_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "$ready" ]; then
    echo "svc dev did not become ready:" >&2
    tail -20 "$data/svc-dev.log" >&2
    exit 1
  fi
  # svc dev runs the rollup consumer once the pipeline wires it in; until then, run
  # `svc rollup` beside it against the same broker and database.
  rollup_pid=""
  local has_rollup=""
  for _ in $(seq 1 20); do
    if curl -fsS "http://$SVC_METRICS_ADDR/metrics" -o "$data/metrics.txt" 2>/dev/null && grep -q '^svc_rollup_' "$data/metrics.txt"; then
      has_rollup=1; break
    fi
    sleep 0.5
  done
  if [ -z "$has_rollup" ]; then
    echo "== svc dev has no rollup role: starting svc rollup beside it"
    SVC_HTTP_ADDR=127.0.0.1:$rollup_port SVC_METRICS_ADDR=off "$svc" rollup >>"$data/svc-rollup.log" 2>&1 &
    rollup_pid=$!
  fi
  # CPU of these processes is reported as "svc (target)" in each report.
  export BENCH_TARGET_PIDS="$dev_pid $rollup_pid"
}
start_dev

{
  echo "svc bench standard suite, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "on the same cores: the load generator, svc dev (edge, embedded Kafka broker, rollup consumer, read API, webhooks), Redis, ClickHouse${BENCH_NOTE:+; $BENCH_NOTE}"
  echo
} >"$out/summary.txt"

# drain NAME: wait (15 min at most) until the rollup consumer has read every record the
# earlier steps produced (svc_rollup_partition_lag 0 on every partition, twice in a
# row), so that each scenario starts from a quiet pipeline instead of inheriting the
# backlog of an overload before it; when that took more than 2 s, the summary says how
# long: the time the pipeline needed to catch up.
drain() {
  local name=$1 start=$SECONDS zero=0 lag
  while [ $((SECONDS - start)) -lt 900 ]; do
    lag=$(curl -fsS "http://$SVC_METRICS_ADDR/metrics" 2>/dev/null |
      awk '/^svc_rollup_partition_lag/ {s += $2} END {print s + 0}')
    if [ "$lag" = 0 ]; then
      zero=$((zero + 1))
      [ "$zero" -ge 2 ] && break
    else
      zero=0
    fi
    sleep 1
  done
  if [ $((SECONDS - start)) -gt 2 ]; then
    echo "   (before $name: the consumer caught up with the earlier steps' backlog in $((SECONDS - start)) s; lag now $lag records)" | tee -a "$out/summary.txt"
  fi
  settle "$name"
  rewrite_aof "$name"
}

# rewrite_aof NAME: when Redis's append-only file has grown past half-way to its next
# automatic rewrite (at auto-aof-rewrite-min-size, and auto-aof-rewrite-percentage over
# its size after the last rewrite), rewrite it now and wait (2 min at most), so that the
# rewrite's fork and its child's write of the whole dataset, which take a core for
# seconds (3 s for 1.5 GB here), fall between steps instead of into one side of a pair
# (run V: p99 1–2 s in the step it met, ~130 ms in its twin). What a rewrite costs a
# step that meets it is measured in run Y (HISTORY.md); the summary says when one ran.
rewrite_aof() {
  local name=$1 start=$SECONDS info cur base pct min
  info=$("${redis_cli[@]}" info persistence 2>/dev/null | tr -d '\r') || true
  cur=$(awk -F: '$1 == "aof_current_size" {print $2}' <<<"$info")
  base=$(awk -F: '$1 == "aof_base_size" {print $2}' <<<"$info")
  [ -n "$cur" ] && [ -n "$base" ] || return 0 # no AOF (or no answer): nothing forks for it
  pct=$("${redis_cli[@]}" config get auto-aof-rewrite-percentage 2>/dev/null | tail -1) || true
  min=$("${redis_cli[@]}" config get auto-aof-rewrite-min-size 2>/dev/null | tail -1) || true
  [ "${pct:-0}" -gt 0 ] 2>/dev/null && [ "${min:-x}" -ge 0 ] 2>/dev/null || return 0 # automatic rewrites off, or CONFIG refused
  local at=$((base + base * pct / 100)); [ "$at" -lt "$min" ] && at=$min
  [ $((cur - base)) -lt $(((at - base) / 2)) ] && return 0
  "${redis_cli[@]}" bgrewriteaof >/dev/null 2>&1 || true
  while [ $((SECONDS - start)) -lt 120 ]; do
    "${redis_cli[@]}" info persistence 2>/dev/null | grep -Eq '^aof_rewrite_(in_progress|scheduled):1' || break
    sleep 0.5
  done
  echo "   (before $name: Redis rewrote its append-only file of $((cur >> 20)) MB (half-way to its next automatic rewrite at $((at >> 20)) MB) in $((SECONDS - start)) s)" | tee -a "$out/summary.txt"
}

# settle NAME: wait (2 min at most) until ClickHouse runs no merge in the scratch database,
# so that a scenario does not pay for merging what the one before it wrote (a pair of
# steps compared A against B would otherwise always favour A); the summary says how long
# when that took more than 2 s.
settle() {
  local name=$1 start=$SECONDS n=0
  while [ $((SECONDS - start)) -lt 120 ]; do
    n=$(curl -fsS "$chhttp/" --data-binary "SELECT count() FROM system.merges WHERE database = '$db'" 2>/dev/null || echo 0)
    [ "$n" = 0 ] && break
    sleep 1
  done
  if [ $((SECONDS - start)) -gt 2 ]; then
    echo "   (before $name: ClickHouse finished merging the earlier steps' parts in $((SECONDS - start)) s; merges running now: $n)" | tee -a "$out/summary.txt"
  fi
}

step() { # step NAME ARGS...: one scenario, its summary appended to summary.txt
  local name=$1; shift
  drain "$name"
  # On a shared machine something may have stopped svc dev (a broad pkill): say so in
  # the summary, and start it again so the next scenarios still run.
  if ! kill -0 "$dev_pid" 2>/dev/null || { [ -n "$rollup_pid" ] && ! kill -0 "$rollup_pid" 2>/dev/null; }; then
    echo "   (svc dev or svc rollup had stopped before $name: restarted; see svc-dev.log)" | tee -a "$out/summary.txt"
    for p in $dev_pid $rollup_pid; do
      kill "$p" 2>/dev/null || true
      for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    done
    start_dev
  fi
  echo "== $name: svc bench $*"
  echo "== $name: svc bench $*" >>"$out/summary.txt"
  if "$svc" bench "$@" -out "$out/$name" 2>"$out/$name.progress" | tee -a "$out/summary.txt"; then
    :
  else
    echo "   ($name failed: see $out/$name.progress)" | tee -a "$out/summary.txt"
    tail -3 "$out/$name.progress" >>"$out/summary.txt"
  fi
  echo >>"$out/summary.txt"
}

# vegeta_step NAME ARGS...: after ingest step NAME, the same scenario (same flags) driven
# by vegeta as vegeta-NAME, and both sets of figures side by side with their ratio.
vegeta_step() {
  local name=$1; shift
  want vegeta || return 0
  if [ -z "$vegeta" ]; then
    echo "== vegeta-$name: skipped (vegeta not installed)" | tee -a "$out/summary.txt"
    return 0
  fi
  step "vegeta-$name" vegeta -vegeta "$vegeta" "$@"
  if [ -f "$out/$name.json" ] && [ -f "$out/vegeta-$name.json" ]; then
    echo "== $name: svc bench (A) against vegeta (B), the same scenario" | tee -a "$out/summary.txt"
    "$svc" bench compare "$out/$name.json" "$out/vegeta-$name.json" | tee -a "$out/summary.txt"
    echo >>"$out/summary.txt"
  fi
}
# Every ingest step against svc dev waits, after its load, until the consumer has caught
# up and ClickHouse merges nothing (-catch-up, at most 15 min like drain), and its report
# adds the CPU per event until then ("cpu per event, caught up"): at 500k the consumer
# falls behind during the load, and the CPU per event of the load alone leaves its
# catch-up and ClickHouse's merges out.
ingest_step() { # ingest_step NAME ARGS...: svc bench ingest, then its vegeta twin
  local name=$1; shift
  step "$name" ingest "$@" -catch-up 15m
  vegeta_step "$name" "$@"
}

# ids_step ROUNDS NAME ARGS...: after ingest step NAME (A), the same load with every event
# carrying a client event_id of its own (B: what event-id deduplication costs), in the
# order A B B A, ROUNDS times: NAME-ids, NAME-ids-2, NAME-2, then NAME-3, NAME-ids-3,
# NAME-ids-4, NAME-4, and so on. Each pair side by side, then the medians of all runs of
# A against those of B (svc bench compare of two lists: one run's p99 moves by a third
# between identical runs here, so the medians are the figure). With "vegeta" too, B once
# more driven by vegeta (vegeta-NAME-ids: the recommended use, an Idempotency-Key and
# event ids of its own on every request).
# The order A B B A: a step meets what the steps before it left (Redis records, ClickHouse
# parts, a warm or cold consumer), which favours whichever runs first; in the second pair
# B runs first, so the two ratios err in opposite directions, and their mean does not.
ids_step() {
  local rounds=$1 name=$2; shift 2
  want ids || return 0
  local r a1 b1 b2 a2 as="" bs=""
  for r in $(seq 1 "$rounds"); do
    a1=$name-$((2 * r - 1)) b1=$name-ids-$((2 * r - 1)) b2=$name-ids-$((2 * r)) a2=$name-$((2 * r))
    if [ "$r" = 1 ]; then a1=$name b1=$name-ids; else step "$a1" ingest "$@" -catch-up 15m; fi
    step "$b1" ingest "$@" -event-ids -db "$db" -catch-up 15m
    step "$b2" ingest "$@" -event-ids -db "$db" -catch-up 15m
    step "$a2" ingest "$@" -catch-up 15m
    compare_pair "$a1" "$b1" "A first"
    compare_pair "$a2" "$b2" "B first"
    as="$as $a1 $a2" bs="$bs $b1 $b2"
  done
  compare_runs "$name" "$as" "$bs"
  vegeta_step "$name-ids" "$@" -event-ids -db "$db" # with "vegeta": B driven by vegeta (json targets)
}

# compare_runs NAME "A1 A2…" "B1 B2…": svc bench compare of the runs' medians (those whose
# report exists), into the summary.
compare_runs() {
  local n ra="" rb=""
  for n in $2; do [ -f "$out/$n.json" ] && ra="$ra${ra:+,}$out/$n.json"; done
  for n in $3; do [ -f "$out/$n.json" ] && rb="$rb${rb:+,}$out/$n.json"; done
  if [ -n "$ra" ] && [ -n "$rb" ]; then
    echo "== $1, every run: without event ids (A) against with them (B), medians" | tee -a "$out/summary.txt"
    "$svc" bench compare "$ra" "$rb" | tee -a "$out/summary.txt"
    echo >>"$out/summary.txt"
  fi
}

# compare_pair A B ORDER: svc bench compare of two reports, into the summary.
compare_pair() {
  if [ -f "$out/$1.json" ] && [ -f "$out/$2.json" ]; then
    echo "== $1 ($3): without event ids (A) against with them (B)" | tee -a "$out/summary.txt"
    "$svc" bench compare "$out/$1.json" "$out/$2.json" | tee -a "$out/summary.txt"
    echo >>"$out/summary.txt"
  fi
}

want ingest200k && ingest_step ingest-200k -rate 4000 -duration "$(dur 30)" -batch 50 -invalid 0.02 -retry 0.01
want ingest200k && ids_step "${BENCH_ROUNDS:-2}" ingest-200k -rate 4000 -duration "$(dur 30)" -batch 50 -invalid 0.02 -retry 0.01
# The same load against the edge alone: `svc ingest` with its own embedded broker and no
# consumer, so neither the rollup consumer nor ClickHouse's inserts share the two cores.
# The difference to ingest-200k is what the pipeline's back half costs the edge's tail.
edge_step() { # edge_step NAME ARGS...: one ingest scenario against a lone svc ingest
  local name=$1; shift
  local eh em ek edata epid
  read -r eh em ek <<<"$(free_port) $(free_port) $(free_port)"
  edata=$(mktemp -d /tmp/svc-bench-edge.XXXXXX)
  SVC_HTTP_ADDR=127.0.0.1:$eh SVC_METRICS_ADDR=127.0.0.1:$em SVC_EMBEDDED_KAFKA_ADDR=127.0.0.1:$ek \
    SVC_DATA_DIR=$edata "$svc" ingest >>"$data/svc-ingest.log" 2>&1 &
  epid=$!
  for _ in $(seq 1 150); do curl -fsS "http://127.0.0.1:$eh/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  echo "== $name: svc bench $* (against svc ingest alone)" | tee -a "$out/summary.txt"
  SVC_HTTP_ADDR=127.0.0.1:$eh SVC_METRICS_ADDR=127.0.0.1:$em BENCH_TARGET_PIDS=$epid \
    "$svc" bench "$@" -out "$out/$name" -note "svc ingest alone: no consumer, no ClickHouse inserts" \
    2>"$out/$name.progress" | tee -a "$out/summary.txt" || echo "   ($name failed: see $out/$name.progress)" | tee -a "$out/summary.txt"
  echo >>"$out/summary.txt"
  kill "$epid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$epid" 2>/dev/null || break; sleep 0.2; done
  rm -rf "$edata"
}
want ingest200k && edge_step ingest-200k-edge ingest -rate 4000 -duration "$(dur 30)" -batch 50 -invalid 0.02 -retry 0.01
want ingest300k && ingest_step ingest-300k -rate 6000 -duration "$(dur 30)" -batch 50
# The throughput target: 10,000 req/s of 50 events for 60 s, every request 202.
want ingest500k && ingest_step ingest-500k -rate 10000 -duration "$(dur 60)" -batch 50 -workers 1024
want ingest500k && ids_step "${BENCH_ROUNDS_500K:-1}" ingest-500k -rate 10000 -duration "$(dur 60)" -batch 50 -workers 1024
# The same as the issue first measured it: no Idempotency-Key (so no idempotency record in
# Redis per request; the consumer's batch claim still makes each batch count once).
want ingest500k && ingest_step ingest-500k-plain -rate 10000 -duration "$(dur 60)" -batch 50 -workers 1024 -no-idempotency-key
# The flood: normal traffic (2,000 req/s × 50 = 100k events/s) beside 10,000 req/s of
# batches whose every event is invalid (500k events/s, each batch refused 422 and
# recorded), after the normal traffic alone for the same time; then the rejections
# table's growth and exact count.
# shellcheck disable=SC2086 # BENCH_FLOOD_ARGS is a list of flags
want flood      && step flood-100k-500k flood -rate 2000 -flood-rate 10000 -duration "$(dur 30)" -batch 50 -workers 256 \
  -flood-workers 1024 -flood-source 127.0.0.2 -db "$db" -clickhouse-http "$chhttp" ${BENCH_FLOOD_ARGS:-}
want e2e        && step e2e-50k e2e -rate 1000 -duration "$(dur 60)" -batch 50 -via auto
want read       && step read-100 read -rate 100 -duration "$(dur 20)"
want read       && step read-500 read -rate 500 -duration "$(dur 30)"
# The same at 500 req/s over 100 distinct date windows per endpoint: the read API's page
# cache no longer serves most requests, so this is the cost of the queries themselves.
want read       && step read-500-uncached read -rate 500 -duration "$(dur 20)" -variants 100
want soak       && step soak-50k soak -rate 1000 -duration "$(dur 120)" -batch 50
# The same batches straight into ClickHouse, at the rates the pipeline was given.
want direct     && step direct-50k direct -rate 1000 -duration "$(dur 20)" -batch 50 -clickhouse-http "$chhttp"
want direct     && step direct-200k direct -rate 4000 -duration "$(dur 20)" -batch 50 -clickhouse-http "$chhttp"

if [ -f "$out/e2e-50k.json" ] && [ -f "$out/direct-50k.json" ]; then
  echo "== pipeline (e2e, 50k events/s) vs direct inserts at the same rate" | tee -a "$out/summary.txt"
  "$svc" bench compare "$out/e2e-50k.json" "$out/direct-50k.json" | tee -a "$out/summary.txt"
fi
if [ -f "$out/ingest-200k.json" ] && [ -f "$out/direct-200k.json" ]; then
  echo "== pipeline (ingest, 200k events/s) vs direct inserts at the same rate" | tee -a "$out/summary.txt"
  "$svc" bench compare "$out/ingest-200k.json" "$out/direct-200k.json" | tee -a "$out/summary.txt"
fi
echo "== done: $out/summary.txt and one .json/.html per scenario"
