-- Catalog: what a media planner works with (api/catalog/README.md describes every field).
-- Each table is a ReplacingMergeTree keyed by workspace and object id, with a version:
-- an import that writes an object again replaces it. Reads take the latest version
-- (FINAL, filtering on anything but the key only after the collapse).
--
-- accounts: the organisation behind a workspace (org_ = the workspace id).
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.accounts
(
    workspace_id    UUID,
    name            String,
    legal_name      String,
    country         String,
    currency        String,
    timezone        String,
    industry        String,
    created_at      DateTime('UTC'),
    updated_at      DateTime('UTC'),
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY workspace_id
;

-- plans: media plans (pln_).
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.plans
(
    workspace_id    UUID,
    plan_id         UUID,
    name            String,
    advertiser      String,
    objective       String,
    status          String,
    start_date      Date,
    end_date        Date,
    budget          Decimal(18, 4),
    currency        String,
    channels        Array(String),
    owner           String,
    created_at      DateTime('UTC'),
    updated_at      DateTime('UTC'),
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, plan_id)
;

-- line_items: the bookable lines of a plan (lin_), one channel and publisher each.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.line_items
(
    workspace_id        UUID,
    plan_id             UUID,
    line_id             UUID,
    name                String,
    channel             String,
    publisher           String,
    buy_type            String,
    unit_cost           Decimal(18, 4),
    start_date          Date,
    end_date            Date,
    budget              Decimal(18, 4),
    currency            String,
    planned_impressions UInt64,
    status              String,
    created_at          DateTime('UTC'),
    updated_at          DateTime('UTC'),
    version             UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, plan_id, line_id)
;

-- campaigns: what runs in market (cmp_), optionally executing a plan.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.campaigns
(
    workspace_id    UUID,
    campaign_id     UUID,
    plan_id         UUID,
    name            String,
    objective       String,
    status          String,
    channels        Array(String),
    start_date      Date,
    end_date        Date,
    budget          Decimal(18, 4),
    currency        String,
    created_at      DateTime('UTC'),
    updated_at      DateTime('UTC'),
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, campaign_id)
;

-- studies: measurement studies (std_): brand lift, conversion lift, geo experiments,
-- marketing-mix models; optionally about one campaign.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.studies
(
    workspace_id    UUID,
    study_id        UUID,
    campaign_id     UUID,
    name            String,
    kind            String,
    status          String,
    period_start    Date,
    period_end      Date,
    methodology     String,
    created_at      DateTime('UTC'),
    updated_at      DateTime('UTC'),
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, study_id)
;

-- findings: the results of a study (fnd_): a metric, its value and confidence.
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.findings
(
    workspace_id    UUID,
    finding_id      UUID,
    study_id        UUID,
    metric          String,
    value           Float64,
    unit            String,
    confidence      Float64,
    ci_lower        Float64,
    ci_upper        Float64,
    summary         String,
    created_at      DateTime('UTC'),
    updated_at      DateTime('UTC'),
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, finding_id)
;
