-- Pixel rollup in 15-minute UTC buckets: the same aggregate states as
-- pixel_rollups_daily, per workspace, environment, pixel, bucket (the UTC start of the
-- quarter hour of occurred_at), event name and currency. Every time zone in use has an
-- offset that is a whole number of quarter hours and changes it on a quarter hour, so
-- each bucket lies inside one local day of every zone: a read groups buckets by
-- toDate(bucket, 'Zone') and merges their states into exact local days (unique people
-- included: states merge, counts are never added). Not partitioned, like the daily
-- table: a single partition keeps each materialized-view write one part.
-- cluster: shard_by=cityHash64(pixel_id)
CREATE TABLE IF NOT EXISTS {db}.pixel_rollups_15m
(
    workspace_id     UUID,
    sandbox          UInt8,
    pixel_id         UUID,
    bucket           DateTime('UTC'),
    event_name       String,
    currency         String,
    events_state     AggregateFunction(count),
    consented_state  AggregateFunction(sum, UInt64),
    value_state      AggregateFunction(sum, Decimal(18, 4)),
    people_state     AggregateFunction(uniqIf, FixedString(32), UInt8)
)
ENGINE = AggregatingMergeTree
ORDER BY (workspace_id, sandbox, pixel_id, bucket, event_name, currency)
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.pixel_rollups_15m_mv
TO {db}.pixel_rollups_15m
AS SELECT
    workspace_id,
    sandbox,
    pixel_id,
    toStartOfFifteenMinutes(occurred_at) AS bucket,
    event_name,
    currency,
    countState() AS events_state,
    sumState(toUInt64(consent)) AS consented_state,
    sumState(value) AS value_state,
    uniqIfState(email_sha256, consent = 1 AND has_email = 1) AS people_state
FROM {db}.events
GROUP BY workspace_id, sandbox, pixel_id, bucket, event_name, currency
;

-- Backfill: the events written before the view existed. The view sees every insert
-- that starts after its creation, so the backfill takes the events whose flush time
-- (inserted_at) is before the second the view was created. Exact when the consumers
-- are stopped while this runs (a flush in that second is counted by the view only);
-- with them running, one flush that straddles the creation may be missed or counted
-- twice. This statement is not idempotent: it runs once, from the one runner that
-- applies this migration (svc migrate from one process, as the deploys do).
INSERT INTO {db}.pixel_rollups_15m
SELECT
    workspace_id,
    sandbox,
    pixel_id,
    toStartOfFifteenMinutes(occurred_at) AS bucket,
    event_name,
    currency,
    countState() AS events_state,
    sumState(toUInt64(consent)) AS consented_state,
    sumState(value) AS value_state,
    uniqIfState(email_sha256, consent = 1 AND has_email = 1) AS people_state
FROM {db}.events
WHERE inserted_at < (SELECT max(metadata_modification_time) FROM system.tables
                     WHERE database = '{db}' AND name = 'pixel_rollups_15m_mv')
GROUP BY workspace_id, sandbox, pixel_id, bucket, event_name, currency
;
