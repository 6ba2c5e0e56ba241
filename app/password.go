package app

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Passwords are stored as argon2id hashes in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$hash), with OWASP's recommended minimum parameters
// (19 MiB, two passes, one lane). The parameters travel with each hash, so raising them
// later leaves older hashes verifiable (and a sign-in rehashes them: Users.SignIn).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
	// MinPassword and MaxPassword bound a password's length (in characters; bytes for
	// the upper bound: what argon2 hashes).
	MinPassword = 12
	MaxPassword = 256
)

// hashSlots bounds the hashes computed at once: each holds argonMemory, so a burst of
// sign-ins costs at most hashSlots × 19 MiB; the rest wait their turn.
var hashSlots = make(chan struct{}, 4)

// ErrBadPassword is a password that fails the length rule.
var ErrBadPassword = fmt.Errorf("A password has %d to %d characters.", MinPassword, MaxPassword)

// errGuessable is a password of the right length that is among the first an attacker
// tries: blank, one character repeated, a short run repeated, a keyboard or alphabet
// run, or the account's own email.
var errGuessable = errors.New("This password is among the first an attacker tries (spaces, one character or a few repeated, a keyboard row or a run of digits or letters, or your email address): choose another.")

// sequences are the runs a guessable password follows, forwards or backwards.
var sequences = []string{"01234567890123456789", "abcdefghijklmnopqrstuvwxyz", "qwertyuiopasdfghjklzxcvbnm", "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p"}

// checkPassword applies NIST SP 800-63B's rules for a new password of the account of
// email: its length, and none of the guessable ones (errGuessable); no composition rules.
func checkPassword(pw, email string) error {
	if n := utf8.RuneCountInString(pw); n < MinPassword || n > MaxPassword {
		return ErrBadPassword
	}
	if guessable(strings.ToLower(pw), strings.ToLower(email)) {
		return errGuessable
	}
	return nil
}

// guessable reports a lower-cased password that is blank, a unit of at most four
// characters repeated, part of a sequence (either way), or holds the email or its local
// part.
func guessable(pw, email string) bool {
	if strings.TrimSpace(pw) == "" {
		return true
	}
	for unit := 1; unit <= 4; unit++ {
		if strings.Repeat(pw[:unit], len(pw)/unit+1)[:len(pw)] == pw {
			return true
		}
	}
	for _, s := range sequences {
		if strings.Contains(s+s, pw) || strings.Contains(reverse(s+s), pw) {
			return true
		}
	}
	local, _, _ := strings.Cut(email, "@")
	return email != "" && (strings.Contains(pw, email) || len(local) >= 4 && strings.Contains(pw, local))
}

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// hashPassword returns the PHC string of pw under a fresh salt.
func hashPassword(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	if err := acquire(ctx); err != nil {
		return "", err
	}
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	<-hashSlots
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(sum)), nil
}

func acquire(ctx context.Context) error {
	select {
	case hashSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dummyHash is verified against when there is no account, so that a sign-in takes as
// long whether or not the email has one (made on first use).
var dummyHash = sync.OnceValue(func() string {
	h, _ := hashPassword(context.Background(), "not a password anyone has")
	return h
})

// verifyPassword reports whether pw matches the PHC string phc, in constant time.
func verifyPassword(ctx context.Context, phc, pw string) (bool, error) {
	var v, m, t, p int
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("not an argon2id hash")
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false, errors.New("unknown argon2 version")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m < 1 || t < 1 || p < 1 || p > 255 {
		return false, errors.New("bad argon2 parameters")
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err := errors.Join(err1, err2); err != nil || len(want) == 0 {
		return false, errors.New("bad argon2 encoding")
	}
	if err := acquire(ctx); err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), salt, uint32(t), uint32(m), uint8(p), uint32(len(want)))
	<-hashSlots
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// outdated reports whether phc was made with other parameters than today's.
func outdated(phc string) bool {
	return !strings.HasPrefix(phc, fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$", argon2.Version, argonMemory, argonTime, argonThreads))
}
