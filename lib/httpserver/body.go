package httpserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"svc/lib/problem"
)

// Request bodies are streamed (fasthttp.Server.StreamRequestBody): fasthttp reads the
// headers and at most one body byte, then calls Handle, which routes and authenticates on
// the headers and only then reads the body, here, into a pooled buffer that grows with the
// bytes that really arrive. A client without a valid key therefore costs no body memory,
// whatever Content-Length it announces, and a client with one costs what it has sent.
//
// Each route has a body ceiling (bodyLimit): none for a route that takes no body (GET, and
// so HEAD), else Config.MaxBodyBytes or the route's lower MaxBody. headerReceived checks
// an announced body against it before fasthttp reads a byte of it; Handle answers 413 and
// closes the connection, the body unread.
//
// Two budgets bound the body bytes the whole process holds at once: bodies read after a
// key was checked draw from Config.MaxInflightBodyBytes, and those read before any key
// (a public route's: the route authenticates the body itself) from the smaller
// Config.MaxInflightPublicBodyBytes, so that anonymous clients never hold the first. Past
// its budget a request gets 503 service_unavailable instead of more memory.

const (
	// bodyChunk is the first buffer of a body and its smallest growth.
	bodyChunk = 4 << 10
	// maxPooledBody is the largest buffer kept for reuse; larger ones go to the GC.
	maxPooledBody = 64 << 10
	// oversizeHeader marks, in HeaderReceived, a request whose announced body its route
	// cannot take (over its ceiling, or any body on a route that takes none), with the
	// announced length (-1: chunked). Its Content-Length is then set to 0 so fasthttp
	// calls Handle without waiting for a body byte, and Handle answers 413 and closes the
	// connection before any of the body is read. A client-sent header of this name is
	// removed first.
	oversizeHeader = "Svc-Internal-Body-Over-Limit"
	// framingHeader marks, in HeaderReceived, a request that announced its body both
	// with Content-Length and with Transfer-Encoding (RFC 9112 §6.1: a proxy in front
	// that went by the Content-Length would see another request boundary than ours).
	// Its body is not read: Handle answers 422 and closes the connection. A client-sent
	// header of this name is removed first.
	framingHeader = "Svc-Internal-Body-Framing-Conflict"
)

// bodyBudget counts the bytes of body buffers held by requests in flight.
type bodyBudget struct {
	limit int64
	what  string // "request bodies": what a 503 says the server holds
	used  atomic.Int64
}

// take reserves n bytes; false (and nothing reserved) when that would pass the limit.
func (b *bodyBudget) take(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *bodyBudget) give(n int) { b.used.Add(-int64(n)) }

// headerReceived runs on every request's headers before fasthttp reads any of its body:
// an announced body the route cannot take is marked for a 413 and not waited for. (Handle
// decides again on the mark or the Content-Length: this only spares the pre-read.)
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	h.Del(oversizeHeader)
	h.Del(framingHeader)
	n := h.ContentLength()
	if n == 0 || n < -1 { // -2: neither Content-Length nor Transfer-Encoding, no body
		return fasthttp.RequestConfig{}
	}
	if n == -1 && hasHeaderLine(h.RawHeaders(), "content-length") {
		h.Set(framingHeader, "1")
		h.SetContentLength(0)
		return fasthttp.RequestConfig{}
	}
	if n > s.Config.MaxBodyBytes || tooLarge(n, s.headerLimit(h)) {
		h.Set(oversizeHeader, strconv.Itoa(n))
		h.SetContentLength(0)
	}
	return fasthttp.RequestConfig{}
}

// hasHeaderLine reports whether raw, a request's header lines as received, holds a
// header named name (lower case), in any letter case.
func hasHeaderLine(raw []byte, name string) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if k, _, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(bytes.TrimSpace(k), []byte(name)) {
			return true
		}
	}
	return false
}

// framingConflict is the 422 of a request headerReceived marked with framingHeader (nil
// for any other). It marks the connection to close: the body is not read.
func framingConflict(ctx *fasthttp.RequestCtx) *problem.Problem {
	if len(ctx.Request.Header.Peek(framingHeader)) == 0 {
		return nil
	}
	ctx.SetConnectionClose()
	return problem.Invalid("The request could not be read as HTTP/1.1: it announced its body with both Content-Length and Transfer-Encoding.",
		problem.FieldError{Field: "Transfer-Encoding", Rule: "http_syntax", Value: nil,
			Detail: "Send the body with a Content-Length, or with Transfer-Encoding: chunked, never both."})
}

// encodingRefused is the 422 of a request with a body r's route would read that
// names a Content-Encoding other than identity (nil for any other request): the server
// decodes none, and reading compressed bytes as JSON would answer with a misleading
// rule, or accept a body labelled compressed that is not. It marks the connection to
// close: the body is not read.
func encodingRefused(r *Request) *problem.Problem {
	vs := r.Ctx.Request.Header.PeekAll(fasthttp.HeaderContentEncoding)
	if n := r.Ctx.Request.Header.ContentLength(); len(vs) == 0 || !r.route.takesBody() || n == 0 || n < -1 {
		return nil
	}
	for _, v := range vs {
		if !strings.EqualFold(strings.TrimSpace(string(v)), "identity") {
			r.Ctx.SetConnectionClose()
			return problem.Invalid("The body is sent with a Content-Encoding the server does not decode.",
				problem.FieldError{Field: "Content-Encoding", Rule: "identity", Value: string(v),
					Detail: "Send the body uncompressed, without Content-Encoding (or with identity)."})
		}
	}
	return nil
}

// headerLimit is the body ceiling of the route h asks for (Config.MaxBodyBytes when no
// route matches: the answer is then 404 or 405, the body unread).
func (s *Server) headerLimit(h *fasthttp.RequestHeader) int {
	u := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(u)
	if u.Parse(h.Host(), h.RequestURI()) != nil {
		return s.Config.MaxBodyBytes
	}
	c, _ := s.rt.match(string(h.Method()), stripVersion(string(u.Path())), nil)
	if c == nil {
		return s.Config.MaxBodyBytes
	}
	return s.bodyLimit(c)
}

// bodyLimit is the largest body route c takes: 0 when it takes none.
func (s *Server) bodyLimit(c *compiled) int {
	if !c.takesBody() {
		return 0
	}
	if c.MaxBody > 0 {
		return min(s.Config.MaxBodyBytes, c.MaxBody)
	}
	return s.Config.MaxBodyBytes
}

// tooLarge reports an announced body (a length, or -1 for chunked) that a route with
// ceiling limit refuses on the headers alone. A chunked body is cut at the ceiling as it
// is read, unless the route takes none.
func tooLarge(announced, limit int) bool {
	return announced > limit || announced == -1 && limit == 0
}

// announcedBody is the body length the request announced (-1: chunked; 0 or less than
// -1: none), as the client sent it even when headerReceived marked it.
func announcedBody(ctx *fasthttp.RequestCtx) int {
	if v := ctx.Request.Header.Peek(oversizeHeader); len(v) > 0 {
		n, _ := strconv.Atoi(string(v))
		return n
	}
	return ctx.Request.Header.ContentLength()
}

// announcedOversize reports a request marked by headerReceived: its body is on the
// connection, unread, and the connection must close after the answer.
func announcedOversize(ctx *fasthttp.RequestCtx) bool {
	return len(ctx.Request.Header.Peek(oversizeHeader)) > 0
}

// bodyRefused is the 413 for a body r's route cannot take, decided on the headers (nil
// when the body may be read). It marks the connection to close: the body is not read.
// A request headerReceived marked is refused whatever it finds (both match the same
// parsed path, so they agree): its Content-Length was zeroed and its body must not be
// read as empty.
func (s *Server) bodyRefused(r *Request) *problem.Problem {
	n, limit := announcedBody(r.Ctx), s.bodyLimit(r.route)
	if !tooLarge(n, limit) && !announcedOversize(r.Ctx) {
		return nil
	}
	r.Ctx.SetConnectionClose()
	if limit == 0 {
		return problem.New(problem.PayloadTooLarge, "%s %s takes no body: send it without Content-Length (or with 0) and without Transfer-Encoding.",
			r.Ctx.Method(), r.route.Path)
	}
	return problem.New(problem.PayloadTooLarge, "The body is larger than %d bytes.", limit)
}

// readBody reads a streamed request body of at most limit bytes, so that Request.Body
// (and fasthttp's PostBody) return it. A body already in memory (a request dispatched in
// process) is left as it is. The buffer grows by doubling from bodyChunk, and to the
// announced length at most, as bytes arrive; each growth is charged to budget. On
// failure the connection is closed after the answer: what is left of the body is never
// read.
func (s *Server) readBody(r *Request, limit int, budget *bodyBudget) *problem.Problem {
	req := &r.Ctx.Request
	if !req.IsBodyStream() {
		return nil
	}
	announced := req.Header.ContentLength()
	if announced == 0 {
		req.ResetBody()
		return nil
	}
	bp, _ := s.bodyBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	r.body, r.budget = bp, budget
	buf := (*bp)[:0]
	if !budget.take(cap(buf)) {
		return s.bodyFailed(r, budget.busy())
	}
	r.bodyHeld = cap(buf)
	stream := r.Ctx.RequestBodyStream()
	for {
		if len(buf) == cap(buf) {
			next := growTo(len(buf), announced, limit)
			if !budget.take(next - cap(buf)) {
				*bp = buf
				return s.bodyFailed(r, budget.busy())
			}
			r.bodyHeld += next - cap(buf)
			buf = append(make([]byte, 0, next), buf...)
		}
		n, err := stream.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			*bp = buf
			return s.bodyFailed(r, problem.New(problem.PayloadTooLarge, "The body is larger than %d bytes.", limit))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			*bp = buf
			return s.bodyFailed(r, bodyReadProblem(err, s.Config.ReadTimeout))
		}
	}
	*bp = buf
	req.SetBodyRaw(buf)
	return nil
}

// growTo is the next capacity of a body buffer holding have bytes: double, at least
// bodyChunk, no more than the announced length (when known) and one byte over limit
// (so that a longer body is seen).
func growTo(have, announced, limit int) int {
	next := max(bodyChunk, 2*have)
	if announced > have {
		next = min(next, announced)
	}
	return min(next, limit+1)
}

// busy is the 503 for a request whose body would pass the budget.
func (b *bodyBudget) busy() *problem.Problem {
	p := problem.New(problem.ServiceUnavailable,
		"The server holds its limit of %s in flight (%d bytes); nothing was changed.", b.what, b.limit)
	p.RetryAfter = 1
	return p
}

func (s *Server) bodyFailed(r *Request, p *problem.Problem) *problem.Problem {
	r.Ctx.SetConnectionClose()
	return p
}

// releaseBody returns the request's body buffer to the pool and its bytes to the budget.
// It runs when Handle returns: nothing may use Request.Body after that.
func (s *Server) releaseBody(r *Request) {
	if r.body == nil {
		return
	}
	r.Ctx.Request.SetBodyRaw(nil)
	r.budget.give(r.bodyHeld)
	if cap(*r.body) > maxPooledBody {
		*r.body = nil
	}
	*r.body = (*r.body)[:0]
	s.bodyBufs.Put(r.body)
	r.body, r.bodyHeld, r.budget = nil, 0, nil
}

// unreadBody reports a request whose body is still on the connection (not read by
// Handle, or marked by headerReceived): the connection must then close after the
// answer, or the rest of the body would be read as the next request.
func unreadBody(ctx *fasthttp.RequestCtx) bool {
	return announcedOversize(ctx) || ctx.Request.IsBodyStream() && ctx.Request.Header.ContentLength() != 0
}

// bodyReadProblem is the 422 for a body that could not be read after the headers were
// accepted: malformed chunks name the body's syntax, anything else (a stall past the read
// timeout, a broken connection) says the body did not arrive in full. Either way errors[]
// names the body, as the problem's suggested_action promises.
func bodyReadProblem(err error, readTimeout time.Duration) *problem.Problem {
	if !errors.Is(err, os.ErrDeadlineExceeded) && malformedOf(err).field == "body" {
		return malformedProblem(err)
	}
	return problem.Invalid(fmt.Sprintf("The body did not arrive in full within %s (or the connection broke).", readTimeout),
		problem.FieldError{Field: "body", Rule: "incomplete", Value: nil,
			Detail: "Send the whole body promptly: exactly the bytes Content-Length announces, or chunks ending with a last chunk of size 0."})
}
