package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"svc/api/client"
)

// Batch, Pixel and Pixels read GET /batches/{request_id}, /pixels/{id} and /pixels. The
// rig has no consumer: the test stores the batch's rows as the consumer would (the
// whole pipeline is api/batches_test.go's and api/pixels_test.go's).
func TestBatchAndPixelHealth(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	c := rg.client(tn.Secret, &recorder{})
	ctx := context.Background()
	res, err := c.SendEvents(ctx, client.Batch{PixelID: "pxl_" + tn.Pixel.ID.String(), Events: []client.Event{
		{EventName: "lead", OccurredAt: time.Now().Add(-time.Minute), Consent: client.Consent{Measurement: true}},
		{EventName: "lead", OccurredAt: time.Now().Add(-time.Minute), Consent: client.Consent{Measurement: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	var p *client.Problem
	if _, err := c.Batch(ctx, res.RequestID); !errors.As(err, &p) || p.Code != "not_found" {
		t.Fatalf("a batch not stored yet: %v", err)
	}
	if err := rg.conn.Exec(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at, event_date,
		value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at,
		kafka_topic, kafka_partition, kafka_offset, batch_index)
		SELECT toUUID(?), toUUID(?), 0, toUUID(?), generateUUIDv4(), 'lead', now() - 60, toDate(now() - 60), toDecimal64(0, 4), 0, '', 1, 0,
		       toFixedString('', 32), ?, now(), now(), 'events.v1', 0, 42, toUInt8(number) FROM system.numbers LIMIT 2`,
		tn.Workspace.ID.String(), tn.Pixel.ID.String(), tn.Key.ID.String(), res.RequestID); err != nil {
		t.Fatal(err)
	}
	b, err := c.Batch(ctx, res.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Accepted != 2 || b.Events == nil || *b.Events != 2 || b.KafkaOffset == nil || *b.KafkaOffset != 42 || b.StoredCopies != 1 ||
		b.StoredAt == nil || len(b.Days) != 1 || b.Days[0].Events != 2 || b.PixelID != "pxl_"+tn.Pixel.ID.String() {
		t.Fatalf("batch %+v", b)
	}
	h, err := c.Pixel(ctx, "pxl_"+tn.Pixel.ID.String(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != tn.Pixel.Name || len(h.Days) != 3 || h.Days[2].Accepted+h.Days[1].Accepted != 2 || h.LastAcceptedAt == nil {
		t.Fatalf("pixel %+v", h)
	}
	all, err := c.Pixels(1, 1).All(ctx)
	if err != nil || len(all) != 1 || all[0].ID != h.ID || len(all[0].Days) != 1 {
		t.Fatalf("pixels %+v, %v", all, err)
	}
}
