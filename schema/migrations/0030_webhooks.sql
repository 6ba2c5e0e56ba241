-- Webhooks (webhooks/README.md). Three logs, each written by `svc webhooks`:
--
-- webhook_inbound: one row per inbound message received at POST /webhooks/inbound/{ws},
-- with its outcome (processed, ignored, failed) and, when not processed, the reason.
-- Listed by `svc admin webhook inbound-log`.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.webhook_inbound
(
    workspace_id  UUID,
    message_id    String,
    received_at   DateTime('UTC'),
    message_type  String,
    outcome       String,
    reason        String,
    status        UInt16,
    rows_written  UInt32,
    body_bytes    UInt32,
    body_sha256   String,
    request_id    String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(received_at)
ORDER BY (workspace_id, received_at, message_id)
;

-- webhook_events: every outbound event emitted, with the exact body delivered (a
-- redelivery sends the same bytes). One row per event id; a repeated emission of the
-- same id is collapsed by the engine.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.webhook_events
(
    event_id      UUID,
    workspace_id  UUID,
    kind          String,
    created_at    DateTime('UTC'),
    payload       String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(created_at)
ORDER BY (workspace_id, event_id)
;

-- webhook_deliveries: the delivery log, one row per attempt of an event to an endpoint:
-- attempt number, HTTP status (0 when no response), latency, error, and what the worker
-- decided (delivered, retry, failed, disabled). Listed by `svc admin webhook deliveries`.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.webhook_deliveries
(
    workspace_id     UUID,
    endpoint_id      UUID,
    event_id         UUID,
    kind             String,
    attempt          UInt16,
    attempted_at     DateTime('UTC'),
    status_code      UInt16,
    latency_ms       UInt32,
    outcome          String,
    error            String,
    next_attempt_at  DateTime('UTC'),
    worker           String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(attempted_at)
ORDER BY (workspace_id, attempted_at, event_id, endpoint_id, attempt)
;
