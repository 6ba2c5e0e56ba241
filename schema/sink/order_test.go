package sink

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/schema"
	"svc/schema/chtest"
)

// orderUUIDs are UUIDs that tell ClickHouse's order from others: one byte set in either
// half, at either end of it, low and high.
func orderUUIDs() []schema.UUID {
	out := []schema.UUID{{}}
	for _, at := range []int{0, 7, 8, 15} {
		for _, v := range []byte{0x01, 0x80, 0xff} {
			var u schema.UUID
			u[at] = v
			out = append(out, u)
		}
	}
	return out
}

// orderTestBatches is records in no order of the sorting key: workspaces and pixels of
// orderUUIDs, both environments, dates over three days and event names (names of
// events: names first, then up to extra more of the form "n<k>").
func orderTestBatches(records, extra int) []schema.Batch {
	r := rand.New(rand.NewPCG(1, 2))
	ids := orderUUIDs()
	names := []string{"", "A", "a", "ab", "abc", "b", "purchase", "Purchase", "page_view", "é", "z"}
	for k := range extra {
		names = append(names, fmt.Sprintf("n%d", k))
	}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	out := make([]schema.Batch, records)
	for i := range out {
		b := &out[i]
		b.Workspace, b.Pixel, b.Sandbox = ids[r.IntN(len(ids))], ids[r.IntN(len(ids))], r.IntN(2) == 1
		b.ReceivedAt, b.RequestID = day.Add(72*time.Hour).UnixMilli(), fmt.Sprintf("req_%d", i)
		for range 1 + r.IntN(4) {
			e := schema.Event{Name: names[r.IntN(len(names))], OccurredAt: day.Add(time.Duration(r.IntN(72)) * time.Hour).UnixMilli()}
			e.ID[0] = byte(len(b.Events))
			b.Events = append(b.Events, e)
		}
	}
	return out
}

// keyRows is the buffered rows' sorting keys with their positions (kafka_offset,
// batch_index), as the text keySQL selects, in the buffer's order.
func keyRows(c *sinkColumns) []string {
	out := make([]string, 0, len(c.offset))
	for i := range c.offset {
		p := c.name.Pos[i]
		out = append(out, strings.Join([]string{uuid.UUID(c.workspace[i]).String(), fmt.Sprint(c.sandbox[i]), uuid.UUID(c.pixel[i]).String(),
			c.date[i].Time().Format("2006-01-02"), string(c.name.Buf[p.Start:p.End]), fmt.Sprint(c.offset[i]), fmt.Sprint(c.batchIndex[i])}, "|"))
	}
	return out
}

// keySQL selects what keyRows renders, in the order of the events table's sorting key
// (then kafka_offset, batch_index), from table.
func keySQL(table string) string {
	return `SELECT concat(toString(workspace_id), '|', toString(sandbox), '|', toString(pixel_id), '|', toString(event_date), '|',
		event_name, '|', toString(kafka_offset), '|', toString(batch_index)) FROM ` + table +
		" ORDER BY workspace_id, sandbox, pixel_id, event_date, event_name, kafka_offset, batch_index"
}

// TestOrderIsClickHouses: a flush hands ClickHouse its rows in the order ClickHouse's
// own ORDER BY of the events table's sorting key gives them (rows of one key in the
// order they were buffered, here kafka_offset, batch_index), on the local server and
// on ClickHouse 26.x (chDB), so that both find the block sorted and skip their sort.
// With few distinct keys the sink sorts by counting, with many by comparison; rows in
// order already are left as they are.
func TestOrderIsClickHouses(t *testing.T) {
	_, conn := chtest.NewDB(t)
	chdb := chtest.NewChDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		records, extra int
	}{{"counting", 400, 0}, {"comparison", 300, 3000}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := conn.Exec(ctx, "TRUNCATE TABLE events"); err != nil {
				t.Fatal(err)
			}
			s := New(conn, "events", schema.TopicEvents)
			batches := orderTestBatches(tc.records, tc.extra)
			for i := range batches {
				s.Add(&batches[i], 0, int64(i))
			}
			buffered := keyRows(&s.c)
			if n := len(buffered); (combos(buffered) > 2*n+1<<16) != (tc.extra > 0) {
				t.Fatalf("%d rows of %d combinations of keys: not the case %s", n, combos(buffered), tc.name)
			}
			if err := s.Flush(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			sorted := keyRows(&s.c)
			if slices.Equal(sorted, buffered) {
				t.Fatal("the flush did not reorder the rows")
			}
			if s.order.order(&s.c) != nil {
				t.Error("rows in order sorted again")
			}
			var local []string
			rows, err := conn.Query(ctx, keySQL("events"))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var r string
				if err := rows.Scan(&r); err != nil {
					t.Fatal(err)
				}
				local = append(local, r)
			}
			if d := diffRows(local, sorted); d != "" {
				t.Errorf("the sink's order is not the local server's ORDER BY:\n%s", d)
			}
			if d := diffRows(chdbOrder(t, chdb, buffered), sorted); d != "" {
				t.Errorf("the sink's order is not ClickHouse %s's ORDER BY:\n%s", chdb.Version(), d)
			}
		})
	}
}

// combos is the number of combinations of the rows' distinct (workspace, sandbox,
// pixel), dates and names: what decides the sink's way of sorting.
func combos(rows []string) int {
	groups, dates, names := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		f := strings.Split(r, "|")
		groups[f[0]+f[1]+f[2]], dates[f[3]], names[f[4]] = true, true, true
	}
	return len(groups) * len(dates) * len(names)
}

// chdbOrder is ClickHouse 26.x's ORDER BY of rows (keyRows).
func chdbOrder(t *testing.T, chdb *chtest.ChDB, rows []string) []string {
	t.Helper()
	values := make([]string, len(rows))
	for i, r := range rows {
		f := strings.Split(r, "|")
		values[i] = fmt.Sprintf("(toUUID('%s'), %s, toUUID('%s'), toDate('%s'), '%s', %s, %s)", f[0], f[1], f[2], f[3], f[4], f[5], f[6])
	}
	if err := chdb.Exec("DROP TABLE IF EXISTS sink_order",
		`CREATE TABLE sink_order (workspace_id UUID, sandbox UInt8, pixel_id UUID, event_date Date, event_name String,
			kafka_offset Int64, batch_index UInt8) ENGINE = Memory`,
		"INSERT INTO sink_order VALUES "+strings.Join(values, ", ")); err != nil {
		t.Fatal(err)
	}
	tab, err := chdb.Query(keySQL("sink_order"))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(tab.Rows))
	for i, r := range tab.Rows {
		out[i] = r[0]
	}
	return out
}

// diffRows describes the first rows where got differs from want, or is "".
func diffRows(want, got []string) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	var out []string
	for i := range want {
		if want[i] != got[i] && len(out) < 5 {
			out = append(out, fmt.Sprintf("row %d: %s, want %s", i, got[i], want[i]))
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkSinkSortRows is what sorting costs a flush of 200,000 rows (4,000 records of
// 50 events, 7 pixels, 3 event names, dates over a minute: chtest.Batches), per row:
// the permutation and every column gathered in its order. ClickHouse's own sort of the
// same rows, which it then skips, cost it several times that (order.go).
//
//	go test -run '^$' -bench SinkSortRows ./schema/sink/
func BenchmarkSinkSortRows(b *testing.B) {
	s := New(nil, "events", schema.TopicEvents)
	batches := chtest.Batches(4000)
	for i := range batches {
		s.Add(&batches[i], int32(i%8), int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := s.sortRows(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.c, s.spare = s.spare, s.c // the rows as they came, for the next round
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(s.Len()), "ns/row")
}
