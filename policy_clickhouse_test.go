package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Every INSERT of the service is synchronous, never deduplicated and placed by the
// target's sharding key on every server version because every connection is a pool of
// lib/chpool, whose queries carry those settings where the server knows them (DESIGN.md,
// "Exactly once: the argument"). A query's own settings are sent after the pool's and
// win, so no code outside lib/chpool opens its own connection, names one of those
// settings, or asks clickhouse-go for an asynchronous insert.
func TestClickHouseSettingsOnlyFromThePool(t *testing.T) {
	forbidden := regexp.MustCompile(`clickhouse\.Open\(|\bWithAsync\(|\bWithStdAsync\(|\.AsyncInsert\(|` +
		`\b(async_insert|wait_for_async_insert|insert_deduplicate|deduplicate_insert|deduplicate_insert_select|` +
		`deduplicate_blocks_in_dependent_materialized_views|parallel_distributed_insert_select|` +
		`insert_distributed_sync|distributed_foreground_insert|insert_deduplication_token)\b`)
	for _, path := range sourceFiles(t, false) {
		if filepath.Dir(path) == filepath.Join("lib", "chpool") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if m := forbidden.Find(b); m != nil {
			t.Errorf("%s: %q: ClickHouse connections and insert settings belong to lib/chpool", path, m)
		}
	}
}
