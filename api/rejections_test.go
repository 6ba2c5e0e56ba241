package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/api"
	"svc/ingest"
	"svc/lib/apikey"
	"svc/lib/kafkabroker"
	"svc/lib/paging"
	"svc/lib/process"
	"svc/lib/svctest"
	"svc/rollup"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/chtest"
	"svc/schema/rejection"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// pipeline is the whole path of a rejection: the edge producing to an embedded broker,
// the consumer (svc rollup's, with the rejections' member) writing the private
// ClickHouse database, and the read API, on one server over the real Redis.
type pipeline struct {
	*env
	seeds []string
}

func newPipeline(t *testing.T, samples int) *pipeline { return newPipelineOf(t, samples, false) }

// newPipelineOf is newPipeline; withRedis gives the consumer Redis (batch and event-id
// claims, the published watermark) and the read API the database's name (watermarks),
// and removes the claims and the watermark at cleanup.
func newPipelineOf(t *testing.T, samples int, withRedis bool) *pipeline {
	t.Helper()
	ch, conn := chtest.NewDB(t)
	bc := kafkabroker.Config{EmbeddedAddr: "127.0.0.1:0", DataDir: t.TempDir(), Partitions: 2}
	k, err := kafkabroker.StartEmbedded(bc, schema.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	icfg := ingest.Config{DeliveryTimeout: 5 * time.Second, MaxBufferedRecords: 1000, Linger: time.Millisecond}
	producer, err := ingest.NewProducer(bc, k.Addrs(), icfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	rdb := apitest.Redis(t)
	edge := ingest.NewEdge(icfg, producer, workspace.NewStore(rdb), prometheus.NewRegistry())
	a := &api.API{Conn: conn}
	s := apitest.Start(t, append(edge.Routes(), a.Routes()...), nil)
	a.Keys = s.Keys
	cfg := rollup.Config{Group: "rej-" + hex.EncodeToString(randBytes(4)), BatchRows: 1000, BatchInterval: 50 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 300 * time.Millisecond, InsertTimeout: 5 * time.Second, RevokeTimeout: 3 * time.Second,
		SessionTimeout: 3 * time.Second, RebalanceTimeout: 10 * time.Second, Table: "events", Topic: schema.TopicEvents,
		DeadTopic: schema.TopicDeadEvent, Kafka: kafkabroker.Config{Brokers: k.Addrs(), EmbeddedAddr: "127.0.0.1:0", Partitions: 2}, ClickHouse: ch,
		Registerer: prometheus.NewRegistry(), RejectionSamples: samples}
	if withRedis {
		cfg.Redis, a.Database = rdb, ch.Database
		t.Cleanup(func() {
			ctx := context.Background()
			_, _ = rollup.DropEventClaims(ctx, rdb, ch.Database)
			rdb.Del(ctx, rollups.WatermarkKey(ch.Database))
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rollup.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rollup: %v", err)
		}
	})
	return &pipeline{env: &env{Server: s, API: a, Conn: conn}, seeds: k.Addrs()}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func ev(name, extra string) string {
	ts := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	return fmt.Sprintf(`{"event_name":%q,"occurred_at":%q,"consent":{"measurement":true}%s}`, name, ts, extra)
}

func batch(pixel string, events ...string) string {
	return `{"pixel_id":"` + pixel + `","events":[` + strings.Join(events, ",") + `]}`
}

// rejectionsPage is a decoded GET /rejections answer.
type rejectionsPage struct {
	Data []map[string]any `json:"data"`
	Meta struct {
		NextCursor *string `json:"next_cursor"`
		Rejections uint64  `json:"rejections"`
		NotStored  uint64  `json:"not_stored"`
	} `json:"meta"`
}

// waitRejections polls GET /rejections?query until it counts want rejections.
func (p *pipeline) waitRejections(t *testing.T, secret, query string, want uint64) rejectionsPage {
	t.Helper()
	var pg rejectionsPage
	svctest.WaitFor(t, 20*time.Second, fmt.Sprintf("GET /rejections?%s counting %d", query, want), func() bool {
		pg = rejectionsPage{}
		r := p.get(t, secret, "/rejections?"+query, &pg)
		if r.Status != 200 {
			t.Fatalf("GET /rejections?%s: %d %s", query, r.Status, r.Body)
		}
		// The count and the page are two reads: wait until both have caught up.
		return pg.Meta.Rejections >= want && uint64(len(pg.Data))+pg.Meta.NotStored >= want
	})
	if pg.Meta.Rejections != want {
		t.Fatalf("GET /rejections?%s counts %d, want %d", query, pg.Meta.Rejections, want)
	}
	return pg
}

// A rejected event is traced from its 202 (request_id) to GET /rejections with its
// field, rule and value; an email in a rejected event, or in a rejected value, appears
// nowhere at rest: not in ClickHouse, not in Redis, not in Kafka, nor its digest.
func TestRejectedEventTracedFrom202AndEmailNowhereAtRest(t *testing.T) {
	p := newPipeline(t, 100)
	tn := p.tenant(t, false)
	email := "trace." + hex.EncodeToString(randBytes(6)) + "@example.com"
	digest := sha256.Sum256([]byte(email))
	body := batch(tn.PixelID(),
		ev("purchase", ``),
		ev("purchase", `,"value":10,"currency":"EURO","identity":{"email":"`+email+`"}`),
		ev("lead", `,"identity":{"email":"`+strings.ToUpper(email)+`"}`),
		ev("lead", `,"value":1,"currency":"`+email+`"`))
	r := p.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "trace-"+email)
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	ans := r.JSON(t)
	reqID := ans["request_id"].(string)
	if ans["accepted"] != 1.0 || ans["rejected"] != 3.0 {
		t.Fatalf("202 %s", r.Body)
	}
	q := "pixel_id=" + tn.PixelID()
	pg := p.waitRejections(t, tn.Secret, q, 3)
	if pg.Meta.NotStored != 0 || len(pg.Data) != 3 || pg.Meta.NextCursor != nil {
		t.Fatalf("page %+v", pg)
	}
	got := map[float64]map[string]any{}
	for _, d := range pg.Data {
		if d["request_id"] != reqID || d["status"] != 202.0 || d["pixel_id"] != tn.PixelID() || d["batch_events"] != 4.0 ||
			d["key_id"] != "key_"+tn.Key.ID.String() {
			t.Fatalf("record %v: want request %s, status 202, the pixel, the key, 4 events", d, reqID)
		}
		got[d["event_index"].(float64)] = d
	}
	for idx, want := range map[float64][3]any{1: {"currency", "iso4217", "EURO"}, 2: {"identity.email", "normalised", "(withheld)"},
		3: {"currency", "iso4217", "(withheld)"}} {
		d := got[idx]
		if d == nil || d["field"] != want[0] || d["rule"] != want[1] || d["value"] != want[2] {
			t.Fatalf("event %v: %v, want %v", idx, d, want)
		}
	}
	if pg := p.waitRejections(t, tn.Secret, q+"&rule=iso4217", 2); len(pg.Data) != 2 {
		t.Fatalf("rule filter: %+v", pg)
	}
	// since is rounded down to its minute: the last second of the records' minute still
	// lists them (when they were not received in that very second, which lists them anyway).
	recv, err := time.Parse(time.RFC3339, pg.Data[0]["received_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	late := url.QueryEscape(recv.Truncate(time.Minute).Add(59 * time.Second).Format(time.RFC3339))
	if pg := p.waitRejections(t, tn.Secret, q+"&since="+late, 3); len(pg.Data) != 3 {
		t.Fatalf("since %s, within the records' minute: %+v", late, pg)
	}
	future := url.QueryEscape(time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339))
	if pg := p.waitRejections(t, tn.Secret, q+"&since="+future, 0); len(pg.Data) != 0 {
		t.Fatalf("since in the future: %+v", pg)
	}
	// Another workspace's key sees none of it.
	other := p.tenant(t, false)
	if r := p.Do(t, "GET", "/rejections?"+q, other.Secret, ""); r.Status != 404 {
		t.Fatalf("another workspace's key: %d %s", r.Status, r.Body)
	}

	// Nowhere at rest: ClickHouse (every table's string columns), Redis, Kafka.
	assertNowhereInClickHouse(t, p.Conn, email, digest)
	assertNowhereInRedis(t, p.Redis, email, digest)
	assertNowhereInKafka(t, p.seeds, email, digest)
}

func assertNowhereInClickHouse(t *testing.T, conn driver.Conn, email string, digest [32]byte) {
	t.Helper()
	ctx := context.Background()
	var rows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM rejections").Scan(&rows); err != nil || rows == 0 {
		t.Fatalf("rejections table: %d rows, %v", rows, err)
	}
	for _, table := range []string{"rejections", "events"} {
		cols, err := conn.Query(ctx, "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = ? AND type IN ('String', 'FixedString(32)')", table)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for cols.Next() {
			var n string
			if err := cols.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, "toString("+n+")")
		}
		cols.Close()
		all := "concat(" + strings.Join(append(names, "''"), ", ") + ")"
		var n uint64
		err = conn.QueryRow(ctx, "SELECT count() FROM "+table+" WHERE positionCaseInsensitive("+all+", ?) > 0 OR position("+all+", ?) > 0 OR positionCaseInsensitive(lower(hex("+all+")), ?) > 0",
			email, string(digest[:]), hex.EncodeToString(digest[:])).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d rows of %s hold the email or its digest", n, table)
		}
	}
}

func assertNowhereInRedis(t *testing.T, rdb redis.UniversalClient, email string, digest [32]byte) {
	t.Helper()
	// The digest raw or in hex of either case, the address in any case (only a value
	// with an '@' can hold it: the rest is not lower-cased, which keeps a scan of a
	// Redis holding gigabytes quick).
	lowerMail, hexLower := strings.ToLower(email), hex.EncodeToString(digest[:])
	hexUpper := strings.ToUpper(hexLower)
	check := func(key string, vals ...string) error {
		for _, v := range append(vals, key) {
			if strings.Contains(v, string(digest[:])) || strings.Contains(v, hexLower) || strings.Contains(v, hexUpper) ||
				strings.IndexByte(v, '@') >= 0 && strings.Contains(strings.ToLower(v), lowerMail) {
				return fmt.Errorf("Redis key %q holds the email or its digest", key)
			}
		}
		return nil
	}
	// Every master of a cluster: a keyless SCAN reaches one node only. Each page of keys
	// is typed, then read, in two pipelines.
	err := process.EachMaster(context.Background(), rdb, func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, "*", 1000).Result()
			if err != nil {
				return err
			}
			types := make([]*redis.StatusCmd, len(keys))
			// A key gone or changed between the reads is read as what is left of it.
			_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					types[i] = p.Type(ctx, k)
				}
				return nil
			})
			vals := make([]func() []string, len(keys))
			_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, k := range keys {
					vals[i] = readAll(ctx, p, types[i].Val(), k)
				}
				return nil
			})
			for i, k := range keys {
				if err := check(k, vals[i]()...); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readAll queues on p the read of key's whole value by its type, and returns what reads
// it once p has run (every string of it: members, fields and values, elements).
func readAll(ctx context.Context, p redis.Pipeliner, typ, key string) func() []string {
	switch typ {
	case "string":
		c := p.Get(ctx, key)
		return func() []string { return []string{c.Val()} }
	case "hash":
		c := p.HGetAll(ctx, key)
		return func() []string {
			var out []string
			for f, v := range c.Val() {
				out = append(out, f, v)
			}
			return out
		}
	case "set":
		c := p.SMembers(ctx, key)
		return c.Val
	case "zset":
		c := p.ZRange(ctx, key, 0, -1)
		return c.Val
	case "list":
		c := p.LRange(ctx, key, 0, -1)
		return c.Val
	}
	return func() []string { return nil }
}

func assertNowhereInKafka(t *testing.T, seeds []string, email string, digest [32]byte) {
	t.Helper()
	for _, topic := range []string{schema.TopicEvents, schema.TopicRejections, schema.TopicDeadEvent} {
		for _, r := range topicRecords(t, seeds, topic) {
			for _, b := range [][]byte{r.Value, r.Key} {
				if bytes.Contains(bytes.ToLower(b), []byte(email)) || bytes.Contains(b, digest[:]) {
					t.Fatalf("a record of %s holds the email or its digest", topic)
				}
			}
		}
	}
}

// topicRecords reads every record of topic.
func topicRecords(t *testing.T, seeds []string, topic string) []*kgo.Record {
	return svctest.TopicRecords(t, seeds, topic)
}

// Batches refused as a whole with their pixel known are recorded (422, 429, 409, the
// 422 of a too long Idempotency-Key);
// another workspace's pixel, and a dry run, are not.
func TestRefusedBatchesAreRecorded(t *testing.T) {
	p := newPipeline(t, 100)
	tn := p.tenant(t, false)
	_, tight := p.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 1})
	good := batch(tn.PixelID(), ev("purchase", ``))
	none := batch(tn.PixelID(), ev("lead", `,"value":1`), `{"event_name":"x"}`)
	apitest.Problem(t, p.Do(t, "POST", "/events", tn.Secret, none), 422, "invalid_request")
	if r := p.Do(t, "POST", "/events", tight, good); r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	limited := apitest.Problem(t, p.Do(t, "POST", "/events", tight, good), 429, "rate_limited")
	if r := p.Do(t, "POST", "/events", tn.Secret, good, "Idempotency-Key", "k1"); r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	reuse := apitest.Problem(t, p.Do(t, "POST", "/events", tn.Secret, none, "Idempotency-Key", "k1"), 409, "idempotency_key_reuse")
	longKey := apitest.Problem(t, p.Do(t, "POST", "/events", tn.Secret, good, "Idempotency-Key", strings.Repeat("k", 256)), 422, "invalid_request")
	other := p.tenant(t, false)
	apitest.Problem(t, p.Do(t, "POST", "/events", other.Secret, none), 404, "not_found")
	if r := p.Do(t, "POST", "/events?validate_only=true", tn.Secret, batch(tn.PixelID(), ev("a", ``), `{"event_name":"x"}`)); r.Status != 200 {
		t.Fatalf("dry run: %d %s", r.Status, r.Body)
	}
	pg := p.waitRejections(t, tn.Secret, "pixel_id="+tn.PixelID(), 5)
	byStatus := map[float64][]map[string]any{}
	for _, d := range pg.Data {
		if d["request_id"] == longKey["request_id"] {
			// The too long Idempotency-Key: its errors[] entry, about the batch.
			if d["status"] != 422.0 || d["event_index"] != nil || d["field"] != "Idempotency-Key" || d["rule"] != "max_length" {
				t.Fatalf("the too long Idempotency-Key recorded as %v", d)
			}
			continue
		}
		byStatus[d["status"].(float64)] = append(byStatus[d["status"].(float64)], d)
	}
	if len(byStatus[422]) != 2 || len(byStatus[429]) != 1 || len(byStatus[409]) != 1 || len(pg.Data) != 5 {
		t.Fatalf("recorded %v", pg.Data)
	}
	if d := byStatus[429][0]; d["request_id"] != limited["request_id"] || d["event_index"] != nil || d["rule"] != "rate_limited" || d["batch_events"] != 0.0 {
		t.Fatalf("429 recorded as %v (answer %v)", d, limited)
	}
	if d := byStatus[409][0]; d["request_id"] != reuse["request_id"] || d["rule"] != "idempotency_key_reuse" {
		t.Fatalf("409 recorded as %v", d)
	}
	for _, d := range byStatus[422] {
		if d["event_index"] == nil || d["batch_events"] != 2.0 {
			t.Fatalf("422 recorded as %v", d)
		}
	}
	if pg := p.waitRejections(t, other.Secret, "pixel_id="+other.PixelID(), 0); len(pg.Data) != 0 {
		t.Fatalf("the other workspace's pixel: %v", pg.Data)
	}
	// Paging: one record a page, newest first, each once.
	seen := map[string]bool{}
	for _, d := range p.walk(t, tn.Secret, "/rejections?pixel_id="+tn.PixelID(), 1) {
		k := fmt.Sprint(d["request_id"], d["event_index"], d["field"])
		if seen[k] {
			t.Fatalf("record %s twice", k)
		}
		seen[k] = true
	}
	if len(seen) != 5 {
		t.Fatalf("walked %d records, want 5", len(seen))
	}
}

// Past the per-pixel-per-minute cap rejections are counted, not stored, and the counts
// stay exact: meta.rejections counts all of them, meta.not_stored those not listed.
func TestRejectionSamplesCappedCountsExact(t *testing.T) {
	p := newPipeline(t, 3)
	tn := p.tenant(t, false)
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(61-s) * time.Second) // all in one minute
	}
	var requests []string
	for i := 0; i < 4; i++ {
		r := p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(), ev("a", ``), `{"event_name":"x"}`, ev("b", `,"value":1`)))
		if r.Status != 202 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		requests = append(requests, r.JSON(t)["request_id"].(string))
	}
	// A batch refused whole in the same minute, past the cap: only counted.
	refused := apitest.Problem(t, p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(), `{"event_name":"x"}`)), 422, "invalid_request")
	pg := p.waitRejections(t, tn.Secret, "pixel_id="+tn.PixelID(), 9)
	if len(pg.Data) != 3 || pg.Meta.NotStored != 6 {
		t.Fatalf("%d stored, %d not stored: want 3 and 6", len(pg.Data), pg.Meta.NotStored)
	}
	if pg := p.waitRejections(t, tn.Secret, "pixel_id="+tn.PixelID()+"&rule=required_with_value", 4); len(pg.Data)+int(pg.Meta.NotStored) != 4 {
		t.Fatalf("rule filter: %d stored + %d not stored, want 4", len(pg.Data), pg.Meta.NotStored)
	}
	// Each request's life counts all of its rejections, stored as samples or only
	// counted past the cap, as its 202 did.
	for _, id := range requests {
		var got map[string]any
		svctest.WaitFor(t, 20*time.Second, "GET /batches/"+id+" stored", func() bool {
			got = nil
			return p.get(t, tn.Secret, "/batches/"+id, &got).Status == 200 && got["accepted"] == 1.0
		})
		if got["rejected"] != 2.0 || got["events"] != 3.0 || fmt.Sprint(got["rejected_by_rule"]) != "map[required:1 required_with_value:1]" {
			t.Errorf("GET /batches/%s: %v, want 3 events, 1 accepted, 2 rejected (required, required_with_value)", id, got)
		}
	}
	// The refused batch is not kept by its id: its 404 says why that can be.
	pr := apitest.Problem(t, p.Do(t, "GET", "/batches/"+refused["request_id"].(string), tn.Secret, ""), 404, "not_found")
	if d, _ := pr["detail"].(string); !strings.Contains(d, "past the cap of stored rejections") || !strings.Contains(d, "meta.not_stored") {
		t.Fatalf("404 detail %q: want the cap named", d)
	}
}

// Bad parameters are problem documents, never a 5xx.
func TestRejectionsBadInput(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	q := "/rejections?pixel_id=" + tn.PixelID()
	for path, field := range map[string]string{"/rejections": "pixel_id", "/rejections?pixel_id=pln_x": "pixel_id",
		q + "&since=yesterday": "since", q + "&rule=" + strings.Repeat("r", 65): "rule", q + "&cursor=abc": "cursor",
		q + "&limit=0": "limit",
		// Outside ClickHouse's DateTime, where the instant would wrap to another one.
		q + "&since=" + url.QueryEscape("1970-01-01T00:00:00+01:00"): "since", q + "&since=2110-01-01T00:00:00Z": "since",
		// Hand-made cursors whose values a DateTime or an Int16 would wrap.
		q + "&cursor=" + forged(paging.Cursor{List: "rejections", T: 1 << 33, Pos: ptr(0)}):     "cursor",
		q + "&cursor=" + forged(paging.Cursor{List: "rejections", T: 1, Pos: ptr(1 << 20)}):     "cursor",
		"/erasures?cursor=" + forged(paging.Cursor{List: "erasures", T: -3600, ID: uuid.New()}): "cursor"} {
		pr := apitest.Problem(t, e.Do(t, "GET", path, tn.Secret, ""), 422, "invalid_request")
		if errs, _ := pr["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != field {
			t.Fatalf("%s: %v, want an error on %s", path, pr, field)
		}
	}
	_, noScope := e.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"events:write"}})
	apitest.Problem(t, e.Do(t, "GET", q, noScope, ""), 403, "insufficient_scope")
}

// Paging GET /rejections one row at a time returns every stored rejection, rejections
// equal in time, request, event index and field included (the edge's record of an
// event_id too long and the consumer's record of the same event as a copy, or a member
// repeated): the cursor tells them apart by rule and Kafka record.
func TestRejectionsPagingKeepsTies(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	at := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	ctx := context.Background()
	b, err := e.Conn.PrepareBatch(ctx, "INSERT INTO "+rejection.Table+" (workspace_id, sandbox, pixel_id, minute, received_at, key_id, "+
		"request_id, status, batch_events, event_index, field, rule, value, sample, rejections, inserted_at, kafka_topic, kafka_partition, kafka_offset)")
	if err != nil {
		t.Fatal(err)
	}
	rules := []string{"max_length", "duplicate_event_id", "duplicate_event_id", "duplicate_member"}
	for i, rule := range rules {
		if err := b.Append(tn.Workspace.ID, uint8(0), tn.Pixel.ID, at.Truncate(time.Minute), at, tn.Key.ID, "req_ties", uint16(202),
			uint16(2), int16(0), "event_id", rule, "", uint8(1), uint32(1), time.Now().UTC(), "rejections.v1", int32(0), int64(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	var got []string
	path := "/rejections?limit=1&pixel_id=" + tn.PixelID()
	for range 10 {
		var pg rejectionsPage
		if r := e.get(t, tn.Secret, path, &pg); r.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		for _, d := range pg.Data {
			got = append(got, d["rule"].(string))
		}
		if pg.Meta.NextCursor == nil {
			break
		}
		path = "/rejections?limit=1&pixel_id=" + tn.PixelID() + "&cursor=" + *pg.Meta.NextCursor
	}
	if len(got) != len(rules) {
		t.Fatalf("paged one at a time: %v, want the %d rejections", got, len(rules))
	}
}

// A batch refused whole for a repeated envelope member ("events" twice, each not an
// array) is kept as rows that page one at a time like any others: every row counted in
// meta.rejections is listed. (One record's rows are stored by one INSERT: once one is
// counted, all are.)
func TestRepeatedEnvelopeMemberPagesWhole(t *testing.T) {
	p := newPipeline(t, 100)
	for _, members := range []string{`"events":1,"events":2`, `"events":[],"events":[]`} {
		tn := p.tenant(t, false)
		apitest.Problem(t, p.Do(t, "POST", "/events", tn.Secret, `{"pixel_id":"`+tn.PixelID()+`",`+members+`}`), 422, "invalid_request")
		var counted uint64
		svctest.WaitFor(t, 20*time.Second, "the refusal recorded", func() bool {
			var pg rejectionsPage
			p.get(t, tn.Secret, "/rejections?pixel_id="+tn.PixelID(), &pg)
			counted = pg.Meta.Rejections
			return counted > 0
		})
		var listed uint64
		path := "/rejections?limit=1&pixel_id=" + tn.PixelID()
		for range 10 {
			var pg rejectionsPage
			if r := p.get(t, tn.Secret, path, &pg); r.Status != 200 {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
			}
			listed += uint64(len(pg.Data))
			if pg.Meta.NextCursor == nil {
				break
			}
			path = "/rejections?limit=1&pixel_id=" + tn.PixelID() + "&cursor=" + *pg.Meta.NextCursor
		}
		if listed != counted {
			t.Fatalf("%s: paged one at a time, %d rows listed of %d counted", members, listed, counted)
		}
	}
}

// forged is a cursor token made by hand (cursors are not signed), query-escaped.
func forged(c paging.Cursor) string { return url.QueryEscape(*c.Encode()) }

func ptr[T any](v T) *T { return &v }
