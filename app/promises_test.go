package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"svc/lib/ids"
	"svc/schema/apitest"
	"svc/schema/erasure"
)

// The webhook pages work without ClickHouse (app/README.md: "the webhook pages say their
// log cannot be read and their forms still work: a leaked endpoint secret can be
// rotated"). With ClickHouse unreachable (a closed port, nothing connected yet) the
// endpoints screen lists the endpoints, an endpoint's page and the inbound page answer
// 200 and say their log cannot be read, and their forms change the webhooks role's
// state: create, rotate, disable, enable, issue an inbound secret.
func TestWebhookPagesWorkWithoutClickHouse(t *testing.T) {
	rg := webhooksRig(t)
	rg.app.conn = nil
	rg.app.Config.ClickHouse.Addr, rg.app.Config.ClickHouse.DialTimeout = "127.0.0.1:1", 200*time.Millisecond
	ctx := context.Background()
	st := rg.app.Webhooks
	ws := rg.Workspace(t, false)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	ep, err := st.CreateEndpoint(ctx, ws.ID, "https://hooks.example.com/leaked", nil)
	if err != nil {
		t.Fatal(err)
	}
	eid := ids.Format(ids.Endpoint, ep.ID)
	leaked := ep.Secrets[0].Secret

	// The endpoints screen: the endpoint listed, its form there.
	if p := adm.get("/app/webhooks"); p.Status != 200 || !strings.Contains(p.Body, eid) || !strings.Contains(p.Body, `id="create-endpoint"`) {
		t.Fatalf("the endpoints screen without ClickHouse: %d\n%s", p.Status, p.Body)
	}
	// The endpoint's page: 200, its log said unreadable, its forms there.
	page := "/app/webhooks/" + eid
	p := adm.get(page)
	for _, want := range []string{"The delivery log cannot be read right now", `id="rotate-submit"`, `id="disable-submit"`} {
		if p.Status != 200 || !strings.Contains(p.Body, want) {
			t.Fatalf("the endpoint's page without ClickHouse lacks %q: %d\n%s", want, p.Status, p.Body)
		}
	}
	// The leaked secret is rotated out: a new one shown once, the only one signing.
	secret := secretOf(t, adm.post(page, page+"/rotate", url.Values{"overlap": {"0s"}}))
	if e, err := st.Endpoint(ctx, ep.ID); err != nil || secret == leaked || e.Secrets[0].Secret != secret {
		t.Fatalf("after the rotation without ClickHouse: %+v %v", e.Secrets, err)
	}
	if p := adm.post(page, page+"/disable", url.Values{}); p.Status != 303 {
		t.Fatalf("disable without ClickHouse: %d\n%s", p.Status, p.Body)
	}
	if e, _ := st.Endpoint(ctx, ep.ID); e.Enabled() {
		t.Fatal("not disabled")
	}
	if p := adm.post(page, page+"/enable", url.Values{}); p.Status != 303 {
		t.Fatalf("enable without ClickHouse: %d\n%s", p.Status, p.Body)
	}
	if e, _ := st.Endpoint(ctx, ep.ID); !e.Enabled() {
		t.Fatal("not enabled")
	}
	created := secretOf(t, adm.post("/app/webhooks", "/app/webhooks", url.Values{"url": {"https://other.example.com/hook"}}))
	if eps, err := st.Endpoints(ctx, ws.ID); err != nil || len(eps) != 2 {
		t.Fatalf("endpoints after a create without ClickHouse: %d %v", len(eps), err)
	}

	// The inbound page: 200, its log said unreadable; a secret issued.
	p = adm.get("/app/webhooks/inbound")
	for _, want := range []string{"The inbound log cannot be read right now", `id="issue-secret-submit"`} {
		if p.Status != 200 || !strings.Contains(p.Body, want) {
			t.Fatalf("the inbound page without ClickHouse lacks %q: %d\n%s", want, p.Status, p.Body)
		}
	}
	in := secretOf(t, adm.post("/app/webhooks/inbound", "/app/webhooks/inbound/secret", url.Values{"overlap": {"24h"}}))
	if ss, err := st.InboundSecrets(ctx, ws.ID); err != nil || len(ss) != 1 || ss[0].Secret != in || in == created {
		t.Fatalf("inbound secrets after an issue without ClickHouse: %+v %v", ss, err)
	}
	if rg.app.conn != nil {
		t.Fatal("the test reached a ClickHouse")
	}
}

// An erasure requested in the application digests the address lower-cased (app/README.md:
// "admins request one by email, lower-cased and hashed at once") and trimmed (the
// handler's contract: as POST /events normalises addresses): the erasure record and the
// pipeline's registry of erased identities hold SHA-256 of the lower-case address, and
// neither holds the address.
func TestErasureInTheApplicationDigestsTheLowerCaseAddress(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	const page, normal = "/app/workspace", "gone.person@example.com"
	sum := sha256.Sum256([]byte(normal))
	want := hex.EncodeToString(sum[:])
	reg := "svc:privacy:{ids}" // erasure.Registry's hash (schema/erasure/identities.go)
	t.Cleanup(func() { rg.Redis.HDel(context.Background(), reg, ws.ID.String()+":"+want) })

	seen := map[string]bool{}
	for _, typed := range []string{"Gone.Person@Example.COM", " \tgone.person@example.com \n"} {
		if p := adm.post(page, page+"/erasures", url.Values{"email": {typed}}); p.Status != 303 {
			t.Fatalf("requesting the erasure of %q: %d\n%s", typed, p.Status, p.Body)
		}
		es, err := erasure.List(ctx, rg.app.conn, erasure.ListQuery{Workspace: ws.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var e *erasure.Erasure
		for _, x := range es {
			if !seen[x.ID.String()] {
				e = x
			}
		}
		if e == nil || len(es) != len(seen)+1 {
			t.Fatalf("after requesting %q: %d records, %d before", typed, len(es), len(seen))
		}
		seen[e.ID.String()] = true
		if got := hex.EncodeToString(e.Email[:]); got != want {
			t.Fatalf("%q: the record's digest %s, want SHA-256(%q) %s", typed, got, normal, want)
		}
		if strings.Contains(strings.ToLower(fmt.Sprintf("%+v", *e)), "gone.person") {
			t.Fatalf("the erasure record holds the address: %+v", *e)
		}
	}
	// The registry (the edge and the consumer apply it) has the lower-case digest, and
	// nothing else of this workspace.
	fields, _, err := rg.Redis.HScan(ctx, reg, 0, ws.ID.String()+":*", 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 2 || fields[0] != ws.ID.String()+":"+want || strings.Contains(strings.ToLower(fields[1]), "gone.person") {
		t.Fatalf("the registry of erased identities holds %q, want only %s:%s", fields, ws.ID, want)
	}
	es, err := rg.app.Audit.List(ctx, ws.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	if log := strings.ToLower(fmt.Sprintf("%+v", es)); !strings.Contains(log, "erasure request") || strings.Contains(log, "gone.person") {
		t.Fatalf("the audit log: %s", log)
	}
}

// The audit log keeps its entries for SVC_APP_AUDIT_RETENTION (app/README.md, default
// 9600h = 400 days; DESIGN.md: "trimmed by MINID to SVC_APP_AUDIT_RETENTION as entries
// are added"; Audit.Record: "drops entries past Retention"). Entries written a minute
// past and a minute within the retention, then a change in the application: the first
// is gone from Redis, the second stays, with the change's entry.
func TestAuditLogDropsEntriesPastItsRetention(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	a := rg.app.Audit
	if a.Retention != 9600*time.Hour {
		t.Fatalf("the application's audit retention %s, documented 9600h", a.Retention)
	}
	key := a.stream(ws.ID)
	t.Cleanup(func() { rg.Redis.Del(context.Background(), key) })
	// Entries as Record writes them, dated (their stream ids) as written that long ago.
	now := time.Now()
	for _, e := range []struct {
		target string
		at     time.Time
	}{{"past", now.Add(-a.Retention - time.Minute)}, {"within", now.Add(-a.Retention + time.Minute)}} {
		if err := rg.Redis.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-0", e.at.UnixMilli()),
			Values: []string{"who", "test", "address", "local", "action", "test entry", "target", e.target, "detail", ""}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A change in the application: the invited admin's sign-in is recorded.
	rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	msgs, err := rg.Redis.XRange(ctx, key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range msgs {
		targets = append(targets, fmt.Sprint(m.Values["target"]))
	}
	if len(targets) < 2 || targets[0] != "within" || slices.Contains(targets, "past") {
		t.Fatalf("the audit stream after a change holds %q: want the entry within the retention first, none past it", targets)
	}
}

// The operator's log keeps its newest opsCap (100,000) entries, exactly (audit.go: "past
// it the oldest entries go, whatever their age"). 100,005 entries through Record, into a
// stream of the test's own (the shared operator's log is left alone): the stream holds
// exactly 100,000, the newest, and none of the five first.
func TestOperatorLogKeepsItsNewestEntries(t *testing.T) {
	rdb := apitest.Redis(t)
	a := NewAudit(rdb, time.Hour)
	if opsStream != "svc:app:audit:ops" || a.ops != opsStream || opsCap != 100000 {
		t.Fatalf("operator's log %q (%q), cap %d: documented svc:app:audit:ops, 100000", a.ops, opsStream, opsCap)
	}
	a.ops = fmt.Sprintf("svc:test:audit:ops:%d", time.Now().UnixNano())
	ctx := context.Background()
	t.Cleanup(func() { rdb.Del(context.Background(), a.ops) })
	const extra = 5
	record := func(i int) error {
		return a.Record(ctx, Entry{Who: "svc admin", Address: "local", Action: "test", Target: strconv.Itoa(i)})
	}
	for i := 0; i < extra; i++ { // the oldest, in order
		if err := record(i); err != nil {
			t.Fatal(err)
		}
	}
	var next atomic.Int64
	next.Store(extra)
	var g errgroup.Group
	for w := 0; w < 32; w++ {
		g.Go(func() error {
			for i := int(next.Add(1)) - 1; i < opsCap+extra; i = int(next.Add(1)) - 1 {
				if err := record(i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.XLen(ctx, a.ops).Result(); err != nil || n != opsCap {
		t.Fatalf("the operator's log holds %d entries (%v) after %d, want exactly %d", n, err, opsCap+extra, opsCap)
	}
	oldest, err := rdb.XRangeN(ctx, a.ops, "-", "+", 1).Result()
	if err != nil || len(oldest) != 1 {
		t.Fatalf("oldest entry: %v %v", oldest, err)
	}
	if i, _ := strconv.Atoi(fmt.Sprint(oldest[0].Values["target"])); i < extra {
		t.Fatalf("the oldest entry kept is number %d: the first %d should be gone", i, extra)
	}
}
