-- Privacy (privacy/README.md). erasures: one row per state of an erasure request
-- (POST /erasures): the identity's SHA-256 (never the address), what it covered and
-- the proof of what was done. A ReplacingMergeTree: every state is written as a new
-- row whose version orders the stages first (pending < planned < erased < recomputed <
-- completed) and the write time second, so a late or repeated write of an earlier
-- stage never hides a later one. Reads take the latest version (FINAL).
-- cluster: shard_by=cityHash64(workspace_id)
CREATE TABLE IF NOT EXISTS {db}.erasures
(
    workspace_id      UUID,
    erasure_id        UUID,
    sandbox           UInt8,
    email_sha256      FixedString(32),
    suppress          UInt8,
    status            String,
    stage             String,
    requested_at      DateTime('UTC'),
    started_at        DateTime('UTC'),
    completed_at      DateTime('UTC'),
    events_affected   UInt64,
    events_remaining  UInt64,
    days_pixel        Array(UUID),
    days_date         Array(Date),
    key_id            UUID,
    request_id        String,
    last_error        String,
    updated_at        DateTime('UTC'),
    version           UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (workspace_id, erasure_id)
;
