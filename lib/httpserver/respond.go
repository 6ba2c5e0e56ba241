package httpserver

import (
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"svc/lib/limits"
	"svc/lib/problem"
)

func unavailable(what string) *problem.Problem { return problem.Unavailable(what, 1) }

// writeProblem writes p as the response. A problem may quote what the request sent, so
// it is never to be read as anything but JSON (nosniff), nor kept by a cache (no-store).
func (s *Server) writeProblem(ctx *fasthttp.RequestCtx, reqID string, dec *limits.Decision, p *problem.Problem) {
	p.Finish(s.Config.DocsURL(), reqID)
	b, _ := json.Marshal(p)
	ctx.SetStatusCode(p.Status)
	ctx.SetContentType("application/problem+json")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b)
	if p.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if len(p.Allow) > 0 {
		ctx.Response.Header.Set("Allow", strings.Join(p.Allow, ", "))
	}
	ctx.SetUserValue(problemCodeKey, string(p.Code))
	s.commonHeaders(ctx, reqID, dec)
}

const problemCodeKey = "svc.problem"

// commonHeaders sets Request-Id and the rate-limit headers every response carries.
func (s *Server) commonHeaders(ctx *fasthttp.RequestCtx, reqID string, dec *limits.Decision) {
	ctx.Response.Header.Set("Request-Id", reqID)
	if dec == nil {
		dec = &s.noKey
	}
	s.rateHeaders(ctx, dec)
}

func (s *Server) rateHeaders(ctx *fasthttp.RequestCtx, dec *limits.Decision) {
	for _, kv := range rateHeaderValues(dec) {
		ctx.Response.Header.Set(kv[0], kv[1])
	}
}

// rateHeaderValues are the rate-limit headers of dec, names and values.
func rateHeaderValues(dec *limits.Decision) [5][2]string {
	c := dec.Closest()
	if !dec.Allowed && dec.Denied != "" {
		c = dec.Burst
		if dec.Denied == "daily" {
			c = dec.Daily
		}
	}
	return [5][2]string{{"RateLimit-Policy", limits.Policy(dec.Burst.Window, dec.Daily.Window)},
		{"RateLimit-Limit", strconv.Itoa(c.Quota)}, {"RateLimit-Remaining", strconv.Itoa(c.Remaining)},
		{"RateLimit-Reset", strconv.Itoa(c.Reset)}, {"RateLimit", limits.Draft(dec)}}
}

func (s *Server) observe(ctx *fasthttp.RequestCtx, route string, start time.Time) {
	if s.Deps.Metrics == nil {
		return
	}
	code, _ := ctx.UserValue(problemCodeKey).(string)
	if code == "" {
		code = strconv.Itoa(ctx.Response.StatusCode())
	}
	s.Deps.Metrics.Requests.WithLabelValues(route, code).Inc()
	s.Deps.Metrics.Duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
}
