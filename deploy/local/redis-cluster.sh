#!/usr/bin/env bash
# redis-cluster.sh: a local Redis Cluster of three masters and three replicas, as plain
# processes of Debian's redis-server (installed when missing), with their data under
# $SVC_DATA_DIR/redis-cluster/<port>. `make test-scale` uses it; point svc at it with
# SVC_REDIS_CLUSTER=127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002.
#
#   deploy/local/redis-cluster.sh up      install if missing, start the six nodes, create
#                                         the cluster the first time, wait until it is ok
#   deploy/local/redis-cluster.sh down    stop the six nodes (their data stays: `up` again
#                                         brings back the same cluster)
#   deploy/local/redis-cluster.sh reset   stop them and delete the data
#   deploy/local/redis-cluster.sh status  CLUSTER INFO and the nodes
#   deploy/local/redis-cluster.sh seeds   the seed addresses for SVC_REDIS_CLUSTER
#   deploy/local/redis-cluster.sh kill PORT   SIGKILL one node (failover tests; `up` restarts it)
#
# Running `up` twice is harmless; it also restarts a node that was killed (it rejoins, as
# a replica when its replica was promoted meanwhile). SVC_REDIS_CLUSTER_PORT (7000) is the
# first of six consecutive ports. cluster-node-timeout is 2 s, so a killed master's
# replica is promoted within about 3 s (the default of 15 s suits a real network).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
data=${SVC_DATA_DIR:-$root/.data}
case "$data" in /*) ;; *) data=$root/$data ;; esac
dir=$data/redis-cluster
first=${SVC_REDIS_CLUSTER_PORT:-7000}
ports=$(seq "$first" $((first + 5)))
node_timeout=${SVC_REDIS_CLUSTER_NODE_TIMEOUT:-2000}

log() { echo "redis-cluster: $*" >&2; }

install_missing() {
  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && return 0
  log "installing redis-server from Debian's packages"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq redis-server redis-tools >/dev/null
}

answers() { redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; }

start_node() {
  local port=$1 d=$dir/$1
  answers "$port" && return 0
  mkdir -p "$d"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$d" \
    --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout "$node_timeout" --cluster-replica-validity-factor 0 \
    --appendonly yes --appendfsync everysec --save "" --daemonize yes \
    --pidfile "$d/redis.pid" --logfile "$d/redis.log"
}

wait_nodes() {
  local port i
  for port in $ports; do
    for i in $(seq 1 100); do answers "$port" && break; sleep 0.1; done
    answers "$port" || { log "node $port did not start; see $dir/$port/redis.log"; return 1; }
  done
}

cluster_ok() { redis-cli -p "$first" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }

# settled: every node is seen as connected, without fail flags, and three are replicas.
settled() {
  local nodes; nodes=$(redis-cli -p "$first" cluster nodes 2>/dev/null) || return 1
  [ "$(echo "$nodes" | awk '$3 ~ /slave/ && $8 == "connected"' | wc -l)" -eq 3 ] &&
    [ "$(echo "$nodes" | awk '$3 ~ /master/ && $8 == "connected" && NF > 8' | wc -l)" -eq 3 ] &&
    ! echo "$nodes" | awk '{print $3}' | grep -q fail
}

# known: how many nodes the first node knows (1 before the cluster was created).
known() { redis-cli -p "$first" cluster info 2>/dev/null | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p'; }

create() {
  [ "$(known)" -gt 1 ] && return 0
  local addrs=()
  for port in $ports; do addrs+=("127.0.0.1:$port"); done
  log "creating the cluster: ${addrs[*]}"
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; return 1; }
}

wait_ok() {
  local i
  for i in $(seq 1 150); do
    cluster_ok && settled && redis-cli --cluster check "127.0.0.1:$first" >/dev/null 2>&1 && { log "cluster ok on ports $first-$((first + 5))"; return 0; }
    sleep 0.2
  done
  log "the cluster is not ok after 30 s:"; redis-cli -p "$first" cluster info >&2 || true; return 1
}

stop_node() {
  local port=$1 f=$dir/$1/redis.pid
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

case "${1:-up}" in
  up)
    install_missing
    mkdir -p "$dir"
    for port in $ports; do start_node "$port"; done
    wait_nodes
    create
    wait_ok
    ;;
  down)
    for port in $ports; do stop_node "$port"; done
    ;;
  reset)
    for port in $ports; do stop_node "$port"; done
    rm -rf "$dir"
    ;;
  kill)
    [ -n "${2:-}" ] && [ -f "$dir/$2/redis.pid" ] || { echo "usage: $0 kill PORT (a running node)" >&2; exit 2; }
    kill -9 "$(cat "$dir/$2/redis.pid")" 2>/dev/null || true
    rm -f "$dir/$2/redis.pid"
    ;;
  seeds)
    echo "127.0.0.1:$first,127.0.0.1:$((first + 1)),127.0.0.1:$((first + 2))"
    ;;
  status)
    redis-cli -p "$first" cluster info
    redis-cli -p "$first" cluster nodes
    ;;
  *) echo "usage: $0 up|down|reset|status|seeds|kill PORT" >&2; exit 2 ;;
esac
