// Package apikey is the API key a bearer secret opens: its record (workspace,
// environment, scopes, expiry, allow-list, pinned version, burst and daily quotas), the
// secrets' digests (the only form in which secrets are stored), and Authenticator, the
// narrow interface through which the HTTP server (lib/httpserver) finds a key. The
// records are kept by the workspace store (schema/workspace), which implements it.
package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Environments of a key.
const (
	Live    = "live"
	Sandbox = "sandbox"
)

// Scopes a key can hold.
var Scopes = []string{"events:write", "actuals:write", "pixels:read", "plans:read",
	"campaigns:read", "studies:read", "account:read", "identities:erase"}

// Default limits of a new key: 120 requests per 60 s burst, 10,000 per rolling day.
const (
	DefaultBurst = 120
	DefaultDaily = 10000
)

// ErrUnknownSecret is Authenticate's answer for a secret that opens no key.
var ErrUnknownSecret = errors.New("secret matches no key")

// Authenticator finds the key a secret opens: ErrUnknownSecret when none does, another
// error when the store cannot be read. The caller checks revocation, expiry and cutover.
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (*Key, Secret, error)
}

// Key is an API key's record. It never holds a secret.
type Key struct {
	ID          uuid.UUID      `json:"id"`
	WorkspaceID uuid.UUID      `json:"workspace_id"`
	Env         string         `json:"env"`
	Scopes      []string       `json:"scopes"`
	ExpiresAt   *time.Time     `json:"expires_at,omitempty"`
	Allow       []netip.Prefix `json:"allow,omitempty"`
	Version     string         `json:"version,omitempty"`
	Burst       int            `json:"burst"`
	Daily       int            `json:"daily"`
	CreatedAt   time.Time      `json:"created_at"`
	RevokedAt   *time.Time     `json:"revoked_at,omitempty"`
}

// HasScope reports whether k grants scope.
func (k *Key) HasScope(scope string) bool { return slices.Contains(k.Scopes, scope) }

// Allows reports whether ip may use k (an empty allow-list allows every address).
func (k *Key) Allows(ip netip.Addr) bool {
	if len(k.Allow) == 0 {
		return true
	}
	ip = ip.Unmap()
	for _, p := range k.Allow {
		if p.Addr().Is4In6() { // a key stored before ParseAllow unmapped its ranges
			p, _ = unmapPrefix(p)
		}
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Secret maps a secret's digest to its key. CutoverAt is set on a rotated-out secret:
// it works until then, and answers key_expired after.
type Secret struct {
	KeyID     uuid.UUID  `json:"key_id"`
	CutoverAt *time.Time `json:"cutover_at,omitempty"`
}

// Digest returns the hex SHA-256 of a secret: the only form in which secrets are stored.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewSecret returns "svc_<env>_" and 48 hex digits of crypto/rand.
func NewSecret(env string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "svc_" + env + "_" + hex.EncodeToString(b[:])
}

// LooksLikeSecret reports whether s has the shape of a secret (used to tell
// "no bearer token" from "a token that matches nothing").
func LooksLikeSecret(s string) bool {
	return strings.HasPrefix(s, "svc_live_") || strings.HasPrefix(s, "svc_sandbox_")
}

// unmapPrefix writes an IPv4-mapped IPv6 range (::ffff:a.b.c.d/n) as the IPv4 range it
// stands for, since callers are matched by their unmapped address (Key.Allows): left
// mapped, it would never match. A mapped range wider than the mapped space (n < 96) is
// refused.
func unmapPrefix(p netip.Prefix) (netip.Prefix, error) {
	if !p.Addr().Is4In6() {
		return p, nil
	}
	if p.Bits() < 96 {
		return netip.Prefix{}, fmt.Errorf("an IPv4-mapped range must be /96 or narrower; write the IPv4 range instead")
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96), nil
}

// ParseAllow parses addresses and CIDR ranges ("203.0.113.7", "10.0.0.0/8", "::1").
func ParseAllow(items []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range items {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("allow-list entry %q is not an address or CIDR range", s)
			}
			if p, err = unmapPrefix(p); err != nil {
				return nil, fmt.Errorf("allow-list entry %q: %v", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("allow-list entry %q is not an address or CIDR range", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ValidateScopes reports an unknown scope.
func ValidateScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errors.New("at least one scope is required")
	}
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("unknown scope %q (known: %s)", s, strings.Join(Scopes, ", "))
		}
	}
	return nil
}
