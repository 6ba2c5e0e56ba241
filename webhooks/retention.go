package webhooks

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/schema/migrations"
)

// The inbound log's retention (Config.InboundRetention, 30 days by default), and the
// accepted-minutes table's (acceptedMinutesKept) the alerts read.
//
// ClickHouse 18.16 has no table TTL (it came with 19.6; `TTL …` is a syntax error on
// 18.16, in CREATE and in ALTER), and the schema runs on 18.16 and on current releases
// alike, so the role removes old rows itself. webhook_inbound is partitioned by month
// (toYYYYMM(received_at)); a month is dropped once every row of it is older than the
// retention. DROP PARTITION is a metadata operation on every version (no part is
// rewritten, unlike a DELETE mutation) and replicates; in the clustered variant it runs
// ON CLUSTER on the per-shard tables. A row is kept at least the retention and at most
// a month longer.

// retentionEvery is how often the retention runs, across every process of the role
// (a claim in Redis, like the privacy worker's).
const retentionEvery = time.Hour

// inboundRetentionIfDue applies the retention if no process did within retentionEvery.
func (tr *Triggers) inboundRetentionIfDue(ctx context.Context) error {
	if tr.Config.InboundRetention <= 0 || tr.Conn == nil {
		return nil
	}
	st := tr.Emitter.Store
	ok, err := st.takeTurn(ctx, "inbound_retention", retentionEvery)
	if err != nil || !ok {
		return err
	}
	cut := FirstKeptMonth(tr.Now(), tr.Config.InboundRetention)
	months, err := DropInboundBefore(ctx, tr.Conn, tr.Config.ClickHouse, cut)
	if err != nil {
		st.giveTurnBack(context.WithoutCancel(ctx), "inbound_retention") // due again at the next scan
		return fmt.Errorf("inbound log retention: %w", err)
	}
	if len(months) > 0 {
		tr.Log.Info("inbound log retention: months dropped", "months", months, "kept_from", cut.Format("2006-01"))
	}
	return nil
}

// FirstKeptMonth is the first month of the inbound log kept at now: the month of
// now - retention (UTC). Every earlier month holds only rows older than the retention.
func FirstKeptMonth(now time.Time, retention time.Duration) time.Time {
	c := now.UTC().Add(-retention)
	return time.Date(c.Year(), c.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// acceptedMinutesKept is how long pixel_accepted_minutes keeps a day of reception: the
// alerts read at most the longest pixel.silent period back (workspace.MaxSilentAfter,
// 7 days), plus a week of margin.
const acceptedMinutesKept = 15 * 24 * time.Hour

// minutesRetentionIfDue drops the days of pixel_accepted_minutes older than
// acceptedMinutesKept, if no process did within retentionEvery.
func (tr *Triggers) minutesRetentionIfDue(ctx context.Context) error {
	if tr.Conn == nil {
		return nil
	}
	st := tr.Emitter.Store
	ok, err := st.takeTurn(ctx, "minutes_retention", retentionEvery)
	if err != nil || !ok {
		return err
	}
	c := tr.Now().UTC().Add(-acceptedMinutesKept)
	cut := time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, time.UTC)
	days, err := dropPartitionsBefore(ctx, tr.Conn, tr.Config.ClickHouse, acceptedMinutes, cut)
	if err != nil {
		st.giveTurnBack(context.WithoutCancel(ctx), "minutes_retention")
		return fmt.Errorf("accepted minutes retention: %w", err)
	}
	if len(days) > 0 {
		tr.Log.Info("accepted minutes retention: days dropped", "days", days, "kept_from", cut.Format(time.DateOnly))
	}
	return nil
}

// partitioned names a table partitioned by a function of a time column, for
// dropPartitionsBefore.
type partitioned struct{ table, key, column string }

var (
	inboundLog      = partitioned{"webhook_inbound", "toYYYYMM(received_at)", "received_at"}
	acceptedMinutes = partitioned{"pixel_accepted_minutes", "toYYYYMMDD(minute)", "minute"}
)

// DropInboundBefore drops every month of webhook_inbound before the month of before
// and returns them (YYYYMM).
func DropInboundBefore(ctx context.Context, conn driver.Conn, c chpool.Config, before time.Time) ([]uint32, error) {
	return dropPartitionsBefore(ctx, conn, c, inboundLog, before)
}

// dropPartitionsBefore drops every partition of t holding only rows before before (its
// key must be a function of the column that is monotonic, before at a partition's start)
// and returns them. Partitions are found through the plain table (Distributed when
// clustered: every shard's), dropped on the MergeTree tables.
func dropPartitionsBefore(ctx context.Context, conn driver.Conn, c chpool.Config, t partitioned, before time.Time) ([]uint32, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT "+t.key+" AS m FROM "+c.Database+"."+t.table+
		" WHERE "+t.column+" < toDateTime("+strconv.FormatInt(before.Unix(), 10)+") ORDER BY m")
	if err != nil {
		return nil, err
	}
	var parts []uint32
	for rows.Next() {
		var m uint32
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return nil, err
		}
		parts = append(parts, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, m := range parts {
		if err := conn.Exec(ctx, dropPartitionSQL(c, t.table, m)); err != nil {
			return parts[:i], err
		}
	}
	return parts, nil
}

// dropPartitionSQL drops partition id of table: of the per-shard tables ON CLUSTER when
// the schema is clustered (a Distributed table has no partitions).
func dropPartitionSQL(c chpool.Config, table string, id uint32) string {
	alter := "ALTER TABLE " + c.Database + "." + table
	if c.Cluster != "" {
		alter += migrations.LocalSuffix + " ON CLUSTER " + c.Cluster
	}
	return alter + " DROP PARTITION " + strconv.FormatUint(uint64(id), 10)
}
