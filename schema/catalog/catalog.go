// Package catalog is the read API's data model in ClickHouse: accounts (org_), media
// plans (pln_), line items (lin_), campaigns (cmp_), studies (std_), findings (fnd_),
// plan actuals and campaign actuals. It writes them (import, showroom seed, actuals
// upserts) and reads them, always scoped to one workspace: no function here returns an
// object of a workspace other than the one it is given.
//
// Every table is a ReplacingMergeTree keyed by (workspace_id, object id …) with a
// version column; writing an object again replaces it, and reads pick the latest
// version (argMax … GROUP BY the key), so nothing depends on when ClickHouse merges.
// The tables are created by schema/migrations/0010_actuals.sql and 0011_catalog.sql.
package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/paging"
)

// ErrNotFound is returned by single-object reads when the object does not exist in the
// given workspace (whether it exists elsewhere is never revealed).
var ErrNotFound = errors.New("catalog: not found")

// ErrInvalid wraps every validation failure of a write; nothing was written.
var ErrInvalid = errors.New("catalog: invalid")

// limitClause validates limit and offset and renders the LIMIT clause. Limit goes up to
// paging.MaxLimit+1, so that a caller can fetch one row past a page to learn whether
// another page exists.
func limitClause(limit, offset int) (string, error) {
	if limit < 1 || limit > paging.MaxLimit+1 {
		return "", invalidf("limit %d: want 1..%d", limit, paging.MaxLimit)
	}
	if offset < 0 || offset > paging.MaxOffset {
		return "", invalidf("offset %d: want 0..%d", offset, paging.MaxOffset)
	}
	if offset > 0 {
		return " LIMIT " + strconv.Itoa(offset) + ", " + strconv.Itoa(limit), nil
	}
	return " LIMIT " + strconv.Itoa(limit), nil
}

// lastVersion makes versions strictly increasing within the process even when the clock
// stands still or steps back. Across processes versions follow the wall clock
// (nanoseconds), so the later of two writes of the same key wins.
var lastVersion atomic.Uint64

// nextVersion returns a version greater than every one this process returned before.
func nextVersion() uint64 {
	for {
		prev := lastVersion.Load()
		v := max(uint64(time.Now().UnixNano()), prev+1)
		if lastVersion.CompareAndSwap(prev, v) {
			return v
		}
	}
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// ValidCurrency reports whether s is a three-letter upper-case currency code (ISO 4217
// shape; the list of codes is not checked).
func ValidCurrency(s string) bool { return currencyRE.MatchString(s) }

// maxMoney is the largest amount a Decimal(18, 4) column holds.
var maxMoney = decimal.New(1, 14).Sub(decimal.New(1, -4))

// ValidMoney reports whether d is a non-negative amount that fits Decimal(18, 4) with at
// most four decimal places.
func ValidMoney(d decimal.Decimal) bool {
	return !d.IsNegative() && d.LessThanOrEqual(maxMoney) && d.Equal(d.Round(4))
}

// Day returns t's calendar day (UTC) at 00:00 UTC.
func Day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// dayString formats a day for a toDate(?) parameter.
func dayString(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// minDay and maxDay bound the Date type of ClickHouse (1970-01-01 … 2105).
var (
	minDay = time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC)
	maxDay = time.Date(2105, 12, 31, 0, 0, 0, 0, time.UTC)
)

// ValidDay reports whether t is a day a ClickHouse Date column can hold.
func ValidDay(t time.Time) bool { return !t.Before(minDay) && !t.After(maxDay) }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func nonNil(id uuid.UUID, what string) error {
	if id == uuid.Nil {
		return invalidf("%s is required", what)
	}
	return nil
}
