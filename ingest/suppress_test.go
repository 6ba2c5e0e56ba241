package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/lib/kafkabroker"
	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/erasure"
)

// TestSuppressedIdentityNeverReachesKafka: after an erasure with suppression, an event
// of that person is accepted without its identity (the hash never reaches Kafka), in
// that workspace only; another person's identity and another workspace's are kept.
func TestSuppressedIdentityNeverReachesKafka(t *testing.T) {
	bc := kafkabroker.Config{EmbeddedAddr: svctest.FreeAddr(t), DataDir: t.TempDir(), Partitions: 1}
	k, err := kafkabroker.StartEmbedded(bc, schema.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	rg := &rig{bc: bc, kafka: k, seeds: k.Addrs(), reg: prometheus.NewRegistry()}
	cfg := Config{DeliveryTimeout: time.Second, MaxBufferedRecords: 1000, Linger: time.Millisecond}
	producer, err := NewProducer(bc, rg.seeds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	edge := NewEdge(cfg, producer, nil, rg.reg)
	rg.Server = apitest.Start(t, edge.Routes(), nil)
	edge.keys = rg.Keys
	edge.UseSuppression(rg.Redis, rg.reg)

	a, b := rg.Tenant(t, false), rg.Tenant(t, false)
	gone := sha256.Sum256([]byte("gone@example.com"))
	id := erasure.Identity{Workspace: a.Workspace.ID, Email: gone, RequestedAt: time.Now().Unix(), Suppress: true}
	if err := erasure.NewRegistry(rg.Redis).Register(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rg.Redis.HDel(context.Background(), "svc:privacy:{ids}", a.Workspace.ID.String()+":"+hex.EncodeToString(gone[:]))
	})
	if _, err := edge.suppress.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []struct {
		secret, pixel string
	}{{a.Secret, a.PixelID()}, {b.Secret, b.PixelID()}} {
		body := batchJSON(tn.pixel, eventJSON("purchase", "gone@example.com", true), eventJSON("purchase", "stays@example.com", true))
		if r := rg.Do(t, "POST", "/events", tn.secret, body); r.Status != 202 || r.JSON(t)["accepted"] != 2.0 {
			t.Fatalf("POST /events: %d %s", r.Status, r.Body)
		}
	}
	recs := rg.records(t)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	kept := map[string]int{}
	for _, rec := range recs {
		var bt schema.Batch
		if err := schema.DecodeBatch(rec.Value, &bt); err != nil {
			t.Fatal(err)
		}
		for _, ev := range bt.Events {
			if ev.HasEmail {
				kept[hex.EncodeToString(bt.Workspace[:4])+":"+hex.EncodeToString(ev.EmailSHA[:4])]++
			}
		}
	}
	ws := func(u [16]byte) string { return hex.EncodeToString(u[:4]) }
	stays := sha256.Sum256([]byte("stays@example.com"))
	want := map[string]int{
		ws(a.Workspace.ID) + ":" + hex.EncodeToString(stays[:4]): 1,
		ws(b.Workspace.ID) + ":" + hex.EncodeToString(stays[:4]): 1,
		ws(b.Workspace.ID) + ":" + hex.EncodeToString(gone[:4]):  1,
	}
	if len(kept) != len(want) {
		t.Fatalf("identities kept: %v, want %v", kept, want)
	}
	for k, n := range want {
		if kept[k] != n {
			t.Fatalf("identities kept: %v, want %v", kept, want)
		}
	}
	if n := rg.counter(t, "svc_ingest_suppressed_identities_total", nil); n != 1 {
		t.Fatalf("suppressed counter %v, want 1", n)
	}
}
