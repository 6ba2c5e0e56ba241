package client

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// BatchLife is GET /batches/{request_id}: what became of one request to POST /events.
type BatchLife struct {
	RequestID      string          `json:"request_id"`
	PixelID        string          `json:"pixel_id"`
	KeyID          string          `json:"key_id"`
	Status         int             `json:"status"` // the answer's: 202, or 422, 409, 429 (refused whole)
	ReceivedAt     time.Time       `json:"received_at"`
	Events         *int            `json:"events"`   // events in the request (nil: refused before it was read)
	Accepted       int             `json:"accepted"` // events stored
	Rejected       int             `json:"rejected"` // duplicates excluded
	RejectedByRule map[string]int  `json:"rejected_by_rule"`
	Duplicates     int             `json:"duplicates"` // copies of an event_id dropped
	KafkaPartition *int32          `json:"kafka_partition"`
	KafkaOffset    *int64          `json:"kafka_offset"`
	StoredAt       *time.Time      `json:"stored_at"`
	StoredCopies   int             `json:"stored_copies"` // 1 once stored: exactly once
	TimeZone       string          `json:"time_zone"`
	Days           []BatchDayCount `json:"days"`
}

// BatchDayCount is a number of a batch's events on one local day.
type BatchDayCount struct {
	Date   string `json:"date"` // YYYY-MM-DD of TimeZone
	Events int    `json:"events"`
}

// Batch reads the life of the request requestID (an EventsResult's RequestID, or a
// Problem's): a *Problem with code not_found until it is stored (seconds after the
// 202), and for a request older than the 8 days the service looks back.
func (c *Client) Batch(ctx context.Context, requestID string) (*BatchLife, error) {
	var out BatchLife
	if err := c.Get(ctx, "/batches/"+url.PathEscape(requestID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PixelHealth is a record of GET /pixels and GET /pixels/{id}: a pixel, its reporting
// zone, its last days and the pipeline's lag for it.
type PixelHealth struct {
	ID              string     `json:"id"`
	Name            string     `json:"name"`
	TimeZone        string     `json:"time_zone"`
	CreatedAt       time.Time  `json:"created_at"`
	LastAcceptedAt  *time.Time `json:"last_accepted_at"`
	KafkaPartition  *int32     `json:"kafka_partition"`
	IngestedThrough *time.Time `json:"ingested_through"`
	LagSeconds      *float64   `json:"lag_seconds"`
	Days            []PixelDay `json:"days"` // oldest first
}

// PixelDay is one local day of a pixel's health: Received = Accepted + Rejected +
// Duplicates.
type PixelDay struct {
	Date           string         `json:"date"` // YYYY-MM-DD of TimeZone
	Received       int            `json:"received"`
	Accepted       int            `json:"accepted"`
	Rejected       int            `json:"rejected"`
	RejectedByRule map[string]int `json:"rejected_by_rule"`
	Duplicates     int            `json:"duplicates"`
}

// Pixel reads one pixel's health over its last days local days (0: the service's
// default, 7; at most 31).
func (c *Client) Pixel(ctx context.Context, pixelID string, days int) (*PixelHealth, error) {
	var out PixelHealth
	if err := c.Get(ctx, "/pixels/"+url.PathEscape(pixelID), daysQuery(days, 0), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Pixels walks the workspace's pixels with their health over days local days (0: 7);
// limit is the page size (0: the service's default).
func (c *Client) Pixels(days, limit int) *Iterator[PixelHealth] {
	return List[PixelHealth](c, "/pixels", daysQuery(days, limit))
}

func daysQuery(days, limit int) url.Values {
	v := url.Values{}
	if days > 0 {
		v.Set("days", strconv.Itoa(days))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return v
}
