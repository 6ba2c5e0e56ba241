package erasure

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/google/uuid"

	"svc/lib/chpool"
)

// Slice is the events of one pixel on one UTC day in one workspace and environment:
// the unit a rollup rebuild replaces (an erasure's days, an unsure INSERT's rows).
type Slice struct {
	Workspace uuid.UUID
	Sandbox   bool
	PixelDay
}

// sliceSize is a slice's encoded size: workspace, sandbox, pixel, days since 1970.
const sliceSize = 16 + 1 + 16 + 2

const day = 24 * time.Hour

// encodeSlices is the registration's value in Redis.
func encodeSlices(ss []Slice) []byte {
	b := make([]byte, 0, len(ss)*sliceSize)
	for _, s := range ss {
		b = append(b, s.Workspace[:]...)
		b = append(b, chpool.UInt8(s.Sandbox))
		b = append(b, s.Pixel[:]...)
		b = binary.BigEndian.AppendUint16(b, uint16(s.Date.Unix()/int64(day/time.Second)))
	}
	return b
}

func decodeSlices(b []byte) ([]Slice, error) {
	if len(b)%sliceSize != 0 {
		return nil, errors.New("privacy: a registered INSERT's slices are malformed")
	}
	out := make([]Slice, 0, len(b)/sliceSize)
	for ; len(b) > 0; b = b[sliceSize:] {
		var s Slice
		copy(s.Workspace[:], b[:16])
		s.Sandbox = b[16] == 1
		copy(s.Pixel[:], b[17:33])
		s.Date = time.Unix(int64(binary.BigEndian.Uint16(b[33:35]))*int64(day/time.Second), 0).UTC()
		out = append(out, s)
	}
	return out, nil
}
