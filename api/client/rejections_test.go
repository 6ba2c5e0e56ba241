package client_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"svc/api"
	"svc/api/client"
	"svc/lib/ids"
	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/rejection"
)

// newReadRig is the read API alone (no ingest edge, no broker) over a private ClickHouse
// database, on one httpserver.Server over the real Redis, with the completeness
// watermark of that database (api.API.Database); with showroom, the showroom seeded. Its
// tests write the rows they read straight into ClickHouse.
func newReadRig(t *testing.T, showroom bool) *rig {
	t.Helper()
	ch, conn := chtest.NewDB(t)
	a := &api.API{Conn: conn, Database: ch.Database}
	s := apitest.Start(t, a.Routes(), nil)
	a.Keys = s.Keys
	if showroom {
		if _, err := catalog.SeedShowroom(context.Background(), s.Keys, conn); err != nil {
			t.Fatal(err)
		}
	}
	return &rig{Server: s, ch: ch, conn: conn}
}

// go-client.md: "c.Rejections(pixelID, client.RejectionQuery{Since: t, Rule: "iso4217"})
// walks GET /rejections newest first; after a page, the iterator's Meta() holds
// rejections and not_stored, the exact counts of the filter." (rejections.md: "The Go
// client walks it with c.Rejections(…) (the iterator's Meta() holds the counts)"; since is
// "rounded down to its minute".) Walked one record a page (Limit 1), every walk is
// checked for its order, its filter and the counts in Meta after each page.
func TestClientRejectionsWalkNewestFirstWithCountsInMeta(t *testing.T) {
	rg := newReadRig(t, false)
	tn := rg.Tenant(t, false)
	other := rg.Pixel(t, tn.Workspace.ID)
	ctx := context.Background()
	m0 := time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	row := func(at time.Duration, req string, status uint16, index int16, field, rule, value string) rejection.Row {
		return rejection.Row{Workspace: tn.Workspace.ID, Pixel: tn.Pixel.ID, Key: tn.Key.ID, ReceivedAt: m0.Add(at), RequestID: req,
			Status: status, BatchEvents: 3, Index: index, Field: field, Rule: rule, Value: value, Sample: true, Rejections: 1}
	}
	rows := []rejection.Row{
		row(10*time.Second, "req_a", 202, 0, "currency", "iso4217", `"EURO"`),
		row(time.Minute+5*time.Second, "req_b", 202, 2, "event_name", "required", ""),
		row(2*time.Minute+30*time.Second, "req_c", 202, 1, "currency", "iso4217", `"EUROS"`),
		row(3*time.Minute, "req_d", 429, rejection.Batch, "", "rate_limited", ""),
		// Seven iso4217 rejections of minute 2 past the cap of stored ones: counted only.
		{Workspace: tn.Workspace.ID, Pixel: tn.Pixel.ID, ReceivedAt: m0.Add(2 * time.Minute), Status: 422, Field: "currency",
			Rule: "iso4217", Rejections: 7},
	}
	rows[3].BatchEvents = 0
	// Another pixel's rejection, newer than all: never in this pixel's walk or counts.
	rows = append(rows, rejection.Row{Workspace: tn.Workspace.ID, Pixel: other.ID, Key: tn.Key.ID, ReceivedAt: m0.Add(4 * time.Minute),
		RequestID: "req_other", Status: 202, BatchEvents: 1, Field: "currency", Rule: "iso4217", Value: `"X"`, Sample: true, Rejections: 1})
	for i := range rows {
		rows[i].Partition, rows[i].Offset = 0, int64(i)
	}
	if err := rejection.Insert(ctx, rg.conn, "rejections.v1@test", time.Now(), rows); err != nil {
		t.Fatal(err)
	}
	rc := &recorder{}
	c := rg.client(tn.Secret, rc)

	walk := func(q client.RejectionQuery, wantReqs []string, wantRejections, wantNotStored float64) []client.RejectionRecord {
		t.Helper()
		before := len(rc.log())
		it := c.Rejections(tn.PixelID(), q)
		if it.Meta() != nil {
			t.Fatalf("%+v: Meta() %v before the first page, want nil", q, it.Meta())
		}
		var got []client.RejectionRecord
		var reqs []string
		for it.Next(ctx) {
			got = append(got, it.Item())
			reqs = append(reqs, it.Item().RequestID)
			m := it.Meta()
			if m["rejections"] != wantRejections || m["not_stored"] != wantNotStored {
				t.Errorf("%+v: after page %d, Meta() %v, want rejections %v, not_stored %v", q, len(got), m, wantRejections, wantNotStored)
			}
		}
		if err := it.Err(); err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if !reflect.DeepEqual(reqs, wantReqs) {
			t.Fatalf("%+v: walked %v, want %v (newest first)", q, reqs, wantReqs)
		}
		// One record a page: one GET /rejections per record (an empty walk reads one page).
		if n := len(rc.log()) - before; n != max(1, len(wantReqs)) {
			t.Errorf("%+v: %d requests for %d records with Limit 1", q, n, len(wantReqs))
		}
		if m := it.Meta(); m["rejections"] != wantRejections || m["not_stored"] != wantNotStored {
			t.Errorf("%+v: Meta() at the end %v, want rejections %v, not_stored %v", q, m, wantRejections, wantNotStored)
		}
		return got
	}

	all := walk(client.RejectionQuery{Limit: 1}, []string{"req_d", "req_c", "req_b", "req_a"}, 11, 7)
	d, cc := all[0], all[1]
	if d.EventIndex != nil || d.Status != 429 || d.BatchEvents != 0 || d.Rule != "rate_limited" || !d.ReceivedAt.Equal(m0.Add(3*time.Minute)) ||
		d.PixelID != tn.PixelID() || d.KeyID != ids.Format(ids.Key, tn.Key.ID) {
		t.Errorf("the batch refused whole: %+v", d)
	}
	if cc.EventIndex == nil || *cc.EventIndex != 1 || cc.Status != 202 || cc.BatchEvents != 3 || cc.Field != "currency" ||
		string(cc.Value) != `"EUROS"` || !cc.ReceivedAt.Equal(m0.Add(2*time.Minute+30*time.Second)) {
		t.Errorf("the rejected event: %+v", cc)
	}
	// Since 1:30 is rounded down to 1:00: req_b, received at 1:05, is in.
	walk(client.RejectionQuery{Since: m0.Add(time.Minute + 30*time.Second), Limit: 1}, []string{"req_d", "req_c", "req_b"}, 10, 7)
	walk(client.RejectionQuery{Since: m0.Add(2*time.Minute + 59*time.Second), Limit: 1}, []string{"req_d", "req_c"}, 9, 7)
	walk(client.RejectionQuery{Rule: "iso4217", Limit: 1}, []string{"req_c", "req_a"}, 9, 7)
	walk(client.RejectionQuery{Since: m0.Add(time.Minute), Rule: "required", Limit: 1}, []string{"req_b"}, 1, 0)
	walk(client.RejectionQuery{Since: m0.Add(2 * time.Minute), Rule: "required", Limit: 1}, nil, 0, 0)
}
