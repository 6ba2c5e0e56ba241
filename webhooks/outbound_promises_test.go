package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/apikey"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// More outbound promises of webhooks/README.md ("Signatures", "Delivery", "Retries") and
// of the developer page (api/docs/pages/webhooks.md), each held to its words: a
// rotation's signatures, the envelope and its headers, a receiver that does not answer in
// time, and the runs of failures.

// obHit is one request the obReceiver got, headers included.
type obHit struct {
	Method string
	Header http.Header
	Body   []byte
	At     time.Time // the fake clock when it arrived
}

// obReceiver records every request with its headers and answers through answer(n), n
// counting the requests it got from 1.
type obReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	hits []obHit
}

func obNewReceiver(t *testing.T, clock *fakeClock, answer func(w http.ResponseWriter, r *http.Request, n int)) *obReceiver {
	t.Helper()
	rc := &obReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.hits = append(rc.hits, obHit{Method: r.Method, Header: r.Header.Clone(), Body: body, At: clock.Now()})
		n := len(rc.hits)
		rc.mu.Unlock()
		answer(w, r, n)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *obReceiver) Hits() []obHit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]obHit(nil), rc.hits...)
}

// obV1s returns the v1 entries of an SVC-Signature header, in order.
func obV1s(header string) []string {
	var out []string
	for _, part := range strings.Split(header, ",") {
		if k, v, _ := strings.Cut(strings.TrimSpace(part), "="); k == "v1" {
			out = append(out, v)
		}
	}
	return out
}

// obDigest is hex(HMAC-SHA256(secret, "<t>.<body>")) for the header's t, computed here
// (not with lib/signature) as a receiver would.
func obDigest(header string, body []byte, secret string) string {
	var ts string
	for _, part := range strings.Split(header, ",") {
		if k, v, _ := strings.Cut(strings.TrimSpace(part), "="); k == "t" {
			ts = v
		}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// obDrain runs w until nothing is due.
func obDrain(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := contextTimeout()
	defer cancel()
	for {
		n, err := w.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// obEndpoint reads an endpoint with its state.
func obEndpoint(t *testing.T, st *Store, id uuid.UUID) Endpoint {
	t.Helper()
	ctx, cancel := contextTimeout()
	defer cancel()
	ep, err := st.Endpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// Promise (webhooks.md "Signatures": "While a secret rotates, the header carries one `v1`
// per valid secret: accept the message when any `v1` matches any of your secrets";
// README "Signatures (both directions)": "While a secret rotates there are several valid
// secrets, and the sender puts one `v1` per secret"; the endpoint's page "rotates its
// secret with an overlap"; RotateEndpointSecret: "each other secret stays valid until
// the earlier of its expiry … and now + overlap. Deliveries are signed with every valid
// secret meanwhile").
//
// A delivery made during an overlap carries exactly one v1 per valid secret (2 after
// one rotation, 3 after a second rotation within the overlap), and every valid secret
// verifies it; after the overlap there is one v1, the newest secret's, and the older
// secrets verify nothing.
func TestOutboundRotationSignsOneV1PerValidSecret(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := obNewReceiver(t, e.clock, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(204) })
	st, ws, ep := e.endpoint(t, rcv.URL)
	s1 := ep.Secrets[0].Secret
	w := e.worker("w")
	em := e.emitter()
	// deliver sends a new event and checks its signature header: exactly one v1 per
	// secret of valid (each verifying, each a different secret's digest), and none of
	// invalid verifying.
	deliver := func(when string, valid, invalid []string) {
		t.Helper()
		before := len(rcv.Hits())
		if n, err := em.Emit(ctx, keyEvent(ws)); err != nil || n != 1 {
			t.Fatalf("%s: Emit = %d, %v", when, n, err)
		}
		if n, err := w.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("%s: RunOnce = %d, %v", when, n, err)
		}
		hits := rcv.Hits()
		if len(hits) != before+1 {
			t.Fatalf("%s: the receiver got %d requests, want %d", when, len(hits), before+1)
		}
		h := hits[before]
		header := h.Header.Get("SVC-Signature")
		got := obV1s(header)
		var want []string
		for _, s := range valid {
			want = append(want, obDigest(header, h.Body, s))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: SVC-Signature %s carries %d v1, want one per valid secret (%d): %v", when, header, len(got), len(valid), want)
		}
		for i, s := range valid {
			if !verifyIndependently(header, h.Body, s, h.At) {
				t.Fatalf("%s: valid secret %d does not verify %s", when, i+1, header)
			}
		}
		for i, s := range invalid {
			if verifyIndependently(header, h.Body, s, h.At) {
				t.Fatalf("%s: expired secret %d still verifies %s", when, i+1, header)
			}
		}
	}

	deliver("before any rotation", []string{s1}, nil)

	t0 := e.clock.Now()
	r1, err := st.RotateEndpointSecret(ctx, ep.ID, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s2 := r1.Secrets[0].Secret
	if len(r1.Secrets) != 2 || s2 == s1 {
		t.Fatalf("after a rotation: secrets %+v, want the new one and the old", r1.Secrets)
	}
	deliver("during the first overlap", []string{s1, s2}, nil)

	// A second rotation within the first overlap, ending with it: three valid secrets,
	// three v1. (Its overlap ends when the first one does: s1 and s2 expire together.)
	e.clock.Set(t0.Add(time.Hour))
	r2, err := st.RotateEndpointSecret(ctx, ep.ID, 23*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s3 := r2.Secrets[0].Secret
	if len(r2.Secrets) != 3 || s3 == s1 || s3 == s2 {
		t.Fatalf("after a second rotation: secrets %+v, want a new one and the two others", r2.Secrets)
	}
	deliver("after a second rotation, in the overlap", []string{s1, s2, s3}, nil)
	e.clock.Set(t0.Add(24*time.Hour - time.Second))
	deliver("the last second of the overlap", []string{s1, s2, s3}, nil)

	// The overlap is over: only the newest secret signs, one v1.
	e.clock.Set(t0.Add(24*time.Hour + time.Second))
	deliver("after the overlap", []string{s3}, []string{s1, s2})
	e.clock.Add(30 * 24 * time.Hour)
	deliver("a month later", []string{s3}, []string{s1, s2})
}

// Promise (README "Delivery": the request's headers "Content-Type: application/json",
// "User-Agent: svc-webhooks/1", "SVC-Webhook-Id: evt_<uuid> stable per event",
// "SVC-Event-Type: key.expiring", "SVC-Webhook-Attempt", "SVC-Signature", and the
// envelope {"id": "evt_…", "id_uuid": "…", "type", "created_at": "2026-11-24T04:58:47Z",
// "workspace_id": "org_…", "workspace_id_uuid": "…", "data"}; "Event ids are UUID v5 of
// what the event is about"; webhooks.md "Outbound events": "Each delivery is a POST with
// a JSON envelope", and the table of `data`: `key.expiring` has "`key_id`, `env`,
// `scopes`, `expires_at`, `expires_in_seconds`", `rollup.day_closed` has "`pixel_id`,
// `date`, `time_zone`, `sandbox`, `events`, `consented_events`, `rows[]` (`event_name`,
// `currency`, `events`, `consented_events`, `value`, `unique_people`)"; README
// "key.expiring" and "rollup.day_closed" examples add `key_id_uuid` and `pixel_id_uuid`).
//
// The events are made by the triggers (ScanExpiringKeys, ScanClosedDays) for a live and
// a showroom (sandbox) workspace; each of the four deliveries is checked header by
// header, envelope member by member (exactly the seven), and data member by member with
// the values the keys and the stored events make: consented events, currencies and
// unique people (distinct e-mail hashes among consented events) per row.
func TestOutboundEnvelopeHeadersAndDataMembers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := obNewReceiver(t, e.clock, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(200) })
	ks := workspace.NewStore(e.rdb)
	st := e.store()
	now := e.clock.Now()
	day := rollups.LocalDate(now, time.UTC).AddDate(0, 0, -9)
	final := rollups.DayEnd(day, time.UTC).Add(rollups.Grace)
	if final.After(now) {
		t.Fatalf("day %s is not final at %s", day, now)
	}

	type world struct {
		ws      workspace.Workspace
		pixel   workspace.Pixel
		key     apikey.Key
		secret  string
		sandbox bool
	}
	email := func(c byte) string { return strings.Repeat(string(c), 32) }
	insert := func(wd world, rows [][]any) {
		t.Helper()
		b, err := e.conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
			occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)`)
		if err != nil {
			t.Fatal(err)
		}
		sb := uint8(0)
		if wd.sandbox {
			sb = 1
		}
		for i, r := range rows { // name, currency, value, consent, has_email, email
			if err := b.Append(wd.ws.ID, wd.pixel.ID, sb, uuid.New(), r[0], day.Add(time.Duration(i+1)*time.Minute), day,
				decimal.RequireFromString(r[2].(string)), uint8(1), r[1], r[3], r[4], r[5], now); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	worlds := map[bool]*world{}
	for _, sandbox := range []bool{false, true} {
		ws, err := ks.CreateWorkspace(ctx, "envelope", sandbox)
		if err != nil {
			t.Fatal(err)
		}
		px, err := ks.CreatePixel(ctx, ws.ID, "envelope")
		if err != nil {
			t.Fatal(err)
		}
		env, exp, scopes := apikey.Live, now.Add(50*time.Hour+17*time.Second), []string{"events:write", "pixels:read"}
		if sandbox {
			env, exp, scopes = apikey.Sandbox, now.Add(6*24*time.Hour+3*time.Second), []string{"events:write"}
		}
		k, _, err := ks.CreateKey(ctx, workspace.KeySpec{WorkspaceID: ws.ID, Env: env, Scopes: scopes, ExpiresAt: &exp})
		if err != nil {
			t.Fatal(err)
		}
		ep, err := st.CreateEndpoint(ctx, ws.ID, rcv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		worlds[sandbox] = &world{ws: ws, pixel: px, key: k, secret: ep.Secrets[0].Secret, sandbox: sandbox}
	}
	// Live: purchase EUR by two consented people (one twice), purchase USD without
	// consent, a view without an e-mail.
	insert(*worlds[false], [][]any{
		{"purchase", "EUR", "10.5", uint8(1), uint8(1), email('a')},
		{"purchase", "EUR", "2", uint8(1), uint8(1), email('a')},
		{"purchase", "EUR", "1.25", uint8(1), uint8(1), email('b')},
		{"purchase", "USD", "7", uint8(0), uint8(1), email('c')},
		{"view", "", "0", uint8(1), uint8(0), email('0')},
	})
	// Sandbox: one consented purchase in GBP.
	insert(*worlds[true], [][]any{{"purchase", "GBP", "3", uint8(1), uint8(1), email('d')}})

	tr := &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: ks, Conn: e.conn, Log: e.log, Now: e.clock.Now}
	if err := st.setState(ctx, closedScanState, final.Add(-time.Hour).Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	if err := tr.ScanExpiringKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.ScanClosedDays(ctx); err != nil {
		t.Fatal(err)
	}
	obDrain(t, e.worker("w"))

	hits := rcv.Hits()
	if len(hits) != 4 {
		t.Fatalf("the receiver got %d requests, want 4 (a key.expiring and a rollup.day_closed per workspace)", len(hits))
	}
	uuidRE := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	createdRE := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	envelopeKeys := []string{"created_at", "data", "id", "id_uuid", "type", "workspace_id", "workspace_id_uuid"}
	seen := map[string]bool{}
	for i, h := range hits {
		var m map[string]any
		if err := json.Unmarshal(h.Body, &m); err != nil {
			t.Fatalf("request %d: body %s is not a JSON object: %v", i+1, h.Body, err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !slices.Equal(keys, envelopeKeys) {
			t.Fatalf("request %d: envelope members %v, want %v", i+1, keys, envelopeKeys)
		}
		typ, _ := m["type"].(string)
		wsUUID, _ := m["workspace_id_uuid"].(string)
		var wd *world
		for _, c := range worlds {
			if c.ws.ID.String() == wsUUID {
				wd = c
			}
		}
		if wd == nil {
			t.Fatalf("request %d: workspace_id_uuid %v is neither workspace's %s, %s", i+1, m["workspace_id_uuid"],
				worlds[false].ws.ID, worlds[true].ws.ID)
		}
		if m["workspace_id"] != "org_"+wsUUID {
			t.Fatalf("request %d: workspace_id %v, want org_%s", i+1, m["workspace_id"], wsUUID)
		}
		idUUID, _ := m["id_uuid"].(string)
		id, err := uuid.Parse(idUUID)
		if !uuidRE.MatchString(idUUID) || err != nil || id.Version() != 5 {
			t.Fatalf("request %d: id_uuid %v, want a lower-case UUID v5", i+1, m["id_uuid"])
		}
		if m["id"] != "evt_"+idUUID {
			t.Fatalf("request %d: id %v, want evt_%s", i+1, m["id"], idUUID)
		}
		created, _ := m["created_at"].(string)
		if at, err := time.Parse(time.RFC3339, created); !createdRE.MatchString(created) || err != nil || !at.Equal(now) {
			t.Fatalf("request %d: created_at %v, want the scan's instant %s as RFC 3339 UTC seconds (2026-11-24T04:58:47Z)",
				i+1, m["created_at"], now.Format(time.RFC3339))
		}
		// The headers.
		hd := h.Header
		if h.Method != http.MethodPost || hd.Get("Content-Type") != "application/json" || hd.Get("User-Agent") != "svc-webhooks/1" ||
			hd.Get("SVC-Event-Type") != typ || hd.Get("SVC-Webhook-Id") != m["id"] || hd.Get("SVC-Webhook-Attempt") != "1" {
			t.Fatalf("request %d (%s): %s with headers %v; want POST, Content-Type: application/json, User-Agent: svc-webhooks/1, "+
				"SVC-Event-Type: %s, SVC-Webhook-Id: %v, SVC-Webhook-Attempt: 1", i+1, typ, h.Method, hd, typ, m["id"])
		}
		if !verifyIndependently(hd.Get("SVC-Signature"), h.Body, wd.secret, h.At) {
			t.Fatalf("request %d: SVC-Signature %s does not verify", i+1, hd.Get("SVC-Signature"))
		}
		data, ok := m["data"].(map[string]any)
		if !ok {
			t.Fatalf("request %d: data %v is not an object", i+1, m["data"])
		}
		seen[typ+":"+wsUUID] = true
		switch typ {
		case KindKeyExpiring:
			obCheckKeyExpiring(t, data, wd.key, now)
			exp := wd.key.ExpiresAt.UTC().Format(time.RFC3339)
			if id != EventID(KindKeyExpiring, wd.key.ID.String(), exp) {
				t.Fatalf("key.expiring id %s is not the one of its key and expiry", id)
			}
		case KindDayClosed:
			obCheckDayClosed(t, data, wd.pixel, day, wd.sandbox)
			if id != EventID(KindDayClosed, wd.pixel.ID.String(), day.Format(time.DateOnly), map[bool]string{false: "false", true: "true"}[wd.sandbox]) {
				t.Fatalf("rollup.day_closed id %s is not the one of its pixel, day and environment", id)
			}
		default:
			t.Fatalf("request %d: type %q", i+1, typ)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("deliveries %v, want each type once per workspace", seen)
	}
}

// obCheckKeyExpiring checks key.expiring's data against the key it announces, made at
// createdAt: key_id "key_<uuid>", key_id_uuid, env, scopes, expires_at (RFC 3339 UTC
// seconds, as in the README's example), expires_in_seconds from created_at to expires_at.
func obCheckKeyExpiring(t *testing.T, data map[string]any, k apikey.Key, createdAt time.Time) {
	t.Helper()
	exp := k.ExpiresAt.UTC()
	var scopes []string
	if arr, ok := data["scopes"].([]any); ok {
		for _, s := range arr {
			str, _ := s.(string)
			scopes = append(scopes, str)
		}
	}
	if data["key_id"] != "key_"+k.ID.String() || data["key_id_uuid"] != k.ID.String() || data["env"] != k.Env ||
		!slices.Equal(scopes, k.Scopes) || len(scopes) == 0 || data["expires_at"] != exp.Format("2006-01-02T15:04:05Z") ||
		data["expires_in_seconds"] != float64(exp.Sub(createdAt)/time.Second) {
		t.Fatalf("key.expiring data %v; want key_id key_%s, key_id_uuid %s, env %s, scopes %v, expires_at %s, expires_in_seconds %d",
			data, k.ID, k.ID, k.Env, k.Scopes, exp.Format(time.RFC3339), exp.Sub(createdAt)/time.Second)
	}
}

// obCheckDayClosed checks rollup.day_closed's data for the events insert wrote: per
// (event name, currency) row, events, consented events, the value and the distinct
// e-mail hashes among consented events; the day's totals; sandbox a JSON boolean.
func obCheckDayClosed(t *testing.T, data map[string]any, px workspace.Pixel, day time.Time, sandbox bool) {
	t.Helper()
	type row struct {
		events, consented, people float64
		value                     string
	}
	want := map[string]row{ // event_name/currency
		"purchase/EUR": {3, 3, 2, "13.7500"},
		"purchase/USD": {1, 0, 0, "7.0000"},
		"view/":        {1, 1, 0, "0.0000"},
	}
	wantEvents, wantConsented := 5.0, 4.0
	if sandbox {
		want = map[string]row{"purchase/GBP": {1, 1, 1, "3.0000"}}
		wantEvents, wantConsented = 1, 1
	}
	if sb, ok := data["sandbox"].(bool); !ok || sb != sandbox {
		t.Fatalf("day_closed (sandbox %v): sandbox %#v, want the boolean %v", sandbox, data["sandbox"], sandbox)
	}
	if data["pixel_id"] != "pxl_"+px.ID.String() || data["pixel_id_uuid"] != px.ID.String() ||
		data["date"] != day.Format(time.DateOnly) || data["time_zone"] != "UTC" ||
		data["events"] != wantEvents || data["consented_events"] != wantConsented {
		t.Fatalf("day_closed (sandbox %v) data %v; want pixel_id pxl_%s, date %s, time_zone UTC, events %v, consented_events %v",
			sandbox, data, px.ID, day.Format(time.DateOnly), wantEvents, wantConsented)
	}
	rows, _ := data["rows"].([]any)
	if len(rows) != len(want) {
		t.Fatalf("day_closed (sandbox %v): rows %v, want %d", sandbox, data["rows"], len(want))
	}
	for _, r := range rows {
		m, _ := r.(map[string]any)
		name, _ := m["event_name"].(string)
		cur, ok := m["currency"].(string)
		w, found := want[name+"/"+cur]
		if !ok || !found || m["events"] != w.events || m["consented_events"] != w.consented || m["value"] != w.value ||
			m["unique_people"] != w.people {
			t.Fatalf("day_closed (sandbox %v) row %v; want one of %+v (event_name/currency: events, consented_events, unique_people, value)",
				sandbox, m, want)
		}
		delete(want, name+"/"+cur)
	}
}

// Promise (README "Retries": "Any other answer, a redirect, a network error or no answer
// within **15 s** is a failure"; webhooks.md: "Other answers and timeouts are retried on
// a schedule (5 s, 5 min, 30 min, then longer)"; "Every attempt is in the delivery log";
// the endpoint's page lists "each attempt's time, response code, duration, outcome and
// error"; Config.Timeout "bounds one attempt", SVC_WEBHOOKS_TIMEOUT default 15s).
//
// With the timeout at 300 ms and a receiver that holds the request far longer, the
// attempt ends at the timeout (not at the receiver's answer or the 5 s lease): logged
// with status_code 0, outcome retry, the error "no answer within 300ms", a duration of
// at least the timeout and next_attempt_at 5 s on (±10 %); the delivery is pending with
// no status, the endpoint's run of failures starts; the next attempt is made then, not
// before.
func TestOutboundNoAnswerWithinTheTimeoutIsAFailedAttempt(t *testing.T) {
	if d := DefaultConfig().Timeout; d != 15*time.Second {
		t.Fatalf("SVC_WEBHOOKS_TIMEOUT defaults to %s, the README says 15 s", d)
	}
	e := newEnv(t)
	e.cfg.Timeout = 300 * time.Millisecond
	ctx := context.Background()
	rcv := obNewReceiver(t, e.clock, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			// Hold the request until the sender gives up (or long past any timeout).
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		}
		w.WriteHeader(204)
	})
	st, ws, ep := e.endpoint(t, rcv.URL)
	ev := e.emitKey(t, ws)
	w := e.worker("w")
	t0 := e.clock.Now()
	start := time.Now()
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if took := time.Since(start); took >= 4*time.Second {
		t.Fatalf("the attempt took %s: it was not ended by the 300ms timeout (the lease is %s)", took, e.cfg.Lease)
	}
	if n := len(rcv.Hits()); n != 1 {
		t.Fatalf("the receiver got %d requests, want the 1 it did not answer", n)
	}
	d, err := st.Delivery(ctx, ep.ID, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := t0.Add(4500*time.Millisecond), t0.Add(5500*time.Millisecond)
	if d.State != "pending" || d.Attempts != 1 || d.LastStatus != 0 || d.NextAt == nil || d.NextAt.Before(lo) || d.NextAt.After(hi) {
		t.Fatalf("delivery %+v; want pending after 1 attempt, no status, the next attempt 5 s on ±10%%", d)
	}
	r := lastRow(t, e, ep.ID, ev.ID)
	if r.Attempt != 1 || r.StatusCode != 0 || r.Outcome != "retry" || r.Error != "no answer within 300ms" ||
		r.NextAttemptAt == nil || !r.NextAttemptAt.Equal(d.NextAt.Truncate(time.Second)) || r.LatencyMS < 300 {
		t.Fatalf("logged %+v; want attempt 1, status_code 0, outcome retry, error %q, latency ≥ 300 ms, next_attempt_at %s",
			r, "no answer within 300ms", d.NextAt)
	}
	if got := obEndpoint(t, st, ep.ID); !got.Enabled() || got.FailingSince == nil || !got.FailingSince.Equal(t0) {
		t.Fatalf("endpoint %+v; want enabled, failing since %s", got, t0)
	}
	// Not due a second before; made at the scheduled instant, and delivered.
	e.clock.Set(d.NextAt.Add(-time.Second))
	if n, err := w.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a second early: RunOnce = %d, %v", n, err)
	}
	e.clock.Set(*d.NextAt)
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("the next attempt: RunOnce = %d, %v", n, err)
	}
	hits := rcv.Hits()
	if len(hits) != 2 || hits[1].Header.Get("SVC-Webhook-Attempt") != "2" {
		t.Fatalf("the receiver got %d requests, want the second as attempt 2", len(hits))
	}
	if r := lastRow(t, e, ep.ID, ev.ID); r.Attempt != 2 || r.Outcome != "delivered" || r.StatusCode != 204 {
		t.Fatalf("second attempt logged %+v, want delivered 204", r)
	}
}

// Promise (README "Retries": "An endpoint whose deliveries have failed without a success
// for **72 h** (`SVC_WEBHOOKS_DISABLE_AFTER`) is disabled; a failure more than 36 h after
// the previous one starts a new run"; MarkSuccess "ends the endpoint's run of
// failures"; Worker: the gap is DisableAfter/2).
//
// Failures at t0, t0+36 h (exactly 36 h after the previous: the run goes on), t0+50 h (50
// h after the run began, 14 h after the previous: it goes on) keep FailingSince at t0; a
// failure 36 h and 1 ms after the previous one starts a new run there, and the endpoint
// stays enabled though its first failure is 86 h old. A success ends the run
// (FailingSince nil), and the next failure, 3 h after the previous failure, starts a new
// run at itself.
func TestOutboundFailureRunsRestartAfterAGapAndEndOnSuccess(t *testing.T) {
	if c := DefaultConfig(); c.DisableAfter != 72*time.Hour || c.DisableAfter/2 != 36*time.Hour {
		t.Fatalf("SVC_WEBHOOKS_DISABLE_AFTER defaults to %s, the README says 72 h (a new run after 36 h)", c.DisableAfter)
	}
	e := newEnv(t)
	ctx := context.Background()
	var code atomic.Int32
	code.Store(500)
	rcv := obNewReceiver(t, e.clock, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(int(code.Load())) })
	st, ws, ep := e.endpoint(t, rcv.URL)
	em := e.emitter()
	w := e.worker("w")
	evA := keyEvent(ws)
	if n, err := em.Emit(ctx, evA); err != nil || n != 1 {
		t.Fatalf("Emit = %d, %v", n, err)
	}
	// attemptAt makes the attempt of ev due at t1 and checks the outcome logged and the run.
	attemptAt := func(when string, t1 time.Time, ev uuid.UUID, outcome string, since *time.Time) {
		t.Helper()
		e.clock.Set(t1)
		if !e.clock.Now().Equal(t1) {
			t.Fatalf("%s: the clock is at %s, not %s", when, e.clock.Now(), t1)
		}
		if n, err := w.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("%s: RunOnce = %d, %v; want one attempt", when, n, err)
		}
		if r := lastRow(t, e, ep.ID, ev); r.Outcome != outcome {
			t.Fatalf("%s: logged %+v, want outcome %s", when, r, outcome)
		}
		got := obEndpoint(t, st, ep.ID)
		if !got.Enabled() {
			t.Fatalf("%s: the endpoint was disabled (%s)", when, got.DisabledReason)
		}
		switch {
		case since == nil && got.FailingSince != nil:
			t.Fatalf("%s: failing since %s, want no run of failures", when, got.FailingSince)
		case since != nil && (got.FailingSince == nil || !got.FailingSince.Equal(*since)):
			t.Fatalf("%s: failing since %v, want %s", when, got.FailingSince, since)
		}
	}
	t0 := e.clock.Now()
	attemptAt("the first failure", t0, evA.ID, "retry", &t0)
	attemptAt("a failure exactly 36 h after the previous", t0.Add(36*time.Hour), evA.ID, "retry", &t0)
	attemptAt("a failure 14 h after the previous, 50 h into the run", t0.Add(50*time.Hour), evA.ID, "retry", &t0)
	t2 := t0.Add(86*time.Hour + time.Millisecond)
	attemptAt("a failure 36 h and 1 ms after the previous", t2, evA.ID, "retry", &t2)

	// A success ends the run.
	code.Store(200)
	t3 := t2.Add(3 * time.Hour) // the fifth attempt is due 2 h ±10 % after the fourth
	attemptAt("a success", t3, evA.ID, "delivered", nil)
	// The next failure, 3 h after the last failure, starts a run of its own.
	code.Store(500)
	t4 := t3.Add(time.Minute)
	e.clock.Set(t4)
	evB := keyEvent(ws)
	if n, err := em.Emit(ctx, evB); err != nil || n != 1 {
		t.Fatalf("Emit = %d, %v", n, err)
	}
	attemptAt("the first failure after a success", t4, evB.ID, "retry", &t4)
	if n := len(rcv.Hits()); n != 6 {
		t.Fatalf("the receiver got %d requests, want 6", n)
	}
}
