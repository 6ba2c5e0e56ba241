#!/usr/bin/env bash
# clickhouse-cluster.sh: a local ClickHouse cluster `svc_cluster` of two shards × two
# replicas, four processes of Debian's clickhouse-server on their own ports, coordinated
# by one ZooKeeper from Debian's zookeeper package (run as a plain java process, not
# through systemd). Data under $SVC_DATA_DIR/clickhouse-cluster/. `make test-scale` uses
# it; apply the clustered schema with
#   SVC_CLICKHOUSE_ADDR=127.0.0.1:9101 SVC_CLICKHOUSE_CLUSTER=svc_cluster bin/svc migrate
#
#   deploy/local/clickhouse-cluster.sh up       install if missing, start ZooKeeper and
#                                               the four servers, wait until all answer
#   deploy/local/clickhouse-cluster.sh down     stop them (data stays)
#   deploy/local/clickhouse-cluster.sh reset    stop them and delete the data
#   deploy/local/clickhouse-cluster.sh status   which node answers on which port
#   deploy/local/clickhouse-cluster.sh ports    the native ports, comma-separated
#   deploy/local/clickhouse-cluster.sh kill NODE   SIGKILL one server, e.g. s2r1 (failover
#                                               tests; `up` restarts it)
#
# Nodes (native / http / interserver port): s1r1 9101/8201/9301, s1r2 9102/8202/9302,
# s2r1 9103/8203/9303, s2r2 9104/8204/9304 (SVC_CH_CLUSTER_PORT moves the first native
# port, the others follow). ZooKeeper on SVC_ZK_PORT (2181). Running `up` twice is
# harmless; it also restarts a node that was killed.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
data=${SVC_DATA_DIR:-$root/.data}
case "$data" in /*) ;; *) data=$root/$data ;; esac
dir=$data/clickhouse-cluster
base=${SVC_CH_CLUSTER_PORT:-9101}
zk_port=${SVC_ZK_PORT:-2181}
nodes="s1r1 s1r2 s2r1 s2r2"

log() { echo "clickhouse-cluster: $*" >&2; }

# index of a node (0..3): its ports are base+i, base-900+i (http), base+200+i.
index() { case $1 in s1r1) echo 0 ;; s1r2) echo 1 ;; s2r1) echo 2 ;; s2r2) echo 3 ;; esac; }
tcp_port() { echo $((base + $(index "$1"))); }

install_missing() {
  local pkgs=()
  [ -x /usr/sbin/clickhouse-server ] || command -v clickhouse-server >/dev/null 2>&1 || pkgs+=(clickhouse-server)
  command -v clickhouse-client >/dev/null 2>&1 || pkgs+=(clickhouse-client)
  [ -f /usr/share/java/zookeeper.jar ] || pkgs+=(zookeeper)
  command -v java >/dev/null 2>&1 || pkgs+=(default-jre-headless)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  log "installing ${pkgs[*]} from Debian's packages"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # policy-rc.d may refuse to start the packaged services; we start our own below.
  $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
}

zk_up() {
  local reply
  reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$zk_port; echo ruok >&3; cat <&3" 2>/dev/null) || return 1
  [ "$reply" = imok ]
}

start_zookeeper() {
  zk_up && return 0
  local d=$dir/zookeeper
  mkdir -p "$d/data"
  cat >"$d/zoo.cfg" <<EOF
tickTime=1000
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr
autopurge.purgeInterval=1
EOF
  nohup java -Xmx256m -cp "/usr/share/java/zookeeper.jar" -Dzookeeper.log.dir="$d" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >"$d/zookeeper.log" 2>&1 &
  echo $! >"$d/zookeeper.pid"
}

ch_up() { clickhouse-client --port "$(tcp_port "$1")" -q 'SELECT 1' >/dev/null 2>&1; }

start_node() {
  local n=$1 i d
  i=$(index "$n"); d=$dir/$n
  ch_up "$n" && { clickhouse_yield "$d"; return 0; }
  mkdir -p "$d"
  sed -e "s#@DATA@#$d#g" -e "s#@TCP_PORT@#$((base + i))#g" -e "s#@HTTP_PORT@#$((base - 900 + i))#g" \
    -e "s#@INTERSERVER_PORT@#$((base + 200 + i))#g" -e "s#@ZK_PORT@#$zk_port#g" \
    -e "s#@SHARD@#0${n:1:1}#g" -e "s#@REPLICA@#$n#g" \
    -e "s#@PORT_S1R1@#$base#g" -e "s#@PORT_S1R2@#$((base + 1))#g" \
    -e "s#@PORT_S2R1@#$((base + 2))#g" -e "s#@PORT_S2R2@#$((base + 3))#g" \
    "$root/deploy/local/clickhouse-cluster.xml" >"$d/config.xml"
  clickhouse_start "$d"
}

# shellcheck source=proc.sh
. "$root/deploy/local/proc.sh"

case "${1:-up}" in
  up)
    install_missing
    mkdir -p "$dir"
    start_zookeeper
    wait_for zookeeper zk_up
    for n in $nodes; do start_node "$n"; done
    for n in $nodes; do wait_for "clickhouse $n" ch_up "$n"; done
    log "svc_cluster up: native ports $base-$((base + 3)), zookeeper $zk_port"
    ;;
  down)
    for n in $nodes; do stop_pid "$dir/$n/clickhouse.pid"; done
    stop_pid "$dir/zookeeper/zookeeper.pid"
    ;;
  reset)
    "$0" down
    rm -rf "$dir"
    ;;
  status)
    zk_up && echo "zookeeper  127.0.0.1:$zk_port up" || echo "zookeeper  127.0.0.1:$zk_port down"
    for n in $nodes; do
      ch_up "$n" && s=up || s=down
      echo "$n       127.0.0.1:$(tcp_port "$n") $s"
    done
    ;;
  kill)
    [ -n "${2:-}" ] && [ -f "$dir/$2/clickhouse.pid" ] || { echo "usage: $0 kill NODE (a running node: $nodes)" >&2; exit 2; }
    pid=$(cat "$dir/$2/clickhouse.pid")
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    rm -f "$dir/$2/clickhouse.pid"
    ;;
  ports)
    echo "127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2)),127.0.0.1:$((base + 3))"
    ;;
  *) echo "usage: $0 up|down|reset|status|ports|kill NODE" >&2; exit 2 ;;
esac
