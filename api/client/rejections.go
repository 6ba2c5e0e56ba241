package client

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// RejectionRecord is one record of GET /rejections: an event a 202 rejected (EventIndex its
// index in the batch) or a batch refused as a whole (EventIndex nil).
type RejectionRecord struct {
	RequestID   string          `json:"request_id"`
	ReceivedAt  time.Time       `json:"received_at"`
	PixelID     string          `json:"pixel_id"`
	KeyID       string          `json:"key_id"`
	Status      int             `json:"status"`
	BatchEvents int             `json:"batch_events"`
	EventIndex  *int            `json:"event_index"`
	Field       string          `json:"field"`
	Rule        string          `json:"rule"`
	Value       json.RawMessage `json:"value"` // as received; identity values "(withheld)"
}

// RejectionQuery filters GET /rejections: Since (zero: everything kept; rounded down to
// its minute by the service) and Rule ("" any).
type RejectionQuery struct {
	Since time.Time
	Rule  string
	Limit int // page size (0: the service's default)
}

// Rejections walks pixelID's rejections, newest first. After a page, the iterator's
// Meta holds the exact counts of the filter: "rejections" (all) and "not_stored" (past
// the per-pixel-per-minute cap of stored ones, so not listed).
func (c *Client) Rejections(pixelID string, q RejectionQuery) *Iterator[RejectionRecord] {
	v := url.Values{"pixel_id": {pixelID}}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if q.Rule != "" {
		v.Set("rule", q.Rule)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return List[RejectionRecord](c, "/rejections", v)
}
