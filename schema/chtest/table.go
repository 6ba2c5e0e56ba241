package chtest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// Table is a query's answer in a form that compares across server versions: each
// value as ClickHouse's text of it, except numbers of a Decimal type, which are
// compared as numbers (toString of a Decimal(18, 4) 12.5 is 12.5000 on 18.16 and 12.5
// on 26.x; both are 12.5 here). Names are kept for messages only: a server names an
// unnamed expression its own way.
type Table struct {
	Names, Types []string
	Rows         [][]string
}

// Diff describes how b differs from a (column types and rows), or is "" when they are
// equal.
func Diff(a, b Table) string {
	var out []string
	if strings.Join(a.Types, ", ") != strings.Join(b.Types, ", ") {
		out = append(out, fmt.Sprintf("types %v, want %v", b.Types, a.Types))
	}
	for i := 0; i < max(len(a.Rows), len(b.Rows)); i++ {
		var ra, rb []string
		if i < len(a.Rows) {
			ra = a.Rows[i]
		}
		if i < len(b.Rows) {
			rb = b.Rows[i]
		}
		if strings.Join(ra, "\t") != strings.Join(rb, "\t") {
			out = append(out, fmt.Sprintf("row %d: %q, want %q", i, rb, ra))
		}
	}
	return strings.Join(out, "\n")
}

// Sorted returns t with its rows in text order: for an answer whose order the
// statement leaves open (no ORDER BY).
func (t Table) Sorted() Table {
	rows := slices.Clone(t.Rows)
	slices.SortFunc(rows, func(a, b []string) int { return slices.Compare(a, b) })
	t.Rows = rows
	return t
}

// canonical is text v of a value of ClickHouse type typ, decimals as numbers.
func canonical(typ, v string) string {
	if strings.HasPrefix(typ, "Decimal") {
		if d, err := decimal.NewFromString(v); err == nil {
			return d.String()
		}
	}
	return v
}

// QueryTable runs sql with args on conn and returns its answer as a Table.
func QueryTable(ctx context.Context, conn driver.Conn, sql string, args ...any) (Table, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return Table{}, err
	}
	defer rows.Close()
	var t Table
	cts := rows.ColumnTypes()
	for _, ct := range cts {
		t.Names = append(t.Names, ct.Name())
		t.Types = append(t.Types, ct.DatabaseTypeName())
	}
	for rows.Next() {
		vals := make([]any, len(cts))
		for i, ct := range cts {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			return Table{}, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = canonical(t.Types[i], text(t.Types[i], reflect.ValueOf(v).Elem().Interface()))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, rows.Err()
}

// text is ClickHouse's TabSeparated text of v, a value of type typ as clickhouse-go
// scans it.
func text(typ string, v any) string {
	switch x := v.(type) {
	case decimal.Decimal:
		return x.String()
	case time.Time:
		if strings.HasPrefix(typ, "DateTime") {
			return x.Format("2006-01-02 15:04:05")
		}
		return x.Format("2006-01-02")
	case uuid.UUID:
		return x.String()
	case string:
		return x
	case []byte:
		return string(x)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return `\N`
		}
		return text(typ, rv.Elem().Interface())
	}
	return fmt.Sprint(v)
}

// Bind returns sql with each ? outside quotes replaced by the literal of the next of
// args, as clickhouse-go binds them: strings quoted, integers as numbers. It is how a
// statement the service sent through clickhouse-go is run on chDB.
func Bind(sql string, args ...any) (string, error) {
	var b strings.Builder
	n := 0
	quote := byte(0)
	for i := 0; i < len(sql); i++ {
		ch := sql[i]
		switch {
		case quote != 0:
			b.WriteByte(ch)
			if ch == '\\' && i+1 < len(sql) {
				i++
				b.WriteByte(sql[i])
			} else if ch == quote {
				quote = 0
			}
			continue
		case ch == '\'' || ch == '`' || ch == '"':
			quote = ch
		case ch == '?':
			if n >= len(args) {
				return "", fmt.Errorf("bind: more ? than the %d arguments", len(args))
			}
			lit, err := literal(args[n])
			if err != nil {
				return "", err
			}
			n++
			b.WriteString(lit)
			continue
		}
		b.WriteByte(ch)
	}
	if n != len(args) {
		return "", fmt.Errorf("bind: %d arguments for %d ?", len(args), n)
	}
	return b.String(), nil
}

func literal(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(x) + "'", nil
	case int, int8, int16, int32, int64:
		return strconv.FormatInt(reflect.ValueOf(x).Int(), 10), nil
	case uint, uint8, uint16, uint32, uint64:
		return strconv.FormatUint(reflect.ValueOf(x).Uint(), 10), nil
	}
	return "", fmt.Errorf("bind: argument of type %T", v)
}
