-- Actuals: delivered performance per day, written back into media plans and campaigns
-- (api/catalog/README.md). Both tables are upserts: a row restating a day carries a
-- higher version and replaces the earlier one. Merges collapse old versions eventually;
-- reads never rely on that and pick the latest with argMax(column, version) grouped by
-- the key, so a day is never summed.
--
-- plan_actuals: one row per plan, line item and day, written by POST /imports/actuals.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.plan_actuals
(
    workspace_id  UUID,
    plan_id       UUID,
    line_id       UUID,
    date          Date,
    impressions   UInt64,
    clicks        UInt64,
    spend         Decimal(18, 4),
    currency      String,
    conversions   UInt64,
    source        String,
    updated_at    DateTime('UTC'),
    version       UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, plan_id, line_id, date)
;

-- campaign_actuals: one row per campaign and day, written by inbound webhooks
-- (actuals.reported, campaign.actuals) through catalog.UpsertCampaignActuals.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.campaign_actuals
(
    workspace_id  UUID,
    campaign_id   UUID,
    date          Date,
    impressions   UInt64,
    clicks        UInt64,
    spend         Decimal(18, 4),
    currency      String,
    conversions   UInt64,
    source        String,
    updated_at    DateTime('UTC'),
    version       UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, campaign_id, date)
;
