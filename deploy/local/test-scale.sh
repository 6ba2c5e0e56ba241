#!/usr/bin/env bash
# test-scale.sh: `make test-scale`, the tests over the distributed engines. It starts a
# local Redis Cluster (deploy/local/redis-cluster.sh: 3 masters, 3 replicas) and a
# ClickHouse cluster (deploy/local/clickhouse-cluster.sh: 2 shards × 2 replicas and
# ZooKeeper), all as plain processes, then runs
#
#   1. the Redis-backed suites (api, ingest, webhooks, rollup, privacy) with SVC_REDIS_CLUSTER
#      set: every key operation, script and pipeline of the service against the cluster
#      (ClickHouse: the single server of `make services`), among them one API key's
#      idempotency records and batch claims found on every master
#      (TestOneKeysRecordsSpreadOverMasters, TestOneKeysClaimsSpreadOverMasters);
#   2. TestIdempotencyFootprint against the Redis Cluster alone: what 30,000 idempotent
#      requests leave in Redis, at most 120 B a request over the masters;
#   3. over both clusters: TestScaleOnClusters (two edges and two consumers; an edge, a
#      consumer, a Redis master and a ClickHouse replica killed under load; exact totals,
#      each event_id once), TestEventIDCopiesSurviveARedisFailover (the master of an
#      event-id claim group killed under a load repeating event ids), TestReplicaReadBack
#      (the consumer's read-back from the replicas) and TestRebuildTwiceOnReplicas (a
#      privacy rebuild run twice is not lost to the Replicated tables' deduplication);
#
# and stops both clusters on the way out, pass or fail (SCALE_KEEP=1 leaves them
# running). `make test` must have its services up (the Makefile target sees to it).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
start=$(date +%s)

deploy/local/redis-cluster.sh up
deploy/local/clickhouse-cluster.sh up
if [ "${SCALE_KEEP:-}" != 1 ]; then
  trap 'deploy/local/clickhouse-cluster.sh down; deploy/local/redis-cluster.sh down' EXIT
fi
redis=$(deploy/local/redis-cluster.sh seeds)
clickhouse=$(deploy/local/clickhouse-cluster.sh ports)

echo "test-scale: the Redis-backed suites against the Redis Cluster ($redis)"
SVC_REDIS_CLUSTER=$redis $GO test -count=1 -timeout 10m -p 2 ./api/... ./ingest/... ./webhooks/... ./rollup/... ./privacy/... \
  ./lib/httpserver/ ./lib/idempotency/ ./lib/limits/ ./lib/redisfn/ ./schema/workspace/

# Nothing else uses the cluster now: what idempotent requests leave in Redis, per request,
# summed over the masters (at most SVC_FOOTPRINT_MAX, 120 B; e2e/footprint_test.go).
echo "test-scale: Redis memory per idempotent request on the Redis Cluster"
SVC_FOOTPRINT_REDIS=$redis SVC_FOOTPRINT_N=30000 $GO test -count=1 -timeout 5m -v -run '^TestIdempotencyFootprint$' ./e2e/ |
  grep -E '^(--- |ok|FAIL|PASS|    footprint)'

# One package at a time (-p 1): the e2e tests kill a Redis master and a ClickHouse replica,
# which the other packages' cluster tests must not meet halfway.
echo "test-scale: the multi-process test over both clusters ($redis; svc_cluster at $clickhouse)"
SVC_REDIS_CLUSTER=$redis SVC_CLICKHOUSE_CLUSTER=svc_cluster SVC_CLICKHOUSE_ADDR=$clickhouse \
  $GO test -count=1 -timeout 10m -p 1 -v -run '^(TestScaleOnClusters|TestReplicaReadBack|TestRebuildTwiceOnReplicas|TestRepairOnReplicas|TestEventIDCopiesSurviveARedisFailover)$' ./e2e/ ./rollup/ ./privacy/ |
  grep -vE '^(=== RUN|redis: .*pool\.go)'

echo "test-scale: passed in $(($(date +%s) - start)) s"
