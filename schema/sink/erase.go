package sink

import (
	"github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"

	"svc/schema/erasure"
)

// The privacy fence's work on buffered rows (rollup/erase.go): rows inserted while an
// erasure runs must not carry an identity it erases.

// AnyPixel reports whether a buffered row belongs to one of pixels.
func (s *Sink) AnyPixel(pixels map[uuid.UUID]bool) bool {
	for _, p := range s.c.pixel {
		if pixels[p] {
			return true
		}
	}
	return false
}

// EraseIdentities clears the email hash of every buffered row whose identity set
// erases (erasure.Identity.Applies on the row's received_at) and returns how many.
// The event itself stays, as an event without identity.
func (s *Sink) EraseIdentities(set *erasure.Set) int {
	c := &s.c
	n := 0
	for i, has := range c.hasEmail {
		if has == 0 {
			continue
		}
		row := c.email.Buf[i*32 : i*32+32]
		var email [32]byte
		copy(email[:], row)
		id, ok := set.Lookup(c.workspace[i], email)
		if !ok || !id.Applies(int64(c.received.Data[i])) {
			continue
		}
		c.hasEmail[i] = 0
		copy(row, zero32[:])
		n++
	}
	return n
}

// Slices returns the distinct slices (workspace, environment, pixel, UTC day) of the
// buffered rows, in order of first appearance: what the INSERT's views write rows of.
// A record's rows share all but the day, so most rows match the previous one.
func (s *Sink) Slices() []erasure.Slice {
	type key struct {
		ws, px  uuid.UUID
		sandbox uint8
		date    proto.Date
	}
	c := &s.c
	var out []erasure.Slice
	seen := map[key]bool{}
	var last key
	for i := range c.offset {
		k := key{c.workspace[i], c.pixel[i], c.sandbox[i], c.date[i]}
		if (i > 0 && k == last) || seen[k] {
			last = k
			continue
		}
		last, seen[k] = k, true
		out = append(out, erasure.Slice{Workspace: k.ws, Sandbox: k.sandbox == 1,
			PixelDay: erasure.PixelDay{Pixel: k.px, Date: k.date.Time()}})
	}
	return out
}
