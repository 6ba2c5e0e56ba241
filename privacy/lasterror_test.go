package privacy

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// An erasure's record keeps no value of the statement a server error quotes: the
// digests of the batch (literals and long hex runs, of any workspace's erasure in it)
// and addresses are redacted, as in a log line; a long text is cut to 500 bytes on a
// character's start.
func TestLastErrorRedactsTheStatement(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	err := errors.New("code: 62, Syntax error: failed at position 80 (line 1): ALTER TABLE events DELETE WHERE email_sha256 IN (unhex('" +
		digest + "'), '" + digest + "') -- ada@example.com")
	got := lastError(err)
	if strings.Contains(got, digest) || strings.Contains(got, "ada@example.com") || !strings.Contains(got, "Syntax error") {
		t.Fatalf("lastError kept a value: %q", got)
	}
	long := errors.New(strings.Repeat("é", 400)) // 800 bytes, two to a character
	if got := lastError(long); len(got) > 500 || len(got) < 498 || !utf8.ValidString(got) {
		t.Fatalf("cut to %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
