package httpserver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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
// bodyBudget bounds the body bytes the whole process holds at once
// (Config.MaxInflightBodyBytes): past it a request gets 503 service_unavailable instead
// of more memory.

const (
	// bodyChunk is the first buffer of a body and its smallest growth.
	bodyChunk = 4 << 10
	// maxPooledBody is the largest buffer kept for reuse; larger ones go to the GC.
	maxPooledBody = 64 << 10
	// oversizeHeader marks, in HeaderReceived, a request whose announced body is over
	// Config.MaxBodyBytes. Its Content-Length is then set to 0 so fasthttp calls Handle
	// without waiting for a body byte, and Handle answers 413 and closes the connection
	// before any of the body is read. A client-sent header of this name is removed first.
	oversizeHeader = "Svc-Internal-Body-Over-Limit"
)

// bodyBudget counts the bytes of body buffers held by requests in flight.
type bodyBudget struct {
	limit int64
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
// an announced body over the cap is marked for a 413 and not waited for.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	h.Del(oversizeHeader)
	if n := h.ContentLength(); n > s.Config.MaxBodyBytes {
		h.Set(oversizeHeader, strconv.Itoa(n))
		h.SetContentLength(0)
	}
	return fasthttp.RequestConfig{}
}

// announcedOversize reports a request marked by headerReceived.
func announcedOversize(ctx *fasthttp.RequestCtx) bool {
	return len(ctx.Request.Header.Peek(oversizeHeader)) > 0
}

// readBody reads a streamed request body of at most limit bytes, so that Request.Body
// (and fasthttp's PostBody) return it. A body already in memory (a request dispatched in
// process) is left as it is. The buffer grows by doubling from bodyChunk, and to the
// announced length at most, as bytes arrive; each growth is charged to the process's
// budget. On failure the connection is closed after the answer: what is left of the body
// is never read.
func (s *Server) readBody(r *Request, limit int) *problem.Problem {
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
	r.body = bp
	buf := (*bp)[:0]
	if !s.bodies.take(cap(buf)) {
		return s.bodyFailed(r, s.bodiesBusy())
	}
	r.bodyHeld = cap(buf)
	stream := r.Ctx.RequestBodyStream()
	for {
		if len(buf) == cap(buf) {
			next := growTo(len(buf), announced, limit)
			if !s.bodies.take(next - cap(buf)) {
				*bp = buf
				return s.bodyFailed(r, s.bodiesBusy())
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

func (s *Server) bodiesBusy() *problem.Problem {
	p := problem.New(problem.ServiceUnavailable,
		"The server holds its limit of request bodies in flight (%d bytes); nothing was changed.", s.bodies.limit)
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
	s.bodies.give(r.bodyHeld)
	if cap(*r.body) > maxPooledBody {
		*r.body = nil
	}
	*r.body = (*r.body)[:0]
	s.bodyBufs.Put(r.body)
	r.body, r.bodyHeld = nil, 0
}

// unreadBody reports a request whose body is still on the connection (not read by
// Handle): the connection must then close after the answer, or the rest of the body
// would be read as the next request.
func unreadBody(ctx *fasthttp.RequestCtx) bool {
	return ctx.Request.IsBodyStream() && ctx.Request.Header.ContentLength() != 0
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
