package rollup

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/api"
	"svc/ingest"
	"svc/lib/apikey"
	"svc/lib/kafkabroker"
	"svc/lib/limits"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// sent is one batch the edge answered 202: its event name and when the answer arrived
// (the edge sent it earlier).
type sent struct {
	name string
	at   time.Time
}

// TestIngestedThroughHoldsAcrossAConsumerKill sends batches through the edge without
// pause while GET /pixel-rollups is read in a loop, and kills the consumer between an
// INSERT and its commit, then starts another: every answer's meta.ingested_through T
// must be true, i.e. every batch whose 202 arrived before T is in that answer's numbers,
// before the kill, while no consumer runs, and after; and T must pass the last 202 once
// sending stops.
func TestIngestedThroughHoldsAcrossAConsumerKill(t *testing.T) {
	w := newWorld(t, 4)
	rdb := svctest.Redis(t)
	icfg := ingest.Config{DeliveryTimeout: 5 * time.Second, MaxBufferedRecords: 1000, Linger: time.Millisecond}
	producer, err := ingest.NewProducer(kafkabroker.Config{Brokers: w.seeds}, w.seeds, icfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	edge := ingest.NewEdge(icfg, producer, workspace.NewStore(rdb), prometheus.NewRegistry())
	a := &api.API{Conn: w.conn, Database: w.ch.Database}
	s := apitest.Start(t, append(edge.Routes(), a.Routes()...), nil)
	a.Keys = s.Keys
	ws := s.Workspace(t, false)
	px := s.Pixel(t, ws.ID)
	_, secret := s.Key(t, workspace.KeySpec{WorkspaceID: ws.ID, Env: apikey.Live, Burst: 1 << 20, Daily: limits.MaxQuota})
	pixelID := "pxl_" + px.ID.String()

	var mu sync.Mutex
	var done []sent
	stopSending := make(chan struct{})
	var stopOnce sync.Once
	var senders sync.WaitGroup
	halt := func() { stopOnce.Do(func() { close(stopSending) }); senders.Wait() }
	t.Cleanup(halt)
	senders.Add(1)
	go func() {
		defer senders.Done()
		for i := 0; ; i++ {
			select {
			case <-stopSending:
				return
			default:
			}
			name := fmt.Sprintf("w%05d", i)
			ev := fmt.Sprintf(`{"event_name":%q,"occurred_at":%q,"consent":{"measurement":true}}`, name, time.Now().UTC().Add(-time.Second).Format(time.RFC3339))
			r := s.Do(t, "POST", "/events", secret, `{"pixel_id":"`+pixelID+`","events":[`+strings.Repeat(ev+",", 2)+ev+`]}`)
			if r.Status != 202 {
				t.Errorf("POST /events: %d %s", r.Status, r.Body)
				return
			}
			mu.Lock()
			done = append(done, sent{name, time.Now()})
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// check reads the rollups once and verifies the claim; it returns the claimed
	// instant (zero: none) and how many batches it covered.
	check := func() (time.Time, int) {
		mu.Lock()
		before := append([]sent(nil), done...)
		mu.Unlock()
		r := s.Do(t, "GET", "/pixel-rollups?limit=1000&pixel_id="+pixelID, secret, "")
		if r.Status != 200 {
			t.Fatalf("GET /pixel-rollups: %d %s", r.Status, r.Body)
		}
		var page struct {
			Data []struct {
				EventName string `json:"event_name"`
				Events    int    `json:"events"`
			} `json:"data"`
			Meta map[string]any `json:"meta"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		raw, ok := page.Meta["ingested_through"]
		if !ok {
			t.Fatalf("no meta.ingested_through: %s", r.Body[:min(len(r.Body), 300)])
		}
		if raw == nil {
			return time.Time{}, 0
		}
		at, err := time.Parse(time.RFC3339Nano, raw.(string))
		if err != nil {
			t.Fatalf("ingested_through %v: %v", raw, err)
		}
		counts := map[string]int{}
		for _, d := range page.Data {
			counts[d.EventName] += d.Events
		}
		covered := 0
		for _, b := range before {
			if b.at.Before(at) {
				covered++
				if counts[b.name] != 3 {
					t.Fatalf("ingested_through %s, but batch %s (202 received %s) counts %d events of 3",
						at.Format(time.RFC3339Nano), b.name, b.at.Format(time.RFC3339Nano), counts[b.name])
				}
			}
		}
		return at, covered
	}
	checkFor := func(d time.Duration) (claims, most int) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			if at, n := check(); !at.IsZero() {
				claims++
				most = max(most, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return claims, most
	}

	// Flushes 600 ms apart: records wait for their INSERT long enough that a claim made
	// from anything but what was flushed would cover some (the check would catch it).
	cfg := w.config("g-wm")
	cfg.Redis, cfg.BatchInterval = rdb, 600*time.Millisecond
	var armed, killed atomic.Bool
	cfg.testAfterInsert = func() error {
		if armed.Load() {
			killed.Store(true)
			return errors.New("killed")
		}
		return nil
	}
	stop := w.start(cfg)
	claims, covered := checkFor(2 * time.Second)
	armed.Store(true) // the next INSERT lands and is never committed: its member dies
	svctest.WaitFor(t, 10*time.Second, "the consumer killed after an INSERT", killed.Load)
	stopKilled(t, stop)
	if claims == 0 || covered == 0 {
		t.Fatalf("before the kill: %d answers claimed an instant, covering at most %d batches", claims, covered)
	}
	checkFor(time.Second) // no consumer: the claim must not move past what is stored
	cfg2 := w.config("g-wm")
	cfg2.Redis, cfg2.BatchInterval = rdb, 600*time.Millisecond
	w.start(cfg2)
	claims, covered2 := checkFor(3 * time.Second)
	if claims == 0 || covered2 <= covered {
		t.Fatalf("after the restart: %d claims, covering at most %d batches (%d before the kill)", claims, covered2, covered)
	}
	halt()
	mu.Lock()
	last := done[len(done)-1]
	total := len(done)
	mu.Unlock()
	var at time.Time
	var n int
	svctest.WaitFor(t, 20*time.Second, "ingested_through past the last 202", func() bool {
		at, n = check()
		return at.After(last.at)
	})
	if n != total {
		t.Fatalf("the final claim covers %d batches of %d", n, total)
	}
}
