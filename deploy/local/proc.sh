# proc.sh: the helpers the local service scripts share (services.sh,
# clickhouse-cluster.sh). Sourced, not run; the sourcing script defines log().
#
#   wait_for NAME CMD [ARG...]   run CMD until it succeeds (60 s at most); logs NAME up or not
#   stop_pid FILE                stop the process whose pid FILE holds (TERM, KILL after 30 s)
#   clickhouse_start DIR         run clickhouse-server on DIR/config.xml (the caller writes it),
#                                at nice $SVC_CLICKHOUSE_NICE (default 19) in a session of its own,
#                                and in the idle CPU group where the machine has one (cpu_idle)
#   clickhouse_yield DIR         the same priority for the server DIR/clickhouse.pid names
#   cpu_idle PID                 move PID into the CPU cgroup svc-idle (cpu.idle = 1)
#   cpu_normal PID               move PID back out of it

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
#
# The server runs at a lower CPU priority than everything else (SVC_CLICKHOUSE_NICE,
# default 19; 0 for none): on a machine it shares with the edge, its inserts and
# merges, the pipeline's asynchronous back half, yield the CPU to request handling
# instead of stalling it (bench/HISTORY.md: the 200k tail's spikes are its merges).
# It only yields when the CPU is contended: an idle machine gives it all it asks.
# Where the kernel offers CPU cgroups this user may write, the server also runs in the idle
# group (cpu_idle): a nice value sets its share, but the kernel's EEVDF scheduler lets a
# running low-priority thread finish its time slice (milliseconds) before a request
# handler that wakes up gets the core; an idle group's threads give it up at once.
clickhouse_start() {
  local d=$1 bin
  mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/format_schemas" "$d/log"
  cp "$root/deploy/local/clickhouse-users.xml" "$d/users.xml"
  bin=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
  local nice=${SVC_CLICKHOUSE_NICE:-19} pid="" i
  rm -f "$d/clickhouse.pid"
  # 18.16 writes no pid file of its own when not daemonised: the shell that becomes the
  # server writes it (setsid may fork, so $! would not be the server).
  setsid sh -c 'echo $$ >"$1/clickhouse.pid"; shift; exec nice -n "$@"' sh "$d" "$nice" \
    "$bin" --config-file="$d/config.xml" </dev/null >"$d/log/stdout.log" 2>&1 &
  for i in $(seq 1 50); do [ -s "$d/clickhouse.pid" ] && break; sleep 0.1; done
  clickhouse_yield "$d"
}

# clickhouse_yield DIR: the group-wide part of clickhouse_start's priority, for the server
# whose pid DIR/clickhouse.pid holds; also applied to a server an earlier checkout started
# (services.sh leaves a running server running). Where the kernel groups CPU time by
# session (autogroup), a nice value counts only inside the group: the server's session
# gets the same nice; then the idle CPU group (cpu_idle).
clickhouse_yield() {
  local nice=${SVC_CLICKHOUSE_NICE:-19} pid
  pid=$(cat "$1/clickhouse.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  log "clickhouse: server $pid ($1) at nice $nice"
  if [ -w "/proc/$pid/autogroup" ]; then
    echo "$nice" >"/proc/$pid/autogroup" 2>/dev/null || true
  fi
  if [ "$nice" -gt 0 ]; then
    cpu_idle "$pid" || log "clickhouse: no idle CPU group here (nice $nice only)"
  else
    cpu_normal "$pid"
  fi
}

# Where CPU cgroups may be: cgroup v1's cpu hierarchy (either name), v2's unified one.
cpu_cgroups="/sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup"

# cpu_idle PID: moves PID (all its threads) into the CPU cgroup svc-idle, created with
# cpu.idle = 1 (SCHED_IDLE for the whole group: it runs on CPU time nothing else wants,
# and any other task that wakes up preempts it). cgroup v1's cpu hierarchy or v2's
# unified one with the cpu controller on; returns 1, changing nothing, where neither is
# there or writable (no root, a container, a kernel before 5.15).
cpu_idle() {
  local pid=$1 top g
  for top in $cpu_cgroups; do
    [ -d "$top" ] || continue
    [ "$top" != /sys/fs/cgroup ] || grep -qw cpu "$top/cgroup.subtree_control" 2>/dev/null || continue
    g=$top/svc-idle
    mkdir -p "$g" 2>/dev/null && [ -f "$g/cpu.idle" ] || continue
    echo 1 >"$g/cpu.idle" 2>/dev/null && echo "$pid" >"$g/cgroup.procs" 2>/dev/null && return 0
  done
  return 1
}

# cpu_normal PID: moves PID back out of svc-idle, when it is there, into the top group.
cpu_normal() {
  local pid=$1 top
  for top in $cpu_cgroups; do
    grep -qx "$pid" "$top/svc-idle/cgroup.procs" 2>/dev/null || continue
    echo "$pid" >"$top/cgroup.procs" 2>/dev/null || true
  done
}
