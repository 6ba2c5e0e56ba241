package rollup

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/process"
	"svc/schema/erasure"
	"svc/schema/rollups"
)

// The completeness watermark's producer side (schema/rollups: IngestedThrough; the
// argument is in DESIGN.md). Every probeEvery, for the partitions this member owns:
//
//  1. S := now (this host's clock), then ask Kafka for every partition's high watermark
//     H. An acks=all acknowledgement is sent only once the high watermark passed the
//     record, so every record acknowledged (every 202 given) before S is below H.
//  2. Remember (S, H) for p.
//  3. Once every offset below H was flushed by this member (handled in a flush that
//     succeeded: stored, or skipped as stored, as a duplicate, as a dead letter), or
//     committed by any member before this one got p (commits follow flushes), publish
//     W_p = S − ClockMargin (raised, never lowered).
//
// A partition with nothing pending (H at or below what is flushed) gets W_p = S at the
// next probe: "now", as of the probe. A member that lost a partition stops probing it;
// what it published stays true. Nothing is published without Redis.
//
// A member that got partitions publishes nothing until every INSERT registered with the
// privacy fence at that moment, or left unsure, is over and repaired (passed): a
// previous owner killed as its INSERT was cut between the events part and the views'
// (erase.go) left events the read-back takes for stored, and rollups short of them
// until the privacy worker rebuilds them, once the registration lapses.

// probeEvery is how often the watermark is probed and published.
const probeEvery = 250 * time.Millisecond

// maxProbes bounds the pending probes of a partition; past it the newest replaces the
// last (the older ones are kept: they are the first to be passed).
const maxProbes = 64

type probe struct {
	at time.Time
	hw int64
}

// watermarks is one member's state of the watermark.
type watermarks struct {
	cfg   Config
	adm   *kadm.Client
	log   *slog.Logger
	topic string
	// visible, set on a replicated ClickHouse, says whether the rows flushed so far are
	// seen by every read of the rollups, whichever replica it goes to
	// (replicaReadBack.visible of watermarkTables): no mark is published until they are.
	// It reads every replica's replication state (ZooKeeper behind it), so it runs at
	// most every visibleEvery; checked is when it last ran (step's goroutine only).
	visible func(ctx context.Context) (bool, error)
	checked time.Time

	// fence is the privacy fence (nil without Redis); gate are the INSERTs passed waits
	// for (step's goroutine only), regate that partitions came since it was read.
	fence  *erasure.Fence
	gate   []string
	regate bool

	mu      sync.Mutex
	owned   map[int32]bool
	flushed map[int32]int64 // highest offset known flushed, per owned partition; absent: unknown
	probes  map[int32][]probe
	marks   map[int32]time.Time // to publish
	n       int
	label   string // the topic's incarnation label (incarnation.go): nothing is published before it is known
}

// setLabel records the topic's incarnation label, once the consumer read it.
func (w *watermarks) setLabel(l string) {
	w.mu.Lock()
	w.label = l
	w.mu.Unlock()
}

func newWatermarks(cfg Config, cl *kgo.Client, log *slog.Logger) *watermarks {
	w := &watermarks{cfg: cfg, adm: kadm.NewClient(cl), log: log, topic: cfg.Topic, owned: map[int32]bool{},
		flushed: map[int32]int64{}, probes: map[int32][]probe{}, marks: map[int32]time.Time{}}
	if cfg.Redis != nil {
		w.fence = erasure.NewFence(cfg.Redis, cfg.ClickHouse.Database)
	}
	return w
}

// own and disown follow the member's partitions.
func (w *watermarks) own(parts []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range parts {
		w.owned[p] = true
		delete(w.flushed, p)
		delete(w.probes, p)
	}
	w.regate = true
}

func (w *watermarks) disown(parts []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range parts {
		delete(w.owned, p)
		delete(w.flushed, p)
		delete(w.probes, p)
		delete(w.marks, p)
	}
}

// didFlush records that every offset up to handled[p] of each partition was flushed.
func (w *watermarks) didFlush(handled map[int32]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, o := range handled {
		if w.owned[p] {
			if cur, ok := w.flushed[p]; !ok || o > cur {
				w.flushed[p] = o
			}
		}
	}
	w.advance()
}

// advance turns passed probes into marks. mu must be held.
func (w *watermarks) advance() {
	for p, ps := range w.probes {
		f, ok := w.flushed[p]
		if !ok {
			continue
		}
		i := 0
		for ; i < len(ps) && ps[i].hw <= f+1; i++ {
			w.marks[p] = ps[i].at.Add(-rollups.ClockMargin)
		}
		w.probes[p] = ps[i:]
	}
}

// run probes and publishes until ctx ends.
func (w *watermarks) run(ctx context.Context) {
	if w.cfg.Redis == nil {
		return
	}
	process.Every(ctx, probeEvery, w.step, func(err error) { w.log.Debug("watermark probe", "err", err.Error()) })
}

func (w *watermarks) step(ctx context.Context) error {
	w.mu.Lock()
	var unknown []int32
	for p := range w.owned {
		if _, ok := w.flushed[p]; !ok {
			unknown = append(unknown, p)
		}
	}
	w.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Offsets committed before this member got a partition were flushed by the member
	// that committed them; without a commit the group starts at the log's start.
	var committed kadm.OffsetResponses
	var starts kadm.ListedOffsets
	if len(unknown) > 0 {
		var err error
		if committed, err = w.adm.FetchOffsets(qctx, w.cfg.Group); err != nil {
			return err
		}
		if starts, err = w.adm.ListStartOffsets(qctx, w.topic); err != nil {
			return err
		}
		if err := starts.Error(); err != nil {
			return err
		}
	}
	at := time.Now()
	ends, err := w.adm.ListEndOffsets(qctx, w.topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	w.mu.Lock()
	n := 0
	ends.Each(func(o kadm.ListedOffset) {
		n++
		if !w.owned[o.Partition] {
			return
		}
		ps := append(w.probes[o.Partition], probe{at: at, hw: o.Offset})
		if len(ps) > maxProbes {
			ps[maxProbes-1], ps = ps[maxProbes], ps[:maxProbes]
		}
		w.probes[o.Partition] = ps
	})
	for _, p := range unknown {
		from := int64(-1)
		if c, ok := committed.Lookup(w.topic, p); ok && c.Err == nil && c.At >= 0 {
			from = c.At
		} else if st, ok := starts.Lookup(w.topic, p); ok && st.Err == nil {
			from = st.Offset
		}
		if from < 0 || !w.owned[p] {
			continue
		}
		if cur, ok := w.flushed[p]; !ok || from-1 > cur {
			w.flushed[p] = from - 1
		}
	}
	w.n = n
	w.advance()
	marks, label := w.marks, w.label
	w.marks = map[int32]time.Time{}
	w.mu.Unlock()
	if len(marks) == 0 {
		return nil
	}
	if label == "" {
		w.keep(marks)
		return nil
	}
	if ok, err := w.passed(qctx); !ok {
		w.keep(marks)
		return err
	}
	if ok, err := w.ready(qctx); !ok {
		w.keep(marks)
		return err
	}
	if err := rollups.WatermarkRaise(qctx, w.cfg.Redis, w.cfg.ClickHouse.Database, label, n, marks); err != nil {
		w.keep(marks)
		return err
	}
	return nil
}

// passed says whether the INSERTs registered, or left unsure, when this member last got
// partitions are all over and need no repair (Fence.OpenNow, then Fence.Open). Step's
// goroutine only.
func (w *watermarks) passed(ctx context.Context) (bool, error) {
	if w.fence == nil {
		return true, nil
	}
	w.mu.Lock()
	regate := w.regate
	w.regate = false
	w.mu.Unlock()
	if regate {
		ids, err := w.fence.OpenNow(ctx)
		if err != nil {
			w.mu.Lock()
			w.regate = true
			w.mu.Unlock()
			return false, err
		}
		w.gate = append(w.gate, ids...)
	}
	if len(w.gate) == 0 {
		return true, nil
	}
	open, err := w.fence.Open(ctx, w.gate)
	if err != nil {
		return false, err
	}
	w.gate = open
	return len(open) == 0, nil
}

// keep puts back marks not published, for the next step (a partition's newer mark,
// found meanwhile, wins).
func (w *watermarks) keep(marks map[int32]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, t := range marks {
		if _, ok := w.marks[p]; !ok && w.owned[p] {
			w.marks[p] = t
		}
	}
}

// ready says whether the marks may be published now: always on one server; on a
// replicated ClickHouse when a visibility check started now (at most one every
// visibleEvery: the marks wait meanwhile, without an error) finds every replica caught
// up.
func (w *watermarks) ready(ctx context.Context) (bool, error) {
	if w.visible == nil {
		return true, nil
	}
	if time.Since(w.checked) < visibleEvery {
		return false, nil
	}
	w.checked = time.Now()
	ok, err := w.visible(ctx)
	if err == nil && !ok {
		err = errNotVisible
	}
	return err == nil, err
}

// visibleEvery bounds how often the replicas' state is read for the watermark.
const visibleEvery = time.Second

// errNotVisible: a replica has not caught up with the rollups' replication logs, or does
// not answer; the marks wait.
var errNotVisible = errors.New("a replica of the rollups is behind or does not answer: the watermark waits")

// watermarkTables are the tables GET /pixel-rollups reads (schema/rollups): UTC days and
// the quarter-hour buckets of the other zones.
var watermarkTables = []string{"pixel_rollups_daily", "pixel_rollups_15m"}
