// Package paging is the paging convention of every list: its limits, the opaque cursor
// and the rules of the limit, cursor and offset parameters. It has no HTTP in it (the
// api package reads the parameters from a request and writes the list), so the stores
// that serve pages (schema/catalog) use the same numbers.
package paging

import (
	"encoding/base64"
	"strconv"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/problem"
)

// The limits of every list: limit 1..MaxLimit, DefaultLimit when absent; offset
// 0..MaxOffset. A store is asked for one row past the page (MaxLimit+1 at most), which
// tells that another page exists.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	MaxOffset    = 1_000_000
)

// Offset paging is deprecated (CHANGELOG.md): deprecated on 2026-09-01, sunset on
// 2027-09-01. Offset responses carry these headers.
const (
	OffsetDeprecation = "@1788220800"                   // 2026-09-01T00:00:00Z
	OffsetSunset      = "Wed, 01 Sep 2027 00:00:00 GMT" // not earlier than Deprecation
	OffsetDocsAnchor  = "/versioning#offset-pagination"
)

// Cursor is the decoded form of an opaque cursor: the list it belongs to and the key of
// the last row returned. Only positions are carried; every query stays scoped to the
// caller's workspace, so a cursor reveals nothing and grants nothing.
type Cursor struct {
	List string    `json:"l"`
	ID   uuid.UUID `json:"i,omitempty"`
	Date string    `json:"d,omitempty"`
	Name string    `json:"n,omitempty"`
	Cur  string    `json:"c,omitempty"`
	Zone string    `json:"z,omitempty"` // the time zone of a pixel_rollups listing
	T    int64     `json:"t,omitempty"` // a time key (unix seconds): erasures, rejections
	Pos  *int      `json:"p,omitempty"` // a position within the time key: a rejection's event index
	// Rec is the rest of a rejection's position ("<rule> <kafka partition> <offset>"),
	// which tells apart rejections equal in the keys above.
	Rec string `json:"r,omitempty"`
}

// Encode returns the opaque (base64url JSON) form of c.
func (c Cursor) Encode() *string {
	b, _ := json.Marshal(c)
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// Decode reads an opaque cursor of list; false when it is not one.
func Decode(s, list string) (*Cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 1024 {
		return nil, false
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil || c.List != list {
		return nil, false
	}
	return &c, true
}

// Page is the paging part of a list request, validated.
type Page struct {
	Limit       int
	Offset      int     // > 0 only for (deprecated) offset paging
	After       *Cursor // nil on the first page
	OffsetParam bool    // the offset parameter was given
}

// Parse reads limit, cursor and offset through query (a request's query parameters)
// for list (the cursor's list tag), adding an entry to errs for each invalid parameter
// (the handler answers 422 invalid_request). valid, when set, vets a decoded cursor's
// fields (a day that must parse).
func Parse(query func(string) string, list string, valid func(Cursor) bool, errs *[]problem.FieldError) Page {
	p := Page{Limit: DefaultLimit}
	if v := query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			*errs = append(*errs, problem.QueryParam("limit", "range_1_1000", v))
		} else {
			p.Limit = n
		}
	}
	if v := query("cursor"); v != "" {
		c, ok := Decode(v, list)
		if ok && valid != nil && !valid(*c) {
			c, ok = nil, false
		}
		if !ok {
			*errs = append(*errs, problem.QueryParam("cursor", "cursor", v))
		}
		p.After = c
	}
	if v := query("offset"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0 || n > MaxOffset:
			*errs = append(*errs, problem.QueryParam("offset", "range_0_1000000", v))
		case p.After != nil:
			*errs = append(*errs, problem.QueryParam("offset", "not_with_cursor", v))
		default:
			p.Offset, p.OffsetParam = n, true
		}
	}
	return p
}
