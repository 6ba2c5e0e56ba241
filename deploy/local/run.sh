#!/usr/bin/env bash
# run.sh: what `make run` does after building and starting Redis and ClickHouse: apply
# the schema, seed the showroom workspace, start `svc dev` (every role and the embedded
# Kafka broker) in the background, wait until it is ready, then print a working key, a
# curl line, and the application's URL with a one-time sign-in link for the showroom's
# administrator. Running it again restarts svc dev with the current build.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export SVC_DATA_DIR=${SVC_DATA_DIR:-$root/.data}
addr=${SVC_HTTP_ADDR:-127.0.0.1:8080}
svc=$root/bin/svc
pidfile=$SVC_DATA_DIR/svc-dev.pid
logfile=$SVC_DATA_DIR/svc-dev.log
mkdir -p "$SVC_DATA_DIR"

# json NAME: the string member NAME of the one-line JSON object on stdin.
json() { grep -o "\"$1\":\"[^\"]*\"" | head -1 | cut -d'"' -f4; }

"$svc" migrate

# A running svc dev from an earlier `make run` is replaced by the current build.
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  kill "$(cat "$pidfile")"
  for _ in $(seq 1 100); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.2; done
fi
if curl -fsS -o /dev/null "http://$addr/healthz" 2>/dev/null; then
  echo "something else already answers on $addr (another checkout's make run?): stop it, or set SVC_HTTP_ADDR" >&2
  exit 1
fi
nohup "$svc" dev >>"$logfile" 2>&1 &
echo $! >"$pidfile"

# Ready is our process answering: one that died (its address taken by another server,
# another checkout's `make run` say) must not pass on that server's answer.
ready=""
for _ in $(seq 1 150); do
  kill -0 "$(cat "$pidfile")" 2>/dev/null || break
  if curl -fsS "http://$addr/readyz" >/dev/null 2>&1; then
    sleep 0.3
    kill -0 "$(cat "$pidfile")" 2>/dev/null && ready=1
    break
  fi
  sleep 0.2
done
if [ -z "$ready" ]; then
  echo "svc dev did not become ready; last lines of $logfile:" >&2
  tail -20 "$logfile" >&2
  exit 1
fi

seed=$("$svc" admin seed showroom)
ws=$(echo "$seed" | json workspace_id)
pixel=$(echo "$seed" | json pixel_id)
key=$("$svc" admin key create --workspace "$ws" --env sandbox \
  --scopes events:write,pixels:read,plans:read,campaigns:read,studies:read,account:read,actuals:write)
secret=$(echo "$key" | json secret)
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
admin_email=admin@showroom.example
link=$("$svc" admin user invite --workspace "$ws" --email "$admin_email" --role admin | json sign_in_url)

cat <<MSG

svc dev is running at http://$addr (pid $(cat "$pidfile"), log $logfile; stop it with: make stop).
Showroom workspace $ws, pixel $pixel.
A sandbox key for it (shown once, not stored in clear anywhere):

  $secret

Try it:

  curl -i -X POST http://$addr/v1/events \\
    -H 'Authorization: Bearer $secret' \\
    -H 'Content-Type: application/json' \\
    -H 'Idempotency-Key: first-event-1' \\
    -d '{"pixel_id":"$pixel","events":[{"event_name":"purchase","occurred_at":"$now","value":49.90,"currency":"EUR","consent":{"measurement":true},"identity":{"email":"ada@example.com"}}]}'

  curl -s 'http://$addr/v1/pixel-rollups?pixel_id=$pixel' -H 'Authorization: Bearer $secret'

The discovery document (your key's limits and scopes, the base URL, the OpenAPI document):

  curl -s http://$addr/.well-known/svc -H 'Authorization: Bearer $secret'

The application (API keys, pixels with their live events, health and charts, webhooks,
the workspace and its audit log) is at http://$addr/app.
Sign in as $admin_email through this one-time link (valid 24 h; it asks you to
choose a password, or for the one you chose at an earlier make run):

  $link
MSG
