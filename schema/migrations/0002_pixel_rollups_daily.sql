-- Daily pixel rollup: aggregate states per workspace, environment, pixel, day, event
-- name and currency, fed by a materialized view from events. Read it with the -Merge
-- combinators and GROUP BY (or through pixel_rollups_daily_v). Not partitioned: it is
-- small, and a single partition keeps each materialized-view write one part.
-- cluster: shard_by=cityHash64(pixel_id)
CREATE TABLE IF NOT EXISTS {db}.pixel_rollups_daily
(
    workspace_id     UUID,
    sandbox          UInt8,
    pixel_id         UUID,
    event_date       Date,
    event_name       String,
    currency         String,
    events_state     AggregateFunction(count),
    consented_state  AggregateFunction(sum, UInt64),
    value_state      AggregateFunction(sum, Decimal(18, 4)),
    people_state     AggregateFunction(uniqIf, FixedString(32), UInt8)
)
ENGINE = AggregatingMergeTree
ORDER BY (workspace_id, sandbox, pixel_id, event_date, event_name, currency)
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.pixel_rollups_daily_mv
TO {db}.pixel_rollups_daily
AS SELECT
    workspace_id,
    sandbox,
    pixel_id,
    event_date,
    event_name,
    currency,
    countState() AS events_state,
    sumState(toUInt64(consent)) AS consented_state,
    sumState(value) AS value_state,
    uniqIfState(email_sha256, consent = 1 AND has_email = 1) AS people_state
FROM {db}.events
GROUP BY workspace_id, sandbox, pixel_id, event_date, event_name, currency
;

-- Finalized rollup for analysts: one row per key, states merged.
CREATE VIEW IF NOT EXISTS {db}.pixel_rollups_daily_v
AS SELECT
    workspace_id,
    sandbox,
    pixel_id,
    event_date,
    event_name,
    currency,
    countMerge(events_state) AS events,
    sumMerge(consented_state) AS consented_events,
    sumMerge(value_state) AS value,
    uniqIfMerge(people_state) AS unique_people
FROM {db}.pixel_rollups_daily
GROUP BY workspace_id, sandbox, pixel_id, event_date, event_name, currency
;
