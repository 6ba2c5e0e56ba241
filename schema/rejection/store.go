package rejection

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/schema/migrations"
)

// Table is the ClickHouse table of rejections (migrations/0050_rejections.sql).
const Table = "rejections"

var columns = []string{"workspace_id", "sandbox", "pixel_id", "minute", "received_at", "key_id", "request_id", "status",
	"batch_events", "event_index", "field", "rule", "value", "sample", "rejections", "inserted_at",
	"kafka_topic", "kafka_partition", "kafka_offset"}

// Row is one row of the table: a stored rejection (Sample) or a count of rejections
// not stored (Rejections of them, no index or value; a 202's carries its request id,
// key, size and second, a refused batch's none of them).
type Row struct {
	Workspace, Pixel, Key uuid.UUID
	Sandbox               bool
	ReceivedAt            time.Time // second precision; Minute derives from it
	RequestID             string
	Status                uint16
	BatchEvents           uint16
	Index                 int16
	Field, Rule, Value    string
	Sample                bool
	Rejections            uint32
	Partition             int32
	Offset                int64
}

// Minute is the UTC minute of a row's reception: the unit of the samples' cap.
func Minute(t time.Time) time.Time { return t.UTC().Truncate(time.Minute) }

// Insert writes rows with one INSERT (one block: one part, as they share inserted_at),
// labelled with topic (the Kafka topic's incarnation) and their Kafka positions. ctx
// carries the consumer's query id and settings.
func Insert(ctx context.Context, conn driver.Conn, topic string, insertedAt time.Time, rows []Row) error {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+Table+" ("+strings.Join(columns, ", ")+")")
	if err != nil {
		return fmt.Errorf("rejections: prepare insert: %w", err)
	}
	at := insertedAt.UTC().Truncate(time.Second)
	for i := range rows {
		r := &rows[i]
		if err := b.Append(r.Workspace, chpool.UInt8(r.Sandbox), r.Pixel, Minute(r.ReceivedAt), r.ReceivedAt.UTC(), r.Key, r.RequestID,
			r.Status, r.BatchEvents, r.Index, r.Field, r.Rule, r.Value, chpool.UInt8(r.Sample), r.Rejections, at,
			topic, r.Partition, r.Offset); err != nil {
			_ = b.Abort()
			return fmt.Errorf("rejections: append row: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("rejections: insert: %w", err)
	}
	return nil
}

// PixelMinute names the unit of the samples' cap.
type PixelMinute struct {
	Pixel  uuid.UUID
	Minute int64 // unix seconds of the minute's start
}

// StoredSamples returns how many samples the table holds for each of keys (absent:
// none).
func StoredSamples(ctx context.Context, conn driver.Conn, keys []PixelMinute) (map[PixelMinute]int, error) {
	out := map[PixelMinute]int{}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		tuples := make([]string, n)
		for i, k := range keys[:n] {
			// Both parts are ours (a UUID's text and an integer): no quoting issue.
			tuples[i] = "(toUUID('" + k.Pixel.String() + "'), toDateTime(" + strconv.FormatInt(k.Minute, 10) + ", 'UTC'))"
		}
		keys = keys[n:]
		rows, err := conn.Query(ctx, "SELECT pixel_id, toUnixTimestamp(minute), count() FROM "+Table+
			" WHERE sample = 1 AND (pixel_id, minute) IN ("+strings.Join(tuples, ", ")+") GROUP BY pixel_id, minute")
		if err != nil {
			return nil, fmt.Errorf("rejections: read stored samples: %w", err)
		}
		for rows.Next() {
			var k PixelMinute
			var m uint32
			var c uint64
			if err := rows.Scan(&k.Pixel, &m, &c); err != nil {
				rows.Close()
				return nil, err
			}
			k.Minute = int64(m)
			out[k] = int(c)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FirstKeptDay is the first UTC day of rows kept at now under retention: a day is
// dropped once every row of it was stored more than retention and a day ago. The day
// more is for the oldest local day GET /pixels shows (31 days with the default 30 of
// retention): in a zone ahead of UTC it begins the UTC day before, and its rejections
// must all be kept for its counts to be exact.
func FirstKeptDay(now time.Time, retention time.Duration) time.Time {
	c := now.UTC().Add(-retention - 24*time.Hour)
	return time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, time.UTC)
}

// DropBefore drops every day (partition YYYYMMDD of inserted_at) of the table before
// the day of before and returns them. ClickHouse 18.16 has no TTL: DROP PARTITION is a
// metadata operation on every version and replicates; clustered, it runs ON CLUSTER on
// the per-shard tables (a Distributed table has no partitions).
func DropBefore(ctx context.Context, conn driver.Conn, c chpool.Config, before time.Time) ([]uint32, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT toYYYYMMDD(inserted_at) AS d FROM "+c.Database+"."+Table+
		" WHERE inserted_at < toDateTime("+strconv.FormatInt(before.Unix(), 10)+") ORDER BY d")
	if err != nil {
		return nil, err
	}
	var days []uint32
	for rows.Next() {
		var d uint32
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return nil, err
		}
		days = append(days, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, d := range days {
		alter := "ALTER TABLE " + c.Database + "." + Table
		if c.Cluster != "" {
			alter += migrations.LocalSuffix + " ON CLUSTER " + c.Cluster
		}
		if err := conn.Exec(ctx, alter+" DROP PARTITION "+strconv.FormatUint(uint64(d), 10)); err != nil {
			return days[:i], err
		}
	}
	return days, nil
}
