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

// The inbound log's retention (Config.InboundRetention, 30 days by default).
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

// DropInboundBefore drops every month of webhook_inbound before the month of before
// and returns them (YYYYMM). Months are found through the plain table (Distributed
// when clustered: every shard's), dropped on the MergeTree tables.
func DropInboundBefore(ctx context.Context, conn driver.Conn, c chpool.Config, before time.Time) ([]uint32, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT toYYYYMM(received_at) AS m FROM "+c.Database+
		".webhook_inbound WHERE received_at < toDateTime("+strconv.FormatInt(before.Unix(), 10)+") ORDER BY m")
	if err != nil {
		return nil, err
	}
	var months []uint32
	for rows.Next() {
		var m uint32
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return nil, err
		}
		months = append(months, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, m := range months {
		if err := conn.Exec(ctx, dropMonthSQL(c, m)); err != nil {
			return months[:i], err
		}
	}
	return months, nil
}

// dropMonthSQL drops month (YYYYMM) of webhook_inbound: of the per-shard tables ON
// CLUSTER when the schema is clustered (a Distributed table has no partitions).
func dropMonthSQL(c chpool.Config, month uint32) string {
	alter := "ALTER TABLE " + c.Database + ".webhook_inbound"
	if c.Cluster != "" {
		alter += migrations.LocalSuffix + " ON CLUSTER " + c.Cluster
	}
	return alter + " DROP PARTITION " + strconv.FormatUint(uint64(month), 10)
}
