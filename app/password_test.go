package app

import (
	"strings"
	"testing"
)

// cycle is n characters cycling through set (a password no rule but the length refuses).
func cycle(set string, n int) string {
	r := []rune(set)
	out := make([]rune, n)
	for i := range out {
		out[i] = r[i%len(r)]
	}
	return string(out)
}

// A password has 12 to 256 characters (application.md), counted as characters, not
// bytes: 256 two-byte letters pass, 257 do not; 11 letters do not, 12 do.
func TestPasswordLengthInCharacters(t *testing.T) {
	const ascii, wide = "kz7q2mwx9rfj", "éàüöñçøåîœëï"
	for pw, ok := range map[string]bool{
		cycle(ascii, 11): false, cycle(ascii, 12): true,
		cycle(wide, 11): false, cycle(wide, 12): true,
		cycle(wide, 256): true, cycle(wide, 257): false, cycle(ascii, 257): false,
	} {
		if err := checkPassword(pw, "ada@example.com"); (err == nil) != ok {
			t.Errorf("%d characters (%d bytes): %v, want accepted %v", len([]rune(pw)), len(pw), err, ok)
		}
	}
}

// The passwords an attacker tries first are refused whatever their length (NIST SP
// 800-63B §3.1.1.2), with a sentence saying why; others of the same shapes pass.
func TestGuessablePasswordsRefused(t *testing.T) {
	for pw, refused := range map[string]bool{
		strings.Repeat(" ", 12):         true,
		strings.Repeat("a", 12):         true,
		strings.Repeat("abc", 5):        true,
		strings.Repeat("pass", 3):       true,
		"123456789012":                  true,
		"0987654321098":                 true,
		"abcdefghijklm":                 true,
		"QWERTYUIOPASD":                 true,
		"ada.lovelace@example.com":      true,
		"my name is Ada.Lovelace!":      true,
		"correct horse battery staple":  false,
		"pass-word-with-a-twist-42":     false,
		"lovelace":                      false, // too short anyway: the length rule says so
		"ADA.LOVELACE@example.com 2026": true,
	} {
		err := checkPassword(pw, "ada.lovelace@example.com")
		if refused != (err == errGuessable) && !(pw == "lovelace" && err == ErrBadPassword) {
			t.Errorf("%q: %v, want refused as guessable %v", pw, err, refused)
		}
	}
}
