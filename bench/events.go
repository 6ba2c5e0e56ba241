package bench

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// GenConfig shapes the generated event batches.
type GenConfig struct {
	BatchSize   int     // events per batch, 1..50
	Pixels      int     // pixels the batches spread over
	InvalidFrac float64 // share of events that break a rule (rejected alone, batch still 202)
	Bodies      int     // distinct bodies generated up front and reused
	Seed        uint64
	Now         time.Time // occurred_at is within the hour before Now
}

// GenEvent is one generated event, kept in a form both the API body and a direct
// ClickHouse row are written from.
type GenEvent struct {
	Name       string
	OccurredAt time.Time
	Value      string // "" when none; decimal text with at most 4 places
	Currency   string
	Consent    bool
	Email      string // "" when none
	// Invalid names the rule the event breaks ("" for a valid event).
	Invalid string
}

// GenBatch is one generated batch for one pixel (index into the pixel list).
type GenBatch struct {
	Pixel  int
	Events []GenEvent
}

var eventNames = []string{"purchase", "add_to_cart", "page_view", "lead", "sign_up", "view_item",
	"begin_checkout", "subscribe", "search", "contact"}

// invalidKinds are the rule breaks the generator uses, in turn.
var invalidKinds = []string{"currency_required", "normalised", "consent_required"}

// Generate returns cfg.Bodies batches, deterministic for cfg.Seed.
func Generate(cfg GenConfig) []GenBatch {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	out := make([]GenBatch, max(1, cfg.Bodies))
	inv := 0
	for i := range out {
		b := GenBatch{Pixel: i % max(1, cfg.Pixels), Events: make([]GenEvent, cfg.BatchSize)}
		for j := range b.Events {
			e := GenEvent{Name: eventNames[rng.IntN(len(eventNames))],
				OccurredAt: cfg.Now.Add(-time.Duration(rng.Int64N(int64(time.Hour)))).Truncate(time.Second),
				Consent:    rng.Float64() < 0.9}
			if e.Name == "purchase" || e.Name == "begin_checkout" || rng.IntN(4) == 0 {
				e.Value = fmt.Sprintf("%d.%02d", rng.IntN(500), rng.IntN(100))
				e.Currency = []string{"EUR", "USD", "GBP"}[rng.IntN(3)]
			}
			if rng.IntN(3) > 0 {
				e.Email = "user" + strconv.Itoa(rng.IntN(200000)) + "@example.com"
			}
			if cfg.InvalidFrac > 0 && rng.Float64() < cfg.InvalidFrac {
				e.Invalid = invalidKinds[inv%len(invalidKinds)]
				inv++
			}
			b.Events[j] = e
		}
		out[i] = b
	}
	return out
}

// AppendEventJSON appends e as a POST /events event object, breaking its rule when
// e.Invalid is set.
func AppendEventJSON(dst []byte, e *GenEvent) []byte {
	dst = append(dst, `{"event_name":`...)
	dst = strconv.AppendQuote(dst, e.Name)
	dst = append(dst, `,"occurred_at":"`...)
	dst = e.OccurredAt.UTC().AppendFormat(dst, "2006-01-02T15:04:05Z")
	dst = append(dst, '"')
	value, currency := e.Value, e.Currency
	if e.Invalid == "currency_required" {
		if value == "" {
			value = "1.00"
		}
		currency = ""
	}
	if value != "" {
		dst = append(dst, `,"value":`...)
		dst = append(dst, value...)
	}
	if currency != "" {
		dst = append(dst, `,"currency":"`...)
		dst = append(dst, currency...)
		dst = append(dst, '"')
	}
	if e.Invalid != "consent_required" {
		dst = append(dst, `,"consent":{"measurement":`...)
		dst = strconv.AppendBool(dst, e.Consent)
		dst = append(dst, '}')
	}
	email := e.Email
	if e.Invalid == "normalised" {
		email = " User@Example.COM"
	}
	if email != "" {
		dst = append(dst, `,"identity":{"email":`...)
		dst = strconv.AppendQuote(dst, email)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// BatchJSON returns the POST /events body of b for pixel pixelID.
func BatchJSON(b *GenBatch, pixelID string) []byte {
	dst := make([]byte, 0, 64+len(b.Events)*200)
	dst = append(dst, `{"pixel_id":`...)
	dst = strconv.AppendQuote(dst, pixelID)
	dst = append(dst, `,"events":[`...)
	for i := range b.Events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendEventJSON(dst, &b.Events[i])
	}
	return append(dst, "]}"...)
}

// EventIDDigits is the width of the request number in a generated event_id.
const EventIDDigits = 12

// BatchJSONWithIDs is BatchJSON with a client event_id on every event,
// "<run>-<request number>-<index>", the request number written as EventIDDigits zeros:
// slots are the offsets of those digits in the body, which SetEventIDs fills in for
// each request, so that every event of a run has an id of its own.
func BatchJSONWithIDs(b *GenBatch, pixelID, run string) (body []byte, slots []int) {
	dst := make([]byte, 0, 64+len(b.Events)*240)
	dst = append(dst, `{"pixel_id":`...)
	dst = strconv.AppendQuote(dst, pixelID)
	dst = append(dst, `,"events":[`...)
	var ev []byte
	for i := range b.Events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(append(append(dst, `{"event_id":"`...), run...), '-')
		slots = append(slots, len(dst))
		for range EventIDDigits {
			dst = append(dst, '0')
		}
		dst = append(strconv.AppendInt(append(dst, '-'), int64(i), 10), `",`...)
		ev = AppendEventJSON(ev[:0], &b.Events[i])
		dst = append(dst, ev[1:]...) // the event's members, after its "{"
	}
	return append(dst, "]}"...), slots
}

// SetEventIDs writes request number j into the event ids of body at slots
// (BatchJSONWithIDs).
func SetEventIDs(body []byte, slots []int, j int64) {
	var digits [EventIDDigits]byte
	for k := EventIDDigits - 1; k >= 0; k-- {
		digits[k] = byte('0' + j%10)
		j /= 10
	}
	for _, at := range slots {
		copy(body[at:at+EventIDDigits], digits[:])
	}
}

// EventID is the event_id SetEventIDs gives event i of request j of run.
func EventID(run string, j int64, i int) string {
	return fmt.Sprintf("%s-%0*d-%d", run, EventIDDigits, j, i)
}

// Valid is how many of b's events are valid.
func (b *GenBatch) Valid() int {
	n := 0
	for i := range b.Events {
		if b.Events[i].Invalid == "" {
			n++
		}
	}
	return n
}

// DirectColumns are the columns a direct insert names (those of the events table the
// pipeline fills, minus nothing).
const DirectColumns = "workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at, event_date, " +
	"value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at, " +
	"kafka_topic, kafka_partition, kafka_offset, batch_index"

// AppendDirectRows appends b's valid events as JSONEachRow rows of the events table,
// as the pipeline would store them (email hashed, identity dropped without consent).
// seq is a per-batch sequence: it seeds the event ids and stands in for the Kafka
// offset; topic goes into kafka_topic (never the service's topic, so the consumer's
// offset read-back ignores these rows).
func AppendDirectRows(dst []byte, b *GenBatch, workspace, pixel, key, topic string, seq int64, now time.Time) []byte {
	nowS := now.UTC().Format(time.DateTime)
	var idb [16]byte
	for i := range b.Events {
		e := &b.Events[i]
		if e.Invalid != "" {
			continue
		}
		h := sha256.Sum256([]byte(strconv.FormatInt(seq, 10) + "/" + strconv.Itoa(i)))
		copy(idb[:], h[:16])
		dst = append(dst, `{"workspace_id":"`...)
		dst = append(dst, workspace...)
		dst = append(dst, `","pixel_id":"`...)
		dst = append(dst, pixel...)
		dst = append(dst, `","sandbox":0,"key_id":"`...)
		dst = append(dst, key...)
		dst = append(dst, `","event_id":"`...)
		dst = appendUUID(dst, idb)
		dst = append(dst, `","event_name":`...)
		dst = strconv.AppendQuote(dst, e.Name)
		dst = append(dst, `,"occurred_at":"`...)
		dst = e.OccurredAt.UTC().AppendFormat(dst, time.DateTime)
		dst = append(dst, `","event_date":"`...)
		dst = e.OccurredAt.UTC().AppendFormat(dst, time.DateOnly)
		dst = append(dst, `","value":`...)
		if e.Value != "" {
			dst = append(dst, e.Value...)
			dst = append(dst, `,"has_value":1`...)
		} else {
			dst = append(dst, `0,"has_value":0`...)
		}
		dst = append(dst, `,"currency":"`...)
		dst = append(dst, e.Currency...)
		dst = append(dst, `","consent":`...)
		dst = append(dst, b2d(e.Consent))
		if e.Email != "" && e.Consent {
			sum := sha256.Sum256([]byte(e.Email))
			dst = append(dst, `,"has_email":1,"email_sha256":"`...)
			dst = appendRawJSONBytes(dst, sum[:])
			dst = append(dst, '"')
		} else {
			dst = append(dst, `,"has_email":0,"email_sha256":""`...)
		}
		dst = append(dst, `,"request_id":"req_direct","received_at":"`...)
		dst = append(dst, nowS...)
		dst = append(dst, `","inserted_at":"`...)
		dst = append(dst, nowS...)
		dst = append(dst, `","kafka_topic":"`...)
		dst = append(dst, topic...)
		dst = append(dst, `","kafka_partition":0,"kafka_offset":`...)
		dst = strconv.AppendInt(dst, seq, 10)
		dst = append(dst, `,"batch_index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, "}\n"...)
	}
	return dst
}

// appendUUID appends u in its 8-4-4-4-12 form.
func appendUUID(dst []byte, u [16]byte) []byte {
	const hx = "0123456789abcdef"
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hx[c>>4], hx[c&15])
	}
	return dst
}

// appendRawJSONBytes appends b inside a JSON string as ClickHouse reads it into a
// FixedString: bytes are taken as they are, so only '"', '\\' and control bytes are
// escaped (as \u00XX, which ClickHouse turns back into the one byte).
func appendRawJSONBytes(dst, b []byte) []byte {
	const hx = "0123456789abcdef"
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hx[c>>4], hx[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func b2d(b bool) byte {
	if b {
		return '1'
	}
	return '0'
}
