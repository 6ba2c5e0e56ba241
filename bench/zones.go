package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/lib/paging"
	"svc/lib/settings"
	"svc/schema"
	"svc/schema/migrations"
	"svc/schema/rollups"
	"svc/schema/sink"
)

// zonesMain is `svc bench zones`: what local-day rollups cost (issue 16), measured on
// ClickHouse alone, in two scratch databases dropped at the end:
//
//   - "after" has the service's event schema (events, pixel_rollups_daily and
//     pixel_rollups_15m with their views); "before" lacks pixel_rollups_15m.
//   - rows per pixel-day: -pixels × -days days of -events-per-day events each, spread
//     evenly over every UTC day, written through the consumer's Sink into "after"; then
//     the distinct keys of each rollup table (the rows once merges are done).
//   - read latency: rollups.QueryDaily over the -days days of one pixel (the first page of
//     -limit rows, max_threads 1 as the read API runs it), -reads times per variant,
//     sequentially.
//   - flush cost: -rounds rounds alternating "before" and "after", each -flushes
//     Sink flushes of -flush-rows fresh events (as the consumer flushes them): insert wall
//     time, and the CPU of the ClickHouse process listening on SVC_CLICKHOUSE_ADDR's port
//     (from /proc) from the first insert until -settle after the last, which takes in the
//     background merges the inserts caused. On a ClickHouse others use too, their queries
//     count: point SVC_CLICKHOUSE_ADDR at a private server for a clean figure.
func zonesMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench zones", flag.ContinueOnError)
	pixels := fs.Int("pixels", 4, "pixels seeded")
	days := fs.Int("days", 90, "days seeded per pixel (and read)")
	perDay := fs.Int("events-per-day", 2000, "events per pixel and day, spread evenly over the UTC day")
	reads := fs.Int("reads", 200, "reads per variant")
	limit := fs.Int("limit", 100, "rows per read (the API's page size: default 100, at most 1000)")
	flushRows := fs.Int("flush-rows", 200000, "rows per flush (the consumer's SVC_ROLLUP_BATCH_ROWS)")
	flushes := fs.Int("flushes", 5, "flushes per round")
	rounds := fs.Int("rounds", 2, "rounds per schema, alternating")
	settle := fs.Duration("settle", 5*time.Second, "how long after a round's last flush its CPU is still counted (merges)")
	keep := fs.Bool("keep", false, "keep the scratch databases")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pixels < 1 || *days < 1 || *perDay < 1 || *reads < 1 || *flushRows < 50 || *flushes < 1 || *rounds < 1 ||
		*limit < 1 || *limit > paging.MaxLimit {
		return errors.New("every count must be positive (-flush-rows at least 50, -limit at most 1000)")
	}
	r := settings.New()
	cfg := chpool.ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	run := runID()
	before, err := zonesDB(ctx, cfg, "bench_zones_before_"+run, 3, *keep)
	if err != nil {
		return err
	}
	defer before.close()
	after, err := zonesDB(ctx, cfg, "bench_zones_after_"+run, 4, *keep)
	if err != nil {
		return err
	}
	defer after.close()
	chPID := 0
	if _, port, err := net.SplitHostPort(cfg.Addr); err == nil {
		if n, err := strconv.Atoi(port); err == nil {
			chPID = listenerPID(n)
		}
	}
	if chPID == 0 {
		return fmt.Errorf("no process of this user listens on %s: cannot measure ClickHouse's CPU", cfg.Addr)
	}
	m := DescribeMachine("")
	fmt.Printf("bench zones on %s: %d cores, %s, load %v; ClickHouse and the machine are shared\n", m.Host, m.Cores, m.CPUModel, m.Load)

	ws, pix := schema.UUID{0xb1}, make([]schema.UUID, *pixels)
	for i := range pix {
		pix[i] = schema.UUID{0xb2, byte(i)}
	}
	today := rollups.LocalDate(time.Now(), time.UTC)
	first := today.AddDate(0, 0, -(*days - 1))
	start := time.Now()
	if err := seedZones(ctx, after.conn, ws, pix, first, *days, *perDay); err != nil {
		return err
	}
	fmt.Printf("seeded %d pixels × %d days × %d events in %s\n", *pixels, *days, *perDay, time.Since(start).Round(time.Millisecond))
	for _, t := range []string{"pixel_rollups_daily", "pixel_rollups_15m"} {
		key := map[string]string{"pixel_rollups_daily": "event_date", "pixel_rollups_15m": "bucket"}[t]
		var n uint64
		q := "SELECT count() FROM (SELECT 1 FROM " + t + " GROUP BY sandbox, pixel_id, " + key + ", event_name, currency)"
		if err := after.conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return err
		}
		fmt.Printf("rows per pixel-day, %s: %.1f (%d rows)\n", t, float64(n)/float64(*pixels**days), n)
	}

	for _, v := range []struct {
		name, zone string
		buckets    bool
	}{{"UTC, daily table", "UTC", false}, {"UTC, 15-minute table", "UTC", true},
		{"Asia/Kathmandu", "Asia/Kathmandu", false}, {"America/New_York", "America/New_York", false}} {
		q := rollups.DailyQuery{Workspace: ws, Pixel: pix[0], TimeZone: v.zone, Buckets: v.buckets,
			From: first, To: today, Limit: *limit}
		lat, rows, err := zonesReads(ctx, after.conn, q, *reads)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Printf("read %d days of one pixel, %-22s first %d rows: p50 %s  p99 %s  max %s  (%d reads)\n", *days, v.name+":",
			rows, quantileMS(lat, 0.5), quantileMS(lat, 0.99), quantileMS(lat, 1), len(lat))
	}

	cost := map[string]*flushCost{"before": {}, "after": {}}
	for round := 0; round < *rounds; round++ {
		for _, d := range []*zonesScratch{before, after} {
			c, err := zonesFlushRound(ctx, d.conn, chPID, *flushes, *flushRows, *settle, uint64(round))
			if err != nil {
				return err
			}
			cost[d.label].add(c)
		}
	}
	for _, label := range []string{"before", "after"} {
		c := cost[label]
		fmt.Printf("flush %-6s (%s): %d events, insert %.2f µs/event, ClickHouse CPU %.2f µs/event, other processes %.2f cores\n",
			label, map[string]string{"before": "no pixel_rollups_15m", "after": "with pixel_rollups_15m"}[label],
			c.events, c.insert.Seconds()*1e6/float64(c.events), c.chCPU*1e6/float64(c.events), c.other/float64(c.rounds))
	}
	return nil
}

// zonesScratch is one scratch database and a connection to it.
type zonesScratch struct {
	label string
	name  string
	conn  driver.Conn
	admin driver.Conn
	keep  bool
}

// zonesDB creates database name with the migrations up to version upTo and opens it.
func zonesDB(ctx context.Context, cfg chpool.Config, name string, upTo int, keep bool) (*zonesScratch, error) {
	ms, err := migrations.Migrations()
	if err != nil {
		return nil, err
	}
	ms = slices.DeleteFunc(ms, func(m migrations.Migration) bool { return m.Version > upTo })
	boot, steps, err := migrations.Plan(ms, name, "")
	if err != nil {
		return nil, err
	}
	adminCfg := cfg
	adminCfg.Database, adminCfg.Cluster = "default", ""
	admin, err := chpool.Open(ctx, adminCfg)
	if err != nil {
		return nil, err
	}
	for _, s := range boot[:1] { // the database; the migrations table is not needed
		if err := admin.Exec(ctx, s); err != nil {
			admin.Close()
			return nil, err
		}
	}
	for _, st := range steps {
		for _, s := range st.Statements {
			if err := admin.Exec(ctx, s); err != nil {
				admin.Close()
				return nil, fmt.Errorf("%s: %w", st.Name, err)
			}
		}
	}
	cfg.Database, cfg.Cluster = name, ""
	conn, err := chpool.Open(ctx, cfg)
	if err != nil {
		admin.Close()
		return nil, err
	}
	label := map[bool]string{true: "after", false: "before"}[upTo >= 4]
	return &zonesScratch{label: label, name: name, conn: conn, admin: admin, keep: keep}, nil
}

func (z *zonesScratch) close() {
	z.conn.Close()
	if !z.keep {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := z.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+z.name); err != nil {
			fmt.Printf("cleanup: DROP DATABASE %s: %v (drop it by hand)\n", z.name, err)
		}
	}
	z.admin.Close()
}

var zonesCurrencies = [][3]byte{{}, {'E', 'U', 'R'}, {'U', 'S', 'D'}}

// zonesEvent is the i-th event of a generated stream: names and currencies cycle, one
// of 500 people, consented.
func zonesEvent(i int, at time.Time) schema.Event {
	e := schema.Event{Name: eventNames[i%len(eventNames)], OccurredAt: at.UnixMilli(), Consent: true, HasEmail: true,
		Currency: zonesCurrencies[(i/len(eventNames))%len(zonesCurrencies)]}
	if e.Currency != ([3]byte{}) {
		e.HasValue, e.Value = true, int64(10000+i%5000)
	}
	e.EmailSHA = sha256.Sum256([]byte("person" + strconv.Itoa(i%500)))
	return e
}

// seedZones writes perDay events per pixel and day, evenly spread over each UTC day,
// through the consumer's Sink (one INSERT per 200,000 rows).
func seedZones(ctx context.Context, conn driver.Conn, ws schema.UUID, pix []schema.UUID, first time.Time, days, perDay int) error {
	s := sink.New(conn, "events", "bench-seed")
	var off int64
	flush := func() error {
		err := s.Flush(ctx, time.Now())
		s.Reset()
		return err
	}
	step := 24 * time.Hour / time.Duration(perDay)
	for _, p := range pix {
		for d := 0; d < days; d++ {
			day := first.AddDate(0, 0, d)
			b := schema.Batch{Workspace: ws, Pixel: p, ReceivedAt: time.Now().UnixMilli()}
			for i := 0; i < perDay; i++ {
				b.Events = append(b.Events, zonesEvent(i, day.Add(time.Duration(i)*step)))
				if len(b.Events) == 50 || i == perDay-1 {
					off++
					s.Add(&b, 0, off)
					b.Events = nil
				}
			}
			if s.Len() >= 200000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// zonesReads runs q n times and returns the latencies, sorted, and the rows of a read.
func zonesReads(ctx context.Context, conn driver.Conn, q rollups.DailyQuery, n int) ([]time.Duration, int, error) {
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_threads": 1}))
	lat := make([]time.Duration, 0, n)
	rows := 0
	for i := 0; i < n; i++ {
		t := time.Now()
		rs, err := rollups.QueryDaily(ctx, conn, q)
		if err != nil {
			return nil, 0, err
		}
		lat, rows = append(lat, time.Since(t)), len(rs)
	}
	slices.Sort(lat)
	return lat, rows, nil
}

// quantileMS is the q-quantile of sorted latencies, in milliseconds.
func quantileMS(sorted []time.Duration, q float64) string {
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return strconv.FormatFloat(float64(sorted[i].Microseconds())/1000, 'f', 2, 64) + " ms"
}

// flushCost sums the rounds of one schema.
type flushCost struct {
	rounds int
	events int
	insert time.Duration
	chCPU  float64 // ClickHouse CPU-seconds
	other  float64 // cores used by processes other than ClickHouse and this one
}

func (c *flushCost) add(o flushCost) {
	c.rounds++
	c.events += o.events
	c.insert += o.insert
	c.chCPU += o.chCPU
	c.other += o.other
}

// zonesFlushRound flushes n batches of rows fresh events (16 pixels; occurred within the
// last two minutes, one in twenty up to three days late) into conn's events table.
func zonesFlushRound(ctx context.Context, conn driver.Conn, chPID, n, rows int, settle time.Duration, seed uint64) (flushCost, error) {
	rng := rand.New(rand.NewPCG(seed, 16))
	s := sink.New(conn, "events", "bench-flush")
	ws := schema.UUID{0xb3}
	var c flushCost
	a, chA := readCPU(), pidCPU(chPID)
	for f := 0; f < n; f++ {
		now := time.Now()
		for off := int64(0); s.Len() < rows; off++ {
			b := schema.Batch{Workspace: ws, Pixel: schema.UUID{0xb4, byte(rng.IntN(16))}, ReceivedAt: now.UnixMilli()}
			for i := 0; i < 50; i++ {
				at := now.Add(-time.Duration(rng.Int64N(int64(2 * time.Minute))))
				if rng.IntN(20) == 0 {
					at = now.Add(-time.Duration(rng.Int64N(int64(72 * time.Hour))))
				}
				b.Events = append(b.Events, zonesEvent(rng.IntN(1<<20), at))
			}
			s.Add(&b, 0, int64(f)*1e9+off)
		}
		c.events += s.Len()
		t := time.Now()
		if err := s.Flush(ctx, now); err != nil {
			return c, err
		}
		c.insert += time.Since(t)
		s.Reset()
	}
	time.Sleep(settle)
	b, chB := readCPU(), pidCPU(chPID)
	c.chCPU = chB - chA
	if cpu := cpuBetween(a, b); cpu != nil {
		c.other = max(0, cpu.Busy-c.chCPU/b.at.Sub(a.at).Seconds()-cpu.Procs["bench"])
	}
	return c, nil
}

// pidCPU is the CPU-seconds (user + system) process pid has used.
func pidCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	close := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[close+1:]))
	if close < 0 || len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clkTck
}
