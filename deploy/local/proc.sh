# proc.sh: the helpers the local service scripts share (services.sh,
# clickhouse-cluster.sh). Sourced, not run; the sourcing script defines log().
#
#   wait_for NAME CMD [ARG...]   run CMD until it succeeds (60 s at most); logs NAME up or not
#   stop_pid FILE                stop the process whose pid FILE holds (TERM, KILL after 30 s)
#   clickhouse_start DIR         run clickhouse-server on DIR/config.xml (the caller writes it)

wait_for() {
  local name=$1 i; shift
  for i in $(seq 1 240); do
    "$@" && { log "$name is up"; return 0; }
    sleep 0.25
  done
  log "$name did not answer within 60 s; see its log under ${SVC_DATA_DIR:-.data}"; return 1
}

stop_pid() {
  local f=$1
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true # still there after 30 s
  rm -f "$f"
}

# clickhouse_start DIR: clickhouse-server on DIR/config.xml as a plain process with its data,
# logs and users.xml under DIR; its pid in DIR/clickhouse.pid. Uses $root (the checkout).
clickhouse_start() {
  local d=$1 bin
  mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/format_schemas" "$d/log"
  cp "$root/deploy/local/clickhouse-users.xml" "$d/users.xml"
  bin=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
  nohup "$bin" --config-file="$d/config.xml" >"$d/log/stdout.log" 2>&1 &
  echo $! >"$d/clickhouse.pid" # 18.16 writes no pid file of its own when not daemonised
}
