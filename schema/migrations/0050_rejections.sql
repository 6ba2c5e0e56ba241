-- Rejections (schema/rejection): what the edge refused, written by `svc rollup` from
-- the Kafka topic rejections.v1. Two kinds of rows:
--   sample = 1: one stored rejection (rejections = 1): the request, the event's index
--               (-1: the batch as a whole), the field, the rule and the value received
--               as JSON text (identity values and anything with an '@' are "(withheld)");
--   sample = 0: rejections of one pixel, minute, status, field and rule that were
--               counted but not stored (past the per-pixel-per-minute cap of samples),
--               request_id '', key_id zero, value ''.
-- Exact counts: sum(rejections) grouped as needed; stored samples: sample = 1.
-- Partitioned by the UTC day of inserted_at (one value per flush): each flush of the
-- consumer is one part, all or nothing, which the exactly-once read-back of
-- (kafka_partition, kafka_offset) relies on, and the retention drops whole days
-- (ClickHouse 18.16 has no TTL). Sharded by Kafka partition like events.
-- cluster: shard_by=kafka_partition
CREATE TABLE IF NOT EXISTS {db}.rejections
(
    workspace_id    UUID,
    sandbox         UInt8,
    pixel_id        UUID,
    minute          DateTime('UTC'),
    received_at     DateTime('UTC'),
    key_id          UUID,
    request_id      String,
    status          UInt16,
    batch_events    UInt16,
    event_index     Int16,
    field           String,
    rule            String,
    value           String,
    sample          UInt8,
    rejections      UInt32,
    inserted_at     DateTime('UTC'),
    kafka_topic     String,
    kafka_partition Int32,
    kafka_offset    Int64
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(inserted_at)
ORDER BY (workspace_id, sandbox, pixel_id, minute, rule)
;
