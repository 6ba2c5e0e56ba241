-- Raw events: one row per accepted event, written by `svc rollup` from Kafka.
-- Partitioned by the month of inserted_at (one value per flush), so that each flush of
-- the consumer is exactly one part: an INSERT is then all-or-nothing, which the
-- exactly-once scheme (kafka_partition, kafka_offset read back on assignment) relies on.
-- The sort key serves analysts (workspace, environment, pixel, day).
-- Clustered: rows are sharded by Kafka partition, so that each partition's rows live on
-- one shard and the per-partition read-back stays exact (a pixel maps to one partition,
-- so a pixel's rows also stay together).
-- cluster: shard_by=kafka_partition
CREATE TABLE IF NOT EXISTS {db}.events
(
    workspace_id    UUID,
    pixel_id        UUID,
    sandbox         UInt8,
    key_id          UUID,
    event_id        UUID,
    event_name      String,
    occurred_at     DateTime('UTC'),
    event_date      Date,
    value           Decimal(18, 4),
    has_value       UInt8,
    currency        String,
    consent         UInt8,
    has_email       UInt8,
    email_sha256    FixedString(32),
    request_id      String,
    received_at     DateTime('UTC'),
    inserted_at     DateTime('UTC'),
    kafka_topic     String,
    kafka_partition Int32,
    kafka_offset    Int64,
    batch_index     UInt8
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(inserted_at)
ORDER BY (workspace_id, sandbox, pixel_id, event_date, event_name)
;
