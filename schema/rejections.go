package schema

// TopicRejections carries one record per request whose events, or whole batch, the
// edge rejected (schema/rejection: the record format, the ClickHouse table, the reads).
// Records are keyed by the pixel's UUID, like events.v1, so a pixel's rejections stay in
// order on one partition and one consumer at a time counts them.
const TopicRejections = "rejections.v1"
