# proc.sh: the helpers the local service scripts share (services.sh,
# clickhouse-cluster.sh). Sourced, not run; the sourcing script defines log().
#
#   wait_for NAME CMD [ARG...]   run CMD until it succeeds (60 s at most); logs NAME up or not
#   stop_pid FILE                stop the process whose pid FILE holds (TERM, KILL after 30 s)

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
