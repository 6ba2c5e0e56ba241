package settings

// Table is every SVC_* setting of svc, its commands and its scripts: the one place a
// setting is declared. The Reader refuses a name that is not here, its default comes
// from here, `svc config` prints it, and the README tables are generated from it
// (readme_test.go checks them). A test scans the sources for SVC_* names missing here.
var Table = []Setting{
	// The process: every role command (lib/process).
	{Name: "SVC_METRICS_ADDR", Group: GroupProcess, Kind: String, Default: "127.0.0.1:9464",
		ReadBy: with(roles, Bench), Meaning: "Prometheus metrics at `/metrics` (`off` disables)"},
	{Name: "SVC_REDIS_URL", Group: GroupProcess, Kind: String, Default: "redis://127.0.0.1:6379/0",
		ReadBy: with(roles, Admin, Bench, Tests), Meaning: "Redis: keys, pixels, rate limits, idempotency, webhook schedule, batch-id and event-id claims"},
	{Name: "SVC_REDIS_CLUSTER", Group: GroupProcess, Kind: List,
		ReadBy: with(roles, Admin, Bench, Tests), Meaning: "seed addresses (`host:port,host:port,…`) of a Redis Cluster, used by every role and admin command in place of `SVC_REDIS_URL`; hash tags keep what one script touches in one slot (`deploy/README.md`)"},
	{Name: "SVC_LOG_LEVEL", Group: GroupProcess, Kind: String, Default: "info",
		ReadBy: with(roles, Broker), Meaning: "`debug`, `info`, `warn` or `error`; `debug` adds franz-go's, kfake's and clickhouse-go's own detail"},
	{Name: "SVC_PPROF", Group: GroupProcess, Kind: Bool, Default: "false",
		ReadBy: roles, Meaning: "serve `/debug/pprof/` on the metrics listener too (profiling for `svc bench`; never on by default)"},

	// The HTTP side of every role (api.Config).
	{Name: "SVC_HTTP_ADDR", Group: GroupHTTP, Kind: String, Default: "127.0.0.1:8080",
		ReadBy: with(roles, Admin, Bench), Meaning: "HTTP listen address of every role (`svc rollup`: `/healthz` and `/readyz` only)"},
	{Name: "SVC_PUBLIC_URL", Group: GroupHTTP, Kind: String, Shown: "http://$SVC_HTTP_ADDR",
		ReadBy: with(roles, Admin), Meaning: "base URL clients use; problem `type`/`doc_url`, discovery and the application's sign-in links (`svc admin user invite`) derive from it; an https URL makes the application's cookies `Secure` and `__Host-`"},
	{Name: "SVC_TRUSTED_PROXIES", Group: GroupHTTP, Kind: List,
		ReadBy: roles, Meaning: "addresses/CIDRs whose `X-Forwarded-For` is believed for allow-lists"},
	{Name: "SVC_MAX_BODY_BYTES", Group: GroupHTTP, Kind: Int, Default: "1048576",
		ReadBy: roles, Meaning: "request body cap (a route may have a lower one; a GET route takes no body); a larger announced body gets 413 before any of it is read"},
	{Name: "SVC_MAX_INFLIGHT_BODY_BYTES", Group: GroupHTTP, Kind: Int, Default: "67108864",
		ReadBy: roles, Meaning: "request-body bytes one process holds at once for requests with a key (64 MiB, at least `SVC_MAX_BODY_BYTES`); bodies are read only after the key is checked, into buffers that grow with the bytes received; past this a request gets 503 `service_unavailable` with `Retry-After: 1`"},
	{Name: "SVC_MAX_INFLIGHT_PUBLIC_BODY_BYTES", Group: GroupHTTP, Kind: Int, Default: "4194304",
		ReadBy: roles, Meaning: "request-body bytes one process holds at once for requests without a key (4 MiB, at least 4096: the bodies of public routes, i.e. the inbound webhook receiver's), apart from `SVC_MAX_INFLIGHT_BODY_BYTES`, so that anonymous clients never hold the budget of keyed requests; past this such a request gets 503 `service_unavailable` with `Retry-After: 1`; keep it above `SVC_WEBHOOKS_INBOUND_MAX_BODY`"},
	{Name: "SVC_MAX_CONNS_PER_IP", Group: GroupHTTP, Kind: Int, Default: "1024",
		ReadBy: roles, Meaning: "open connections from one client address (an IPv6 client by its /64); the next is answered 429 `rate_limited` and closed; `SVC_TRUSTED_PROXIES` are exempt; 0 disables"},
	{Name: "SVC_READ_TIMEOUT", Group: GroupHTTP, Kind: Duration, Default: "10s",
		ReadBy: roles, Meaning: "reading one request, headers and body (cuts slow clients)"},
	{Name: "SVC_WRITE_TIMEOUT", Group: GroupHTTP, Kind: Duration, Default: "10s",
		ReadBy: roles, Meaning: "writing one response"},
	{Name: "SVC_IDLE_TIMEOUT", Group: GroupHTTP, Kind: Duration, Default: "60s",
		ReadBy: roles, Meaning: "keep-alive connections idle this long are closed"},
	{Name: "SVC_SHUTDOWN_TIMEOUT", Group: GroupHTTP, Kind: Duration, Default: "20s",
		ReadBy: roles, Meaning: "drain in-flight requests on SIGTERM"},
	{Name: "SVC_REDIS_AUTOPIPELINE", Group: GroupHTTP, Kind: Bool, Default: "true",
		ReadBy: roles, Meaning: "batch the per-request Redis commands (rate limit + idempotency script, stored answer) of concurrent requests into shared pipelined round trips (go-redis auto-pipelining)"},
	{Name: "SVC_REDIS_FULL_DUPLEX", Group: GroupHTTP, Kind: Bool, Default: "true",
		ReadBy: roles, Meaning: "with auto-pipelining, stream the hot path's commands over one held connection per Redis node (written as they come, answered as Redis replies) instead of one batch per round trip: a request waits for its own reply, not a whole batch"},
	{Name: "SVC_GATE_CALLS_IN_FLIGHT", Group: GroupHTTP, Kind: Int, Default: "2",
		ReadBy: roles, Meaning: "the gate's Redis calls (rate limits, and on one server the Idempotency-Key reservation) in flight at once: on one Redis server in all, on a cluster per hash slot of the keys' windows; requests that find them all in flight go out together in one call when one returns (0: one call per request, no bound)"},
	{Name: "SVC_KEY_CACHE_TTL", Group: GroupHTTP, Kind: Duration, Default: "500ms",
		ReadBy: roles, Meaning: "how stale a key record may be in a process (revocations apply within it; at most 1s)"},
	{Name: "SVC_IDEMPOTENCY_PENDING_TTL", Group: GroupHTTP, Kind: Duration, Default: "60s",
		ReadBy: roles, Meaning: "how long an Idempotency-Key stays reserved when the process that took it died before answering; on `POST /events` an identical retry takes the reservation over sooner, `SVC_INGEST_DELIVERY_TIMEOUT` + 2s after it was made (`ingest/README.md`)"},

	// Kafka: the brokers, or the embedded one (lib/kafkabroker).
	{Name: "SVC_KAFKA_BROKERS", Group: GroupBroker, Kind: List,
		ReadBy: kafka, Meaning: "comma-separated seed brokers; empty runs the embedded broker in-process (`svc rollup`: connects to `SVC_EMBEDDED_KAFKA_ADDR`)"},
	{Name: "SVC_EMBEDDED_KAFKA_ADDR", Group: GroupBroker, Kind: String, Default: "127.0.0.1:9092",
		ReadBy: kafka, Meaning: "where the embedded broker listens (kcat can read it)"},
	{Name: "SVC_EMBEDDED_KAFKA_FSYNC", Group: GroupBroker, Kind: Bool, Default: "false",
		ReadBy: kafka, Meaning: "fsync every produced batch in the embedded broker"},
	{Name: "SVC_EMBEDDED_KAFKA_RETAIN", Group: GroupBroker, Kind: Duration, Default: "10m",
		ReadBy: kafka, Meaning: "the embedded broker deletes records every consumer group of their topic committed at least this long ago (0: keep them 7 days, as Kafka does); this bounds its memory, which holds an index entry per retained batch"},
	{Name: "SVC_EMBEDDED_KAFKA_TRIM_INTERVAL", Group: GroupBroker, Kind: Duration, Default: "30s",
		ReadBy: kafka, Meaning: "how often the embedded broker checks for such records"},
	{Name: "SVC_KAFKA_PARTITIONS", Group: GroupBroker, Kind: Int, Default: "8",
		ReadBy: kafka, Meaning: "partitions of topics the embedded broker creates (1..1024)"},
	{Name: "SVC_DATA_DIR", Group: GroupBroker, Kind: String, Default: ".data",
		ReadBy: with(kafka, Scripts), Meaning: "local data: the embedded broker's log under `kafka/` (and `kafka-trimmed/`: files its trimmer frees), Redis and ClickHouse under `make run`"},

	// ClickHouse (chpool.Config).
	{Name: "SVC_CLICKHOUSE_ADDR", Group: GroupClickHouse, Kind: String, Default: "127.0.0.1:9000",
		ReadBy: clickhouse, Meaning: "ClickHouse native protocol, host:port; several servers comma-separated: a new connection goes to the first that answers"},
	{Name: "SVC_CLICKHOUSE_DB", Group: GroupClickHouse, Kind: String, Default: "svc",
		ReadBy: clickhouse, Meaning: "ClickHouse database (a plain identifier)"},
	{Name: "SVC_CLICKHOUSE_USER", Group: GroupClickHouse, Kind: String, Default: "default",
		ReadBy: clickhouse, Meaning: "ClickHouse user"},
	{Name: "SVC_CLICKHOUSE_PASSWORD", Group: GroupClickHouse, Kind: String, Secret: true,
		ReadBy: clickhouse, Meaning: "ClickHouse password (never printed)"},
	{Name: "SVC_CLICKHOUSE_CLUSTER", Group: GroupClickHouse, Kind: String,
		ReadBy: clickhouse, Meaning: "cluster name: `svc migrate` applies the clustered schema variant, and the consumer reads back from every replica"},
	{Name: "SVC_CLICKHOUSE_DIAL_TIMEOUT", Group: GroupClickHouse, Kind: Duration, Default: "5s",
		ReadBy: clickhouse, Meaning: "bound of connecting to ClickHouse (and of the ping after it)"},
	{Name: "SVC_CLICKHOUSE_MAX_CONNS", Group: GroupClickHouse, Kind: Int, Default: "8",
		ReadBy: clickhouse, Meaning: "connections in one process's ClickHouse pool (1..1000)"},

	// The edge (ingest.Config).
	{Name: "SVC_INGEST_DELIVERY_TIMEOUT", Group: GroupIngest, Kind: Duration, Default: "5s",
		ReadBy: []string{Dev, Ingest}, Meaning: "longest wait for Kafka's acknowledgement before 503 (while Kafka is unreachable the edge answers 503 at once instead: `ingest/README.md`); also sets when a retry may take over a pending `POST /events` Idempotency-Key (this + 2s)"},
	{Name: "SVC_INGEST_MAX_BUFFERED", Group: GroupIngest, Kind: Int, Default: "20000",
		ReadBy: []string{Dev, Ingest}, Meaning: "batches the producer may buffer before the edge answers 503"},
	{Name: "SVC_INGEST_INVALID_RATE", Group: GroupIngest, Kind: Int, Default: "10",
		ReadBy: []string{Dev, Ingest}, Meaning: "batches a second one key may have refused whole (422) by one edge, in bursts of twice that, before its further `POST /events` are answered 429 `rate_limited` without being read (0: never; `ingest/README.md`)"},
	{Name: "SVC_INGEST_LINGER", Group: GroupIngest, Kind: Duration, Default: "2ms",
		ReadBy: []string{Dev, Ingest}, Meaning: "producer linger per partition"},
	{Name: "SVC_INGEST_COMPRESSION", Group: GroupIngest, Kind: String, Default: "auto",
		ReadBy: []string{Dev, Ingest}, Meaning: "produced batches: `none`, `lz4`, `zstd`, `snappy`; `auto` is none with the embedded broker, lz4 with real brokers"},

	// The consumer (rollup.Config).
	{Name: "SVC_ROLLUP_GROUP", Group: GroupRollup, Kind: String, Default: "svc-rollup",
		ReadBy: []string{Dev, Rollup}, Meaning: "Kafka consumer group; every instance joins it"},
	{Name: "SVC_ROLLUP_BATCH_ROWS", Group: GroupRollup, Kind: Int, Default: "200000",
		ReadBy: []string{Dev, Rollup}, Meaning: "flush at this many events (1000–1000000); one flush is one INSERT"},
	{Name: "SVC_ROLLUP_BATCH_INTERVAL", Group: GroupRollup, Kind: Duration, Default: "1s",
		ReadBy: []string{Dev, Rollup}, Meaning: "flush this long after the oldest unflushed record (10ms–1m)"},
	{Name: "SVC_ROLLUP_RETRY_MIN", Group: GroupRollup, Kind: Duration, Default: "100ms",
		ReadBy: []string{Dev, Rollup}, Meaning: "shortest backoff between failed flushes"},
	{Name: "SVC_ROLLUP_RETRY_MAX", Group: GroupRollup, Kind: Duration, Default: "10s",
		ReadBy: []string{Dev, Rollup}, Meaning: "longest backoff between failed flushes"},
	{Name: "SVC_ROLLUP_INSERT_TIMEOUT", Group: GroupRollup, Kind: Duration, Default: "30s",
		ReadBy: []string{Dev, Rollup}, Meaning: "one INSERT attempt (below the rebalance timeout)"},
	{Name: "SVC_ROLLUP_REVOKE_TIMEOUT", Group: GroupRollup, Kind: Duration, Default: "15s",
		ReadBy: []string{Dev, Rollup}, Meaning: "flush time allowed in a revoke (below the rebalance timeout)"},
	{Name: "SVC_ROLLUP_SESSION_TIMEOUT", Group: GroupRollup, Kind: Duration, Default: "6s",
		ReadBy: []string{Dev, Rollup}, Meaning: "group session timeout: a killed member's partitions move after it (heartbeats every timeout/6, at most 1 s; 1s–5m). Kafka refuses less than its `group.min.session.timeout.ms` (6 s by default)"},
	{Name: "SVC_ROLLUP_REBALANCE_TIMEOUT", Group: GroupRollup, Kind: Duration, Default: "60s",
		ReadBy: []string{Dev, Rollup}, Meaning: "how long a rebalance waits for members; a member killed mid-rebalance holds the group this long (2s–10m)"},
	{Name: "SVC_ROLLUP_TABLE", Group: GroupRollup, Kind: String, Default: "events",
		ReadBy: []string{Dev, Rollup}, Meaning: "raw events table"},
	{Name: "SVC_ROLLUP_REJECTION_SAMPLES", Group: GroupRollup, Kind: Int, Default: "100",
		ReadBy: []string{Dev, Rollup}, Meaning: "rejections stored per pixel and minute (0–100000); past it they are only counted, and `GET /rejections` says how many were not stored (counts are exact either way)"},
	{Name: "SVC_ROLLUP_REJECTION_RETENTION", Group: GroupRollup, Kind: Duration, Default: "720h",
		ReadBy: []string{Dev, Rollup}, Meaning: "rows of the `rejections` table are kept at least this long; a UTC day of them is dropped once all its rows are older by a day more (so that `GET /pixels`' oldest local day is complete in every zone; checked hourly; 0 keeps everything)"},
	{Name: "SVC_ROLLUP_FETCH_MAX_BYTES", Group: GroupRollup, Kind: Int, Default: "0",
		ReadBy: []string{Dev, Rollup}, Meaning: "bytes one fetch of the events' consumer may bring (a partition a quarter of it); 0: 64 KiB from the embedded broker, whose fetch answers hold back its acknowledgements of produced batches (at 200k events/s this took the p99 of a 202 from 42–65 ms to 14–24 ms), and franz-go's 50 MiB from a Kafka cluster (0 or 16384–268435456)"},
	{Name: "SVC_ROLLUP_LOOP_NICE", Group: GroupRollup, Kind: Int, Default: "10",
		ReadBy: []string{Dev, Rollup}, Meaning: "nice value of the OS thread each of the consumer's poll loops runs on, a thread of its own, so that the process's other threads (the edge's, in `svc dev`) get the CPU first (0–19; 0: any thread, as Go schedules it)"},
	{Name: "SVC_EVENT_ID_WINDOW", Group: GroupRollup, Kind: Duration, Default: "48h",
		ReadBy: []string{Dev, Rollup}, Meaning: "how long a client `event_id` deduplicates: a copy of a pixel's event the edge accepts less than this after the stored one is dropped before the INSERT; at or past it the copy is stored and starts a new window (whole seconds, 1s–168h; Redis holds a claim of about 17 B per event with an `event_id`, and per batch with an Idempotency-Key, for the window (at least 25 h, the batches' own) plus 1–13 hours, the owning rollup consumer 20–40 B for that plus 1 hour: `deploy/README.md`)"},

	// The read API (api.Config).
	{Name: "SVC_API_QUERY_TIMEOUT", Group: GroupRead, Kind: Duration, Default: "10s",
		ReadBy: []string{Dev, API}, Meaning: "bound of each ClickHouse query of a request"},
	{Name: "SVC_API_QUERY_THREADS", Group: GroupRead, Kind: Int, Default: "1",
		ReadBy: []string{Dev, API}, Meaning: "ClickHouse `max_threads` of each query (1..64; the queries are small and many run at once)"},
	{Name: "SVC_API_CACHE_TTL", Group: GroupRead, Kind: Duration, Default: "250ms",
		ReadBy: []string{Dev, API}, Meaning: "how long a 200 list page stays fresh in the page cache (0 disables it; at most 10s)"},

	// Webhooks (webhooks.Config).
	{Name: "SVC_WEBHOOKS_INBOUND_MAX_BODY", Group: GroupWebhooks, Kind: Int, Default: "262144",
		ReadBy: webhooks, Meaning: "largest inbound webhook body; larger ones get 413 before parsing"},
	{Name: "SVC_WEBHOOKS_TOLERANCE", Group: GroupWebhooks, Kind: Duration, Default: "300s",
		ReadBy: webhooks, Meaning: "how far a signature timestamp may be from our clock, either way"},
	{Name: "SVC_WEBHOOKS_REPLAY_WINDOW", Group: GroupWebhooks, Kind: Duration, Default: "720h",
		ReadBy: webhooks, Meaning: "how long a processed inbound message id is remembered (a repeat within it is ignored)"},
	{Name: "SVC_WEBHOOKS_INBOUND_FAILURE_BURST", Group: GroupWebhooks, Kind: Int, Default: "20",
		ReadBy: webhooks, Meaning: "refused inbound messages (and replays) one client address may send at once; past them every message from it gets 429 `rate_limited` with `Retry-After`, before any other work, until the bucket refills (1..10000)"},
	{Name: "SVC_WEBHOOKS_INBOUND_FAILURES_PER_MINUTE", Group: GroupWebhooks, Kind: Int, Default: "6",
		ReadBy: webhooks, Meaning: "the rate at which that bucket refills (1..60000)"},
	{Name: "SVC_WEBHOOKS_INBOUND_RETENTION", Group: GroupWebhooks, Kind: Duration, Default: "720h",
		ReadBy: webhooks, Meaning: "inbound log rows (`webhook_inbound`) are kept at least this long; a month of them is dropped once all its rows are older (0 keeps everything)"},
	{Name: "SVC_WEBHOOKS_SECRET_OVERLAP", Group: GroupWebhooks, Kind: Duration, Default: "24h",
		ReadBy: webhooks, Meaning: "how long the previous inbound secret stays valid after a new one is issued"},
	{Name: "SVC_WEBHOOKS_SCHEDULE", Group: GroupWebhooks, Kind: List, Default: "0s,5s,5m,30m,2h,5h,10h,14h,20h,24h",
		ReadBy: webhooks, Meaning: "delay before each delivery attempt, from the previous one (comma-separated durations; its length is the number of attempts, 1..50)"},
	{Name: "SVC_WEBHOOKS_JITTER_PERMILLE", Group: GroupWebhooks, Kind: Int, Default: "100",
		ReadBy: webhooks, Meaning: "each delay is spread by up to ± this many thousandths (0..999)"},
	{Name: "SVC_WEBHOOKS_TIMEOUT", Group: GroupWebhooks, Kind: Duration, Default: "15s",
		ReadBy: webhooks, Meaning: "one delivery attempt: connect, send, and the answer's status line"},
	{Name: "SVC_WEBHOOKS_LEASE", Group: GroupWebhooks, Kind: Duration, Default: "60s",
		ReadBy: webhooks, Meaning: "how long a claimed attempt belongs to one worker (more than `SVC_WEBHOOKS_TIMEOUT`)"},
	{Name: "SVC_WEBHOOKS_MAX_RETRY_AFTER", Group: GroupWebhooks, Kind: Duration, Default: "24h",
		ReadBy: webhooks, Meaning: "cap on a receiver's `Retry-After`"},
	{Name: "SVC_WEBHOOKS_DISABLE_AFTER", Group: GroupWebhooks, Kind: Duration, Default: "72h",
		ReadBy: webhooks, Meaning: "an endpoint whose deliveries failed without a single success for this long is disabled"},
	{Name: "SVC_WEBHOOKS_POLL", Group: GroupWebhooks, Kind: Duration, Default: "1s",
		ReadBy: webhooks, Meaning: "how often the worker looks for due attempts"},
	{Name: "SVC_WEBHOOKS_CONCURRENCY", Group: GroupWebhooks, Kind: Int, Default: "8",
		ReadBy: webhooks, Meaning: "delivery attempts in flight per process (1..256)"},
	{Name: "SVC_WEBHOOKS_ALLOW_NETS", Group: GroupWebhooks, Kind: List,
		ReadBy: with(webhooks, App), Meaning: "internal ranges deliveries may reach (comma-separated CIDRs or addresses; `127.0.0.0/8` for a receiver on this machine): otherwise an endpoint at a loopback, private (RFC 1918, `fc00::/7`), link-local, CGNAT, multicast, unspecified, broadcast or reserved address, literal or resolved, is refused at creation and on every connection; cloud-metadata addresses always are"},
	{Name: "SVC_WEBHOOKS_SCAN_INTERVAL", Group: GroupWebhooks, Kind: Duration, Default: "1m",
		ReadBy: webhooks, Meaning: "how often the triggers look for closed days and expiring keys"},
	{Name: "SVC_WEBHOOKS_DAY_GRACE", Group: GroupWebhooks, Kind: Duration, Default: "1h",
		ReadBy: webhooks, Meaning: "how long after a day ends it becomes final (`rollup.day_closed`), unless the rollup package says otherwise"},
	{Name: "SVC_WEBHOOKS_KEY_EXPIRING_WITHIN", Group: GroupWebhooks, Kind: Duration, Default: "168h",
		ReadBy: webhooks, Meaning: "notice given before a key expires (`key.expiring`)"},
	{Name: "SVC_WEBHOOKS_REDIS_PREFIX", Group: GroupWebhooks, Kind: String, Default: "svc:wh:",
		ReadBy: with(webhooks, App), Meaning: "prefix of every Redis key of the webhooks role (the application reads and changes endpoints, secrets and deliveries under it)"},
	{Name: "SVC_WEBHOOKS_WORKER", Group: GroupWebhooks, Kind: String, Shown: "host-pid",
		ReadBy: webhooks, Meaning: "this process's name in the delivery log (default: host name and pid)"},

	// The privacy worker, run by the webhooks role (privacy.Config).
	{Name: "SVC_PRIVACY_POLL", Group: GroupPrivacy, Kind: Duration, Default: "2s",
		ReadBy: privacyWorker, Meaning: "how often the worker looks for erasures (10ms..1h)"},
	{Name: "SVC_PRIVACY_BATCH", Group: GroupPrivacy, Kind: Int, Default: "100",
		ReadBy: privacyWorker, Meaning: "erasures run together, one mutation of events and one rebuild per rollup table (1..1000)"},
	{Name: "SVC_PRIVACY_MUTATION_TIMEOUT", Group: GroupPrivacy, Kind: Duration, Default: "1h",
		ReadBy: privacyWorker, Meaning: "longest wait for one mutation; the run fails and the next resumes"},
	{Name: "SVC_PRIVACY_HOLD_LEASE", Group: GroupPrivacy, Kind: Duration, Default: "5m",
		ReadBy: privacyWorker, Meaning: "how long pixels stay held while their rollups are rebuilt (extended before inserting)"},
	{Name: "SVC_PRIVACY_RETENTION_INTERVAL", Group: GroupPrivacy, Kind: Duration, Default: "1h",
		ReadBy: privacyWorker, Meaning: "how often raw events past their workspace's retention are removed"},
	{Name: "SVC_PRIVACY_KEEP_IDENTITIES", Group: GroupPrivacy, Kind: Duration, Default: "192h",
		ReadBy: privacyWorker, Meaning: "how long an identity erased without suppression stays in the pipeline's list (Kafka keeps records 7 days; at least 168h)"},

	// The application (app.Config).
	{Name: "SVC_APP_SESSION_TTL", Group: GroupApp, Kind: Duration, Default: "12h",
		ReadBy: []string{Dev, App}, Meaning: "how long an application session lasts from its sign-in (5m..720h); signing out ends it at once"},
	{Name: "SVC_APP_SIGNIN_ATTEMPTS", Group: GroupApp, Kind: Int, Default: "10",
		ReadBy: []string{Dev, App}, Meaning: "failed sign-in attempts (wrong passwords, here and on sign-in links) one email may make from one client address per `SVC_APP_THROTTLE_WINDOW` (1..1000), and ten times that from every address together; at a bound the application answers 429, whatever the password"},
	{Name: "SVC_APP_ADDRESS_ATTEMPTS", Group: GroupApp, Kind: Int, Default: "50",
		ReadBy: []string{Dev, App}, Meaning: "the same bound per client address, unknown or used sign-in links counted too (1..100000; behind a proxy, the address `SVC_TRUSTED_PROXIES` lets it see)"},
	{Name: "SVC_APP_THROTTLE_WINDOW", Group: GroupApp, Kind: Duration, Default: "15m",
		ReadBy: []string{Dev, App}, Meaning: "the window of both bounds, from a subject's first failure (1s..24h)"},
	{Name: "SVC_APP_AUDIT_RETENTION", Group: GroupApp, Kind: Duration, Default: "9600h",
		ReadBy: []string{Dev, App, Admin}, Meaning: "how long audit-log entries (changes made in the application or with `svc admin`) are kept (at least 24h; 9600h is 400 days)"},

	// Tests and scripts.
	{Name: "SVC_TEST_KEEP_DB", Group: GroupTests, Kind: Bool, Default: "false",
		ReadBy: []string{Tests}, Meaning: "keep each test's ClickHouse database for inspection (`schema/chtest`)"},
	{Name: "SVC_BIN", Group: GroupTests, Kind: String,
		ReadBy: []string{Tests}, Meaning: "an `svc` binary for the tests and benchmarks that run one (`lib/svctest`); empty: built from the tree once per test binary"},
	{Name: "SVC_BENCH_RECORDS", Group: GroupTests, Kind: Int, Default: "20000",
		ReadBy: []string{Tests}, Meaning: "records of 50 events `BenchmarkConsumerProcess` drains (`rollup/README.md`)"},
	{Name: "SVC_FOOTPRINT_REDIS", Group: GroupTests, Kind: String,
		ReadBy: []string{Tests}, Meaning: "a Redis of its own (URL, or a cluster's seeds) for `TestIdempotencyFootprint`, which reads its `used_memory`; empty: the test is skipped (`make test-scale` sets its Redis Cluster, with `SVC_FOOTPRINT_N` 30000; `deploy/README.md`)"},
	{Name: "SVC_FOOTPRINT_N", Group: GroupTests, Kind: Int, Default: "100000",
		ReadBy: []string{Tests}, Meaning: "idempotent POST /events requests `TestIdempotencyFootprint` sends"},
	{Name: "SVC_FOOTPRINT_MAX", Group: GroupTests, Kind: Int, Default: "120",
		ReadBy: []string{Tests}, Meaning: "the most Redis bytes per idempotent request `TestIdempotencyFootprint` accepts (`used_memory`'s growth less the clients' and the replication stream's buffers)"},
	{Name: "SVC_CALLGRIND_REDIS", Group: GroupTests, Kind: String,
		ReadBy: []string{Tests}, Meaning: "a scratch Redis (host:port) that `TestReserveGateForCallgrind` fills, run by `bench/callgrind-gate.sh`; empty: the test is skipped"},
	{Name: "SVC_CALLGRIND_M", Group: GroupTests, Kind: Int, Default: "16",
		ReadBy: []string{Tests}, Meaning: "requests per reserve_gate call in `TestReserveGateForCallgrind` (a divisor of 4800)"},
	{Name: "SVC_EVENT_CLAIM_N", Group: GroupTests, Kind: Int, Default: "200000",
		ReadBy: []string{Tests}, Meaning: "event-id claims `TestEventClaimFootprint` makes to measure their Redis memory and time (`deploy/README.md`)"},
	{Name: "SVC_REDIS_PORT", Group: GroupScripts, Kind: Int, Default: "6379",
		ReadBy: []string{Scripts}, Meaning: "port of the local Redis that `deploy/local/services.sh` starts"},
	{Name: "SVC_CLICKHOUSE_PORT", Group: GroupScripts, Kind: Int, Default: "9000",
		ReadBy: []string{Scripts}, Meaning: "native port of the local ClickHouse that `deploy/local/services.sh` starts"},
	{Name: "SVC_CLICKHOUSE_HTTP_PORT", Group: GroupScripts, Kind: Int, Default: "8123",
		ReadBy: []string{Scripts}, Meaning: "HTTP port of the local ClickHouse that `deploy/local/services.sh` starts"},
	{Name: "SVC_CLICKHOUSE_NICE", Group: GroupScripts, Kind: Int, Default: "19",
		ReadBy: []string{Scripts}, Meaning: "CPU nice value of the local ClickHouse servers (`deploy/local/proc.sh`, for its own session too where the kernel groups by session), which also run in the idle CPU cgroup `svc-idle` where the machine lets the script make one: on a machine shared with the edge, its inserts and merges yield the CPU to request handling; 0 for neither, as `make test` and `make test-scale` set it (a test waiting on ClickHouse beside busy test binaries would otherwise starve)"},
	{Name: "SVC_CLICKHOUSE_QUERY_LOG", Group: GroupScripts, Kind: Int, Default: "0",
		ReadBy: []string{Scripts}, Meaning: "`1`: the local ClickHouse, when `deploy/local/services.sh` starts it, logs every session's queries in `system.query_log` (a `users.d` override of the default profile's `log_queries`), for the bench's split of ClickHouse's work (bench/METHOD.md, \"clickhouse's work\"); about 1 KB a query, kept without a TTL by 18.16. `system.part_log` is kept either way"},
	{Name: "SVC_REDIS_CLUSTER_PORT", Group: GroupScripts, Kind: Int, Default: "7000",
		ReadBy: []string{Scripts}, Meaning: "first port of the local Redis Cluster that `deploy/local/redis-cluster.sh` starts (six nodes on consecutive ports)"},
	{Name: "SVC_REDIS_CLUSTER_NODE_TIMEOUT", Group: GroupScripts, Kind: Int, Default: "2000",
		ReadBy: []string{Scripts}, Meaning: "`cluster-node-timeout` (ms) of the local Redis Cluster: how soon a replica replaces a failed master"},
	{Name: "SVC_CH_CLUSTER_PORT", Group: GroupScripts, Kind: Int, Default: "9101",
		ReadBy: []string{Scripts}, Meaning: "first native port of the local ClickHouse cluster that `deploy/local/clickhouse-cluster.sh` starts (the other servers and ports follow)"},
	{Name: "SVC_ZK_PORT", Group: GroupScripts, Kind: Int, Default: "2181",
		ReadBy: []string{Scripts}, Meaning: "port of the local ZooKeeper of that ClickHouse cluster"},
	{Name: "SVC_TOOLS_DIR", Group: GroupScripts, Kind: String, Default: ".data/tools",
		ReadBy: []string{Scripts}, Meaning: "where `make lint` (`deploy/lint.sh`) caches its validators and schemas"},
}

// The commands and other readers ReadBy names.
const (
	Dev      = "dev"
	Ingest   = "ingest"
	Rollup   = "rollup"
	API      = "api"
	Webhooks = "webhooks"
	App      = "app"
	Broker   = "broker"
	Migrate  = "migrate"
	Admin    = "admin"
	Bench    = "bench"
	Tests    = "tests"   // the test suites (not the binary)
	Scripts  = "scripts" // make and deploy/local's shell scripts (not the binary)
)

// Groups: the package that owns a setting's field (the README of its folder shows them).
const (
	GroupProcess    = "process"    // lib/process
	GroupHTTP       = "http"       // api
	GroupBroker     = "broker"     // lib/kafkabroker
	GroupClickHouse = "clickhouse" // schema
	GroupIngest     = "ingest"     // ingest
	GroupRollup     = "rollup"     // rollup
	GroupRead       = "read"       // api
	GroupWebhooks   = "webhooks"   // webhooks
	GroupPrivacy    = "privacy"    // privacy
	GroupApp        = "app"        // app
	GroupTests      = "tests"      // schema/chtest
	GroupScripts    = "scripts"    // Makefile, deploy/local, deploy/lint.sh
)

var (
	// roles are the commands that run a process with an HTTP front.
	roles      = []string{Dev, Ingest, Rollup, API, Webhooks, App}
	kafka      = []string{Dev, Ingest, Rollup, Broker}
	clickhouse = []string{Dev, Rollup, API, Webhooks, App, Migrate, Admin, Bench, Tests}
	webhooks   = []string{Dev, Webhooks, Admin}
	// privacyWorker: the commands that run the privacy worker (svc admin does not).
	privacyWorker = []string{Dev, Webhooks}
)

func with(list []string, more ...string) []string {
	return append(append([]string(nil), list...), more...)
}
