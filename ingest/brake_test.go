package ingest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/rejection"
	"svc/schema/workspace"
)

// TestInvalidBrake: a key whose batches are all refused gets its 2 × rate 422s with their
// errors, then 429 rate_limited at once (Retry-After, recorded as a refused batch, valid
// batches of that key too) until a token has come back; another key of the workspace
// is not slowed; a key refused more slowly than the rate never meets the brake.
func TestInvalidBrake(t *testing.T) {
	// One token a second: the bucket is full (2) when the burst starts at t0 and holds
	// about (time since t0) × rate tokens after it, so the check below, 1.5 s after t0,
	// meets 1.5 tokens with half a second of slack either way (a slow machine's requests,
	// the race detector's, fit in it; at 5 a second they did not always).
	const rate = 1
	const hold = 10 * time.Millisecond
	rg := newRigWith(t, func(c *Config) { c.InvalidRate, c.BrakeHold = rate, hold })
	tn := rg.Tenant(t, false)
	bad := batchJSON(tn.PixelID(), `{"event_name":"x"}`)
	good := batchJSON(tn.PixelID(), eventJSON("lead", "", true))
	t0 := time.Now()
	for range 2 * rate {
		apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, bad), 422, "invalid_request")
	}
	start := time.Now()
	braked := rg.Do(t, "POST", "/events", tn.Secret, bad)
	apitest.Problem(t, braked, 429, "rate_limited")
	if held := time.Since(start); held < hold/2 || held >= time.Second {
		t.Fatalf("a braked request answered after %s, want it held %s at least, and less than its Retry-After", held, hold/2)
	}
	if braked.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q, want 1", braked.Header.Get("Retry-After"))
	}
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, good), 429, "rate_limited")
	_, other := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live})
	if r := rg.Do(t, "POST", "/events", other, good); r.Status != 202 {
		t.Fatalf("another key: %d %s", r.Status, r.Body)
	}
	time.Sleep(time.Until(t0.Add(time.Second / rate * 3 / 2))) // a token and a half back since t0
	if late := time.Since(t0); late > time.Second/rate*19/10 {
		t.Fatalf("the requests before the check took %s: the bucket may hold two tokens", late)
	}
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, bad), 422, "invalid_request")
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, bad), 429, "rate_limited")
	if got := rg.counter(t, "svc_ingest_braked_requests_total", nil); got != 3 {
		t.Fatalf("svc_ingest_braked_requests_total %v, want 3", got)
	}
	// The brake's refusals are kept as the limits' are: one record about the batch.
	svctest.WaitFor(t, 5*time.Second, "the refusals' records", func() bool { return len(rg.rejectionRecords(t)) >= 2*rate+4 })
	n429 := 0
	for _, r := range rg.rejectionRecords(t) {
		if r.Status == 429 && len(r.Entries) == 1 && r.Entries[0].Index == rejection.Batch && r.Entries[0].Rule == "rate_limited" {
			n429++
		}
	}
	if n429 != 3 {
		t.Fatalf("%d records of the brake's 429s, want 3", n429)
	}

	// Batches in flight together cannot pass a bucket of one token together: the token is
	// taken when a batch is admitted, not when it is refused.
	time.Sleep(time.Second / rate * 3 / 2)
	var wg sync.WaitGroup
	var got [40]int
	for i := range 40 {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = rg.Do(t, "POST", "/events", tn.Secret, bad).Status }()
	}
	wg.Wait()
	if n := countOf(got[:40], 422); n < 1 || n > 2 {
		t.Fatalf("%d of 40 concurrent invalid batches read (422), want 1 (2 if a token came back meanwhile)", n)
	}

	// Refused more slowly than the rate: every batch gets its 422.
	_, slow := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live})
	for range 3 * rate {
		apitest.Problem(t, rg.Do(t, "POST", "/events", slow, bad), 422, "invalid_request")
		time.Sleep(time.Second / rate)
	}
}

// countOf counts the statuses equal to want.
func countOf(statuses []int, want int) int {
	n := 0
	for _, s := range statuses {
		if s == want {
			n++
		}
	}
	return n
}

// A held 429 keeps none of the in-flight bodies' budget (SVC_MAX_INFLIGHT_BODY_BYTES):
// large braked batches held at once, more than the budget holds together, are all
// answered 429, and meanwhile another key's batch is accepted, not refused 503.
func TestBrakeHoldKeepsNoBody(t *testing.T) {
	const hold = 1500 * time.Millisecond
	rg := newRigServer(t, func(c *Config) { c.InvalidRate, c.BrakeHold = 1, hold },
		func(c *httpserver.Config) { c.MaxBodyBytes, c.MaxInflightBodyBytes = 64<<10, 128<<10 })
	tn := rg.Tenant(t, false)
	bad := batchJSON(tn.PixelID(), `{"event_name":"x"}`)
	for range 2 { // the bucket's two tokens
		apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, bad), 422, "invalid_request")
	}
	big := batchJSON(tn.PixelID(), `{"event_name":"`+strings.Repeat("x", 40<<10)+`"}`) // 40 KiB: 3 fill the budget
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Add(1)
		go func() { defer wg.Done(); statuses[i] = rg.Do(t, "POST", "/events", tn.Secret, big).Status }()
		time.Sleep(20 * time.Millisecond) // each read before the next arrives
	}
	time.Sleep(100 * time.Millisecond) // all held now (at least 750 ms each)
	_, other := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live})
	if r := rg.Do(t, "POST", "/events", other, batchJSON(tn.PixelID(), eventJSON("lead", "", true))); r.Status != 202 {
		t.Fatalf("another key's batch while 8 large braked batches are held: %d %s", r.Status, r.Body)
	}
	wg.Wait()
	if n := countOf(statuses, 429); n != len(statuses) {
		t.Fatalf("the braked batches were answered %v, want all 429", statuses)
	}
}

// Only batches the edge reads take a brake token: a key with a bucket (one batch refused
// whole) that then sends valid dry runs, and Idempotency-Key replays, more than its
// bucket holds, still has its next valid batch read (they used to take a token each at
// admission and never give it back, braking a key that had sent nothing invalid since).
func TestBrakeTokensOnlyForBatchesRead(t *testing.T) {
	const rate = 5
	rg := newRigWith(t, func(c *Config) { c.InvalidRate, c.BrakeHold = rate, 10*time.Millisecond })
	tn := rg.Tenant(t, false)
	bad := batchJSON(tn.PixelID(), `{"event_name":"x"}`)
	good := batchJSON(tn.PixelID(), eventJSON("lead", "", true))
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, bad), 422, "invalid_request")
	for i := range 3 * rate {
		if r := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, good); r.Status != 200 {
			t.Fatalf("dry run %d: %d %s", i, r.Status, r.Body)
		}
	}
	if r := rg.Do(t, "POST", "/events", tn.Secret, good, "Idempotency-Key", "once"); r.Status != 202 {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	for i := range 3 * rate {
		if r := rg.Do(t, "POST", "/events", tn.Secret, good, "Idempotency-Key", "once"); r.Status != 202 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %d: %d %s", i, r.Status, r.Body)
		}
	}
	if r := rg.Do(t, "POST", "/events", tn.Secret, good); r.Status != 202 {
		t.Fatalf("a valid batch after dry runs and replays: %d %s, want 202", r.Status, r.Body)
	}
}

// Dry runs of invalid batches are braked as real ones are: each is read in full and
// refunded its quota, so without the brake a key could make the edge check invalid
// batches without bound. A braked dry run is held as any braked request, whether the
// brake stops it before its handler or in it, and recorded nowhere (nothing of a dry run
// is kept).
func TestBrakePacesInvalidDryRuns(t *testing.T) {
	const rate = 5
	const hold = 40 * time.Millisecond
	rg := newRigWith(t, func(c *Config) { c.InvalidRate, c.BrakeHold = rate, hold })
	tn := rg.Tenant(t, false)
	bad := batchJSON(tn.PixelID(), `{"event_name":"x"}`)
	braked := 0
	for range 3 * rate {
		start := time.Now()
		r := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, bad)
		switch r.Status {
		case 422:
		case 429:
			braked++
			if held := time.Since(start); held < hold/2 {
				t.Fatalf("a braked dry run answered after %s, want it held %s at least", held, hold/2)
			}
		default:
			t.Fatalf("an invalid dry run: %d %s", r.Status, r.Body)
		}
	}
	if braked == 0 {
		t.Fatalf("%d invalid dry runs in a row, none braked (burst %d)", 3*rate, 2*rate)
	}
	// A token comes back; concurrent dry runs pass the admission, one takes it, the
	// others are braked in the handler.
	time.Sleep(time.Second / rate)
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, bad).Status
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, st := range statuses {
		count[st]++
	}
	// One token came back (two or three if more came back while they ran): that many 422s,
	// the rest braked.
	if count[422] < 1 || count[422] > 3 || count[422]+count[429] != len(statuses) {
		t.Fatalf("concurrent invalid dry runs answered %v, want one to three 422 and the rest 429", count)
	}
	time.Sleep(200 * time.Millisecond) // a record would be handed to the producer by now
	if recs := rg.rejectionRecords(t); len(recs) != 0 {
		t.Fatalf("%d rejection records of dry runs, want none", len(recs))
	}
}

// A batch whose pixel_id names no pixel of the key's workspace (another kind of id, an
// unknown pixel) is refused whole after its body was read: the brake counts it.
func TestBrakeCountsBatchesOfNoPixel(t *testing.T) {
	const rate = 5
	rg := newRigWith(t, func(c *Config) { c.InvalidRate, c.BrakeHold = rate, 10*time.Millisecond })
	tn := rg.Tenant(t, false)
	for name, pixel := range map[string]string{"another kind": "pln_" + uuid.NewString(), "unknown": "pxl_" + uuid.NewString()} {
		_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live})
		body := batchJSON(pixel, eventJSON("lead", "", true))
		statuses := map[int]int{}
		for range 3 * rate {
			statuses[rg.Do(t, "POST", "/events", secret, body).Status]++
		}
		if statuses[429] == 0 {
			t.Fatalf("%s: %v, want the brake's 429 past %d refusals", name, statuses, 2*rate)
		}
	}
}

// TestBrakeHoldsHalfToAllOfASecond: by default a braked 429 is held between half a second
// and a second, never past its Retry-After: 1, at a spread of moments (a flood's requests
// braked together do not all come back together).
func TestBrakeHoldsHalfToAllOfASecond(t *testing.T) {
	ib := newInvalidBrake(Config{InvalidRate: 1})
	var waits []time.Duration
	for i := 0; i < 4; i++ {
		start := time.Now()
		ib.hold(nil)
		waits = append(waits, time.Since(start))
	}
	distinct := map[time.Duration]bool{}
	for _, w := range waits {
		if w < 500*time.Millisecond || w > 1100*time.Millisecond {
			t.Fatalf("held %s, want 0.5–1 s", w)
		}
		distinct[w.Round(10*time.Millisecond)] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("four holds all %v: not spread", waits)
	}
	done := make(chan struct{})
	close(done)
	start := time.Now()
	ib.hold(done)
	if time.Since(start) > 100*time.Millisecond {
		t.Fatal("a hold outlives the server's shutdown")
	}
}
