package logs

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Redacted replaces each SQL string literal RedactSQL removes.
const Redacted = "'<redacted>'"

// longHex is a run of hex digits as long as a 128-bit value or longer: a digest written
// outside a literal (a server error quoting one, say). UUIDs, written with dashes, and
// numbers stay.
var longHex = regexp.MustCompile(`[0-9A-Fa-f]{32,}`)

// emailLike is anything shaped like an address outside a literal.
var emailLike = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)+`)

// RedactSQL returns s with every single-quoted SQL string literal ('…', with backslash
// escapes and doubled quotes; an unterminated one runs to the end) replaced by
// Redacted, then every run of 32 or more hex digits by <hex> and every address-shaped
// word by <email>. Values reach SQL text only as literals (svc renders typed values,
// the driver binds parameters as literals), so a redacted statement keeps its shape
// (tables, columns, functions, numbers, identifiers) and loses every value a person
// could be found by; the two patterns catch values some other text quotes bare.
func RedactSQL(s string) string {
	if strings.IndexByte(s, '\'') >= 0 {
		var b strings.Builder
		b.Grow(len(s))
		for i := 0; i < len(s); {
			j := strings.IndexByte(s[i:], '\'')
			if j < 0 {
				b.WriteString(s[i:])
				break
			}
			b.WriteString(s[i : i+j])
			b.WriteString(Redacted)
			i = literalEnd(s, i+j)
		}
		s = b.String()
	}
	s = longHex.ReplaceAllLiteralString(s, "<hex>")
	return emailLike.ReplaceAllLiteralString(s, "<email>")
}

// literalEnd returns the index just past the literal opening at s[open] (a quote).
func literalEnd(s string, open int) int {
	for i := open + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // the escaped byte, whatever it is
		case '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				i++ // a doubled quote is a quote inside the literal
				continue
			}
			return i + 1
		}
	}
	return len(s)
}

// redacting is a handler that passes every line to h with its message and every string
// in its attributes (errors and other values as their text) through RedactSQL.
type redacting struct{ h slog.Handler }

func (r redacting) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r redacting) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, RedactSQL(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r redacting) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redacting{r.h.WithAttrs(red)}
}

func (r redacting) WithGroup(name string) slog.Handler { return redacting{r.h.WithGroup(name)} }

// redactAttr redacts a's strings: a string, each member of a group, and any other value
// but a number, a bool, a time or a duration, as its text.
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, RedactSQL(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, m := range g {
			red[i] = redactAttr(m)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, RedactSQL(err.Error()))
		}
		return slog.String(a.Key, RedactSQL(fmt.Sprint(v.Any())))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}

// credentials are the forms a credential takes in a dependency's error text: a URL's
// user information (redis://user:password@host) and a key=value pair of a DSN or query
// string named like one.
var (
	userinfo  = regexp.MustCompile(`://[^/@\s]*@`)
	secretKVs = regexp.MustCompile(`(?i)\b(password|passwd|pwd|secret|token|auth)=[^&\s]*`)
)

// RedactCredentials returns s with a URL's user information and password-like
// key=value pairs replaced by <redacted>, for a dependency's error logged as it came
// (addresses and the dependency's own words stay: they are what an operator needs).
func RedactCredentials(s string) string {
	s = userinfo.ReplaceAllLiteralString(s, "://<redacted>@")
	return secretKVs.ReplaceAllString(s, "$1=<redacted>")
}
