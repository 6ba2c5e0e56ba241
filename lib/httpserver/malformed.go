package httpserver

import (
	"errors"
	"log/slog"
	"regexp"
	"strings"

	"github.com/valyala/fasthttp"

	"svc/lib/problem"
)

// malformedPart is the part of a request fasthttp could not read, as an errors[] entry
// names it, with what to send instead.
type malformedPart struct {
	field, detail string
}

// malformedParts are matched in order against the text of fasthttp's error (never
// echoed: it quotes the raw request, headers and secrets included).
var malformedParts = []struct {
	clues []string
	part  malformedPart
}{
	{[]string{"request method", "first line", "http version", "request uri", "requesturi", "request line"},
		malformedPart{"request_line", "Send the request line as METHOD /path HTTP/1.1: a known method, then the target without spaces, one space each side."}},
	{[]string{"content-length"},
		malformedPart{"Content-Length", "Send one Content-Length header holding the body's length in decimal digits."}},
	{[]string{"transfer-encoding"},
		malformedPart{"Transfer-Encoding", "Send the body with a Content-Length, or with Transfer-Encoding: chunked once; no other transfer coding is accepted."}},
	{[]string{"host header"},
		malformedPart{"Host", "Send exactly one Host header."}},
	{[]string{"header", "trailer"},
		malformedPart{"headers", "Send each header as Name: value on its own line, the name a token (letters, digits, -) followed directly by a colon."}},
	{[]string{"chunk", "hex number", "body"},
		malformedPart{"body", "Send exactly the bytes Content-Length announces, or well-formed chunks: the size in hex, CRLF, the data, CRLF, and a last chunk of size 0."}},
}

// quoted matches a %q-quoted string in fasthttp's error text: request bytes.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// malformedOf names the part of the request that err, fasthttp's reading error, is about.
// It reads only fasthttp's own words: the request bytes the text quotes (and the
// "buffer size=…, contents: …" fasthttp appends) are dropped first.
func malformedOf(err error) malformedPart {
	text, _, _ := strings.Cut(err.Error(), "buffer size=")
	text = strings.ToLower(quoted.ReplaceAllString(text, ""))
	for _, m := range malformedParts {
		for _, c := range m.clues {
			if strings.Contains(text, c) {
				return m.part
			}
		}
	}
	return malformedPart{"request", "Send a well-formed HTTP/1.1 request: request line, headers as Name: value, an empty line, then the body."}
}

// malformedProblem is the 422 invalid_request for a request fasthttp could not read:
// errors[] names the part to fix (rule http_syntax, or max_length for a request line
// and headers over the read buffer).
func malformedProblem(err error) *problem.Problem {
	var small *fasthttp.ErrSmallBuffer // it has no Unwrap: errors.Is does not see ErrSmallReadBuffer
	if errors.As(err, &small) || errors.Is(err, fasthttp.ErrSmallReadBuffer) {
		return problem.Invalid("The request line and headers are larger than the server reads.", problem.FieldError{
			Field: "headers", Rule: "max_length", Value: readBufferSize,
			Detail: "Send a request line and headers of at most this many bytes together: a shorter query string, fewer or shorter headers."})
	}
	part := malformedOf(err)
	return problem.Invalid("The request could not be read as HTTP/1.1: its "+strings.ReplaceAll(part.field, "_", " ")+" is malformed.",
		problem.FieldError{Field: part.field, Rule: "http_syntax", Value: nil, Detail: part.detail})
}

// connLogger is fasthttp's logger. fasthttp logs a connection's reading error with the
// raw bytes it read (an Authorization header among them); this logs the format and, for
// an error, only the part of the request it concerns, never the arguments.
type connLogger struct{ log *slog.Logger }

func (l connLogger) Printf(format string, args ...any) {
	if l.log == nil {
		return
	}
	attrs := []any{"format", format}
	for _, a := range args {
		if err, ok := a.(error); ok {
			attrs = append(attrs, "part", malformedOf(err).field)
		}
	}
	l.log.Debug("http connection", attrs...)
}
