package signature

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// Vectors computed with openssl, independently of this package:
//
//	printf '1700000000.{"type":"ping"}' | openssl dgst -sha256 -hmac whsec_test
const (
	vecBody = `{"type":"ping"}`
	vecT    = 1700000000
	vecOld  = "bc08c591847b765241711bcbe7067e3869a219e424d3fdd9d00b3b6f915baf97" // whsec_test
	vecNew  = "d3636cdf0386ac24e87f7f1fd8f9036fc1c26518b352c6815b5029ed5731063f" // whsec_next
)

func TestSignVector(t *testing.T) {
	if got := Sign([]byte("whsec_test"), vecT, []byte(vecBody)); got != vecOld {
		t.Fatalf("Sign = %s, want %s", got, vecOld)
	}
	want := "t=1700000000,v1=" + vecOld + ",v1=" + vecNew
	if got := Value(vecT, []byte(vecBody), []byte("whsec_test"), []byte("whsec_next")); got != want {
		t.Fatalf("Value = %s", got)
	}
}

// TestDigestVector: Digest is SHA-256 of exactly what a signature covers
// (printf '1700000000.{"type":"ping"}' | sha256sum).
func TestDigestVector(t *testing.T) {
	d := Digest(vecT, []byte(vecBody))
	if got := hex.EncodeToString(d[:]); got != "7dacb025b88499b239a85ca47ccae8f85a79110b94d785e7698c0d0a32b0c4b6" {
		t.Fatalf("Digest = %s", got)
	}
}

func TestVerifyVectors(t *testing.T) {
	at := time.Unix(vecT, 0)
	old, next := []byte("whsec_test"), []byte("whsec_next")
	cases := []struct {
		name    string
		header  string
		body    string
		secrets [][]byte
		now     time.Time
		want    error
	}{
		{"good", "t=1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at, nil},
		{"good with spaces and unknown scheme", " t=1700000000, v0=zz, v1=" + vecOld, vecBody, [][]byte{old}, at, nil},
		{"bad digest", "t=1700000000,v1=" + vecNew, vecBody, [][]byte{old}, at, ErrMismatch},
		{"body changed", "t=1700000000,v1=" + vecOld, vecBody + " ", [][]byte{old}, at, ErrMismatch},
		{"timestamp changed", "t=1700000001,v1=" + vecOld, vecBody, [][]byte{old}, at, ErrMismatch},
		{"stale", "t=1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at.Add(301 * time.Second), ErrStale},
		{"edge of tolerance", "t=1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at.Add(300 * time.Second), nil},
		{"future", "t=1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at.Add(-301 * time.Second), ErrStale},
		{"near future", "t=1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at.Add(-300 * time.Second), nil},
		{"rotation: sender signs with both, receiver knows old", "t=1700000000,v1=" + vecOld + ",v1=" + vecNew, vecBody, [][]byte{old}, at, nil},
		{"rotation: sender signs with both, receiver knows new", "t=1700000000,v1=" + vecOld + ",v1=" + vecNew, vecBody, [][]byte{next}, at, nil},
		{"rotation: receiver knows both, sender uses new", "t=1700000000,v1=" + vecNew, vecBody, [][]byte{old, next}, at, nil},
		{"rotation: neither matches", "t=1700000000,v1=" + vecOld + ",v1=" + vecNew, vecBody, [][]byte{[]byte("other")}, at, ErrMismatch},
		{"missing", "", vecBody, [][]byte{old}, at, ErrMissing},
		{"no t", "v1=" + vecOld, vecBody, [][]byte{old}, at, ErrMalformed},
		{"no v1", "t=1700000000", vecBody, [][]byte{old}, at, ErrMalformed},
		{"short digest", "t=1700000000,v1=abcd", vecBody, [][]byte{old}, at, ErrMalformed},
		{"not hex", "t=1700000000,v1=" + strings.Repeat("g", 64), vecBody, [][]byte{old}, at, ErrMalformed},
		{"t not a number", "t=soon,v1=" + vecOld, vecBody, [][]byte{old}, at, ErrMalformed},
		{"two t", "t=1700000000,t=1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at, ErrMalformed},
		{"t with a leading zero", "t=01700000000,v1=" + vecOld, vecBody, [][]byte{old}, at, ErrMalformed},
		{"t with a sign", "t=+1700000000,v1=" + vecOld, vecBody, [][]byte{old}, at, ErrMalformed},
		{"no secrets", "t=1700000000,v1=" + vecOld, vecBody, nil, at, ErrNoSecret},
		{"an empty secret verifies nothing", "t=1700000000,v1=" + Sign(nil, 1700000000, []byte(vecBody)), vecBody, [][]byte{{}}, at, ErrNoSecret},
		{"an empty secret beside a real one", "t=1700000000,v1=" + Sign(nil, 1700000000, []byte(vecBody)), vecBody, [][]byte{{}, old}, at, ErrMismatch},
		{"garbage", "Bearer xyz", vecBody, [][]byte{old}, at, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(c.header, []byte(c.body), c.secrets, c.now, Tolerance)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "whsec") {
				t.Fatalf("error mentions a secret: %v", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("t=1700000000,v1=" + vecOld)
	f.Add("t=1,v1=" + vecOld + ",v1=" + vecNew)
	f.Add(",,,=")
	f.Fuzz(func(t *testing.T, h string) {
		p, err := Parse(h)
		if err == nil && (p.T <= 0 || len(p.V1) == 0) {
			t.Fatalf("accepted %q without t or v1", h)
		}
	})
}
