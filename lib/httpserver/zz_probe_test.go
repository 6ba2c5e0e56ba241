package httpserver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/schema/apitest"
)

func TestZZProbe(t *testing.T) {
	ctx := context.Background()
	rdb := apitest.Redis(t)
	store := idempotency.New(rdb)
	kid := uuid.NewString()
	fp := idempotency.Fingerprint("POST", "/events", []byte(kid))
	st := idempotency.Stored{Status: 201, ContentType: "application/json", Body: []byte(`{"request_id":"req_2f4c5d8e9a1b3c7d"}`)}
	l := limits.New(rdb)
	b, d := limits.Windows(1_000_000, 1_000_000_000)
	const n = 3000
	m := func(name string, f func(i int)) {
		before := topLevelMicros(t, rdb)
		for i := range n {
			f(i)
		}
		after := topLevelMicros(t, rdb)
		t.Logf("%s: %.2f us/call", name, (after.us-before.us)/(after.calls-before.calls))
	}
	for round := 0; round < 2; round++ {
		m("take", func(i int) { l.Take(ctx, kid, b, d) })
		m("reserve", func(i int) {
			store.Reserve(ctx, kid, "k"+strconv.Itoa(round)+"-"+strconv.Itoa(i), fp, 7*time.Second, "r")
		})
		m("complete", func(i int) { store.Complete(ctx, kid, "k"+strconv.Itoa(round)+"-"+strconv.Itoa(i), fp, st) })
	}
}
