-- Accepted events per pixel and minute of reception (the edge's received_at), for the
-- pipeline's diagnostics: the alerts of the webhooks role (pixel.rejections_rising
-- compares them with the rejections of the same minutes; pixel.silent reads the last
-- one) read a pixel's recent minutes here instead of its raw events. One row per
-- workspace, environment, pixel, minute and event day (the day key lets an erasure
-- rebuild a day's rows like every rollup's: rollups.RollupTables); states merge:
-- countMerge(events_state), maxMerge(last_state) = the latest received_at.
-- Not partitioned, like the other rollups: a single partition keeps each
-- materialized-view write one part. No backfill: the alerts look at recent minutes only.
-- cluster: shard_by=cityHash64(pixel_id)
CREATE TABLE IF NOT EXISTS {db}.pixel_accepted_minutes
(
    workspace_id  UUID,
    sandbox       UInt8,
    pixel_id      UUID,
    minute        DateTime('UTC'),
    event_date    Date,
    events_state  AggregateFunction(count),
    last_state    AggregateFunction(max, DateTime('UTC'))
)
ENGINE = AggregatingMergeTree
ORDER BY (workspace_id, sandbox, pixel_id, minute, event_date)
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.pixel_accepted_minutes_mv
TO {db}.pixel_accepted_minutes
AS SELECT
    workspace_id,
    sandbox,
    pixel_id,
    toStartOfMinute(received_at) AS minute,
    event_date,
    countState() AS events_state,
    maxState(received_at) AS last_state
FROM {db}.events
GROUP BY workspace_id, sandbox, pixel_id, minute, event_date
;
