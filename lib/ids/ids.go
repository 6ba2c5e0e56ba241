// Package ids formats and parses public identifiers: a resource-kind prefix and a UUID
// (pxl_3f2c…), with the raw UUID accepted on input too. Output always carries both:
// "<field>": "pxl_…" and "<field>_uuid": "3f2c…".
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// Prefix is a resource kind's prefix, with its underscore.
type Prefix string

// Prefixes of the spec, plus lin_ (line items), key_, whk_/evt_ and era_ (erasures) (additive).
const (
	Org      Prefix = "org_"
	Pixel    Prefix = "pxl_"
	Plan     Prefix = "pln_"
	Line     Prefix = "lin_"
	Campaign Prefix = "cmp_"
	Study    Prefix = "std_"
	Finding  Prefix = "fnd_"
	Key      Prefix = "key_"
	Endpoint Prefix = "whk_"
	Event    Prefix = "evt_"
	Erasure  Prefix = "era_"
	// Request prefixes request ids (RequestID): 24 hex digits, not a UUID, so not
	// for Parse (ValidRequestID checks one).
	Request Prefix = "req_"
)

// ErrMalformed is returned for input that is neither prefix+UUID nor a raw UUID. Every
// error of Parse is ErrMalformed (errors.Is), so a caller that answers a malformed id
// answers every id Parse refuses the same way.
var ErrMalformed = errors.New("not a valid id")

// ErrWrongKind is returned for a prefixed id of another resource kind (pln_… where a
// pixel id is expected). It is an ErrMalformed (errors.Is): an id of another kind is
// not an id of this kind; callers test ErrWrongKind only to say why.
var ErrWrongKind = fmt.Errorf("%w: an id of another kind", ErrMalformed)

// Parse accepts "<prefix><uuid>" or a raw UUID (any case, with or without dashes as
// uuid.Parse allows) and returns the UUID.
func Parse(p Prefix, s string) (uuid.UUID, error) {
	if rest, ok := strings.CutPrefix(s, string(p)); ok {
		s = rest
	} else if i := strings.IndexByte(s, '_'); i > 0 && i < 5 {
		return uuid.Nil, ErrWrongKind
	}
	if len(s) != 36 && len(s) != 32 {
		return uuid.Nil, ErrMalformed
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, ErrMalformed
	}
	return u, nil
}

// Format returns the prefixed form of u.
func Format(p Prefix, u uuid.UUID) string { return string(p) + u.String() }

// New returns a random (version 4) UUID.
func New() uuid.UUID { return uuid.New() }

// RequestID returns a new request id: "req_" and 24 hex digits from crypto/rand.
func RequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	var out [4 + 24]byte
	copy(out[:], "req_")
	hex.Encode(out[4:], b[:])
	return string(out[:])
}

// ValidRequestID reports whether s is a request id as RequestID makes them.
func ValidRequestID(s string) bool {
	if len(s) != len(Request)+24 || s[:len(Request)] != string(Request) {
		return false
	}
	for i := len(Request); i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
