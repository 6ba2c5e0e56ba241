package ids

import (
	"errors"
	"testing"

	"github.com/google/uuid"
)

// TestEveryRefusalIsMalformed: Parse refuses an id of another kind with ErrWrongKind,
// which is an ErrMalformed too, so a caller that answers malformed ids answers it the
// same way (a pln_ id where a pixel id is expected was a 500 when it was not).
func TestEveryRefusalIsMalformed(t *testing.T) {
	u := uuid.New()
	for _, c := range []struct {
		in    string
		kind  bool // refused as an id of another kind
		valid bool
	}{
		{Format(Pixel, u), false, true},
		{u.String(), false, true},
		{"pxl_nope", false, false},
		{"", false, false},
		{Format(Plan, u), true, false},
		{"x_" + u.String(), true, false},
	} {
		got, err := Parse(Pixel, c.in)
		switch {
		case c.valid && (err != nil || got != u):
			t.Errorf("Parse(%q) = %v, %v", c.in, got, err)
		case !c.valid && !errors.Is(err, ErrMalformed):
			t.Errorf("Parse(%q): %v is not ErrMalformed", c.in, err)
		case !c.valid && errors.Is(err, ErrWrongKind) != c.kind:
			t.Errorf("Parse(%q): %v, want ErrWrongKind %v", c.in, err, c.kind)
		}
	}
}
