package client_test

import (
	"context"
	"testing"
	"time"

	"svc/api/client"
)

// ValidateEvents is a dry run: the 202's answer on a 200, and nothing counted, so the
// same batch sent for real afterwards is accepted under its own key, not replayed.
func TestValidateEventsIsADryRun(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	rc := &recorder{}
	c := rg.client(tn.Secret, rc)
	batch := client.Batch{PixelID: tn.PixelID(), IdempotencyKey: "deploy-check-1", Events: []client.Event{
		{EventName: "purchase", OccurredAt: time.Now().UTC(), Value: 49.9, Currency: "EUR", Consent: client.Consent{Measurement: true}},
		{EventName: "purchase", OccurredAt: time.Now().UTC(), Value: 10, Currency: "EURO", Consent: client.Consent{Measurement: true}},
	}}
	res, err := c.ValidateEvents(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Rejected != 1 || res.Rejections[0].Rule != "iso4217" || res.RequestID == "" {
		t.Fatalf("dry run %+v", res)
	}
	real, err := c.SendEvents(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if real.Replayed || real.Accepted != 1 || real.RequestID == res.RequestID {
		t.Fatalf("the real batch after the dry run: %+v", real)
	}
	log := rc.log()
	if len(log) != 2 || log[0].status != 200 || log[1].status != 202 || log[0].idemKey != "deploy-check-1" {
		t.Fatalf("attempts %+v", log)
	}
}
