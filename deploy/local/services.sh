#!/usr/bin/env bash
# services.sh: install (from Debian's packages, when missing), start and wait for the
# local Redis and ClickHouse that `make run` and `make test` need. No systemd: both run
# as plain processes with their data under $SVC_DATA_DIR (default .data). Running it
# twice is harmless: a service that already answers is left alone. It also installs
# HAProxy, which it does not start: api's allow-list test runs its own in front of a test
# server (api/haproxy_test.go; under CI=true it fails without it); and Chromium, which
# the application's browser test drives (app/browser_test.go; the same rule).
#
#   deploy/local/services.sh up     install if missing, start, wait until both answer
#   deploy/local/services.sh down   stop both (by pid file)
#
# SVC_CLICKHOUSE_QUERY_LOG=1 (read when ClickHouse starts): log every query in
# system.query_log, for the bench's split of ClickHouse's work (bench/METHOD.md).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
data=${SVC_DATA_DIR:-$root/.data}
case "$data" in /*) ;; *) data=$root/$data ;; esac
redis_port=${SVC_REDIS_PORT:-6379}
ch_port=${SVC_CLICKHOUSE_PORT:-9000}
ch_http_port=${SVC_CLICKHOUSE_HTTP_PORT:-8123}

log() { echo "services: $*" >&2; }

install_missing() {
  local pkgs=()
  command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
  command -v clickhouse-server >/dev/null 2>&1 || [ -x /usr/sbin/clickhouse-server ] || pkgs+=(clickhouse-server)
  command -v clickhouse-client >/dev/null 2>&1 || pkgs+=(clickhouse-client)
  command -v curl >/dev/null 2>&1 || pkgs+=(curl)
  command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || pkgs+=(haproxy)
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || pkgs+=(chromium)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  log "installing ${pkgs[*]} from Debian's packages"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # policy-rc.d may refuse to start the packaged services; we start our own below (and
  # the tests their own HAProxy).
  $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
}

redis_up() { redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG; }
ch_up() { clickhouse-client --port "$ch_port" -q 'SELECT 1' >/dev/null 2>&1; }

start_redis() {
  redis_up && { log "redis already answers on $redis_port"; return 0; }
  mkdir -p "$data/redis"
  # AOF, fsynced every second; rewritten once it reaches 1 GB (and twice its size after
  # the last rewrite), not at Redis's default 64 MB: at 200,000 events/s the log grows
  # ~3.5 MB/s, and each rewrite forks Redis and costs a core for about a second, which
  # showed as latency spikes at the edge (bench/HISTORY.md). The rewrite's snapshot is
  # not LZF-compressed: our hashes' binary fields do not compress (43.3 MB against
  # 43.5 MB), and compressing took a quarter of the rewrite's time (0.80 s against 0.60).
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$data/redis" \
    --appendonly yes --save "" --auto-aof-rewrite-min-size 1gb --rdbcompression no --daemonize yes \
    --pidfile "$data/redis/redis.pid" --logfile "$data/redis/redis.log"
}

# ch_started_dir: the data directory of the ClickHouse answering on $ch_port when a
# checkout of svc started it (its --config-file under DIR, its pid in DIR/clickhouse.pid),
# so that this run's priority (SVC_CLICKHOUSE_NICE: 0 for the tests, 19 otherwise) reaches
# a server another checkout started too; $data/clickhouse when there is none or `ss`
# cannot say (a server svc did not start keeps its priority).
ch_started_dir() {
  local pid cfg d
  pid=$(ss -Hltnp "sport = :$ch_port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)
  cfg=$( { tr '\0' '\n' <"/proc/${pid:-0}/cmdline"; } 2>/dev/null | sed -n 's/^--config-file=//p' || true)
  d=$(dirname "${cfg:-/nonexistent/x}")
  if [ -n "$pid" ] && [ "$(cat "$d/clickhouse.pid" 2>/dev/null)" = "$pid" ]; then
    echo "$d"
  else
    echo "$data/clickhouse"
  fi
}

start_clickhouse() {
  local d="$data/clickhouse"
  ch_up && { log "clickhouse already answers on $ch_port"; clickhouse_yield "$(ch_started_dir)"; return 0; }
  mkdir -p "$d"
  sed -e "s#@DATA@#$d#g" -e "s#@TCP_PORT@#$ch_port#g" -e "s#@HTTP_PORT@#$ch_http_port#g" \
    "$root/deploy/local/clickhouse.xml" >"$d/config.xml"
  query_log "$d"
  clickhouse_start "$d"
}

# query_log DIR: with SVC_CLICKHOUSE_QUERY_LOG=1, every session's queries go to
# system.query_log (the bench reads its INSERTs' CPU from there: bench/METHOD.md); without
# it only sessions that ask. 18.16 keeps the table without a TTL: about 1 KB a query.
query_log() {
  mkdir -p "$1/users.d"
  if [ "${SVC_CLICKHOUSE_QUERY_LOG:-0}" = 1 ]; then
    printf '<yandex><profiles><default><log_queries>1</log_queries></default></profiles></yandex>\n' \
      >"$1/users.d/query_log.xml"
  else
    rm -f "$1/users.d/query_log.xml"
  fi
}

# shellcheck source=proc.sh
. "$root/deploy/local/proc.sh"

case "${1:-up}" in
  up)
    install_missing
    start_redis
    start_clickhouse
    wait_for redis redis_up
    wait_for clickhouse ch_up
    ;;
  down)
    stop_pid "$data/redis/redis.pid"
    stop_pid "$data/clickhouse/clickhouse.pid"
    ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
