package schema_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"svc/schema/chtest"
)

// TestREADMEQueries runs every ```sql example of README.md against a migrated database
// with a few rows in it, so the documented queries cannot rot.
func TestREADMEQueries(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 5 {
		t.Fatalf("found %d sql examples", len(blocks))
	}
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	seed := `INSERT INTO events (workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at, event_date,
		value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at,
		kafka_topic, kafka_partition, kafka_offset, batch_index)
		SELECT toUUID('11111111-1111-1111-1111-111111111111'), toUUID('00000000-0000-0000-0000-000000000000'), 0,
		       toUUID('22222222-2222-2222-2222-222222222222'), generateUUIDv4(), 'purchase', now(), today(),
		       toDecimal64(12.5, 4), 1, 'EUR', 1, 1, toFixedString(unhex('ab'), 32), 'req_1', now(), now(),
		       'events.v1', 0, number, 0
		FROM system.numbers LIMIT 3`
	inbound := `INSERT INTO webhook_inbound (workspace_id, message_id, received_at, message_type, outcome, reason, status)
		SELECT toUUID('11111111-1111-1111-1111-111111111111'), 'msg-1', now(), 'actuals.reported', 'failed', 'invalid signature', 401`
	rejections := `INSERT INTO rejections (workspace_id, sandbox, pixel_id, minute, received_at, key_id, request_id, status,
		batch_events, event_index, field, rule, value, sample, rejections, inserted_at, kafka_topic, kafka_partition, kafka_offset)
		SELECT toUUID('11111111-1111-1111-1111-111111111111'), 0, toUUID('00000000-0000-0000-0000-000000000000'),
		       toStartOfMinute(now()), now(), toUUID('22222222-2222-2222-2222-222222222222'), 'req_2', 202, 4, 1,
		       'currency', 'iso4217', '"EURO"', 1, 1, now(), 'rejections.v1', 0, 0`
	for _, q := range []string{seed, inbound, rejections} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range blocks {
		rows, err := conn.Query(ctx, m[1])
		if err != nil {
			t.Errorf("README query failed: %v\n%s", err, m[1])
			continue
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Errorf("README query: %v\n%s", err, m[1])
		}
		rows.Close()
		if n == 0 {
			t.Errorf("README query returned no rows on the seed data:\n%s", m[1])
		}
	}
}
