package app

import (
	"strings"
	"testing"
)

// A password has 12 to 256 characters (application.md), counted as characters, not
// bytes: 256 two-byte letters pass, 257 do not; 11 letters do not, 12 do.
func TestPasswordLengthInCharacters(t *testing.T) {
	for pw, ok := range map[string]bool{
		strings.Repeat("a", 11): false, strings.Repeat("a", 12): true,
		strings.Repeat("é", 11): false, strings.Repeat("é", 12): true,
		strings.Repeat("é", 256): true, strings.Repeat("é", 257): false, strings.Repeat("a", 257): false,
	} {
		if err := checkPassword(pw); (err == nil) != ok {
			t.Errorf("%d characters (%d bytes): %v, want accepted %v", len([]rune(pw)), len(pw), err, ok)
		}
	}
}
