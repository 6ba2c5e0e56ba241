package httpserver_test

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/api/docs"
	"svc/lib/httpserver"
	"svc/schema/apitest"
)

// bodyRoutes are testRoutes plus a public route that takes a body of at most 4 KiB (as the
// inbound webhook receiver does: it authenticates itself after reading the body).
func bodyRoutes() []httpserver.Route {
	return append(testRoutes(), httpserver.Route{Method: "POST", Path: "/hooks", Public: true, MaxBody: 4096,
		Handle: func(r *httpserver.Request) error { return r.JSON(200, map[string]int{"bytes": len(r.Body())}) }})
}

// refused asserts that c is answered 413 payload_too_large and closed.
func refused(t *testing.T, c net.Conn, what string) map[string]any {
	t.Helper()
	br := bufio.NewReader(c)
	r := readAnswer(t, c, br)
	if r.Status != 413 {
		t.Fatalf("%s: %d, want 413: %s", what, r.Status, r.Body)
	}
	m := apitest.Problem(t, r, 413, "payload_too_large")
	closed(t, c, br, what)
	return m
}

// closed asserts that the server closed c (nothing more to read, no timeout).
func closed(t *testing.T, c net.Conn, br *bufio.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("%s: the connection stays open after the answer (%v)", what, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestBodilessRouteCannotFillTheBudget is item 3 of issue 25, scaled down (8 KiB bodies,
// a budget of 64 of them): 66 connections send GET /healthz announcing a full body and
// all of it but one byte. Before, the public route read each body into the process's
// budget, and an authenticated POST then got 503; GET /healthz takes no body, so each is
// refused at once and holds nothing.
func TestBodilessRouteCannotFillTheBudget(t *testing.T) {
	const body = 8192
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) { c.MaxBodyBytes, c.MaxInflightBodyBytes = body, 64*body })
	tn := s.Tenant(t, false)
	msg := "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(body) + "\r\n\r\n" + strings.Repeat("x", body-1)
	conns := s.Flood(t, msg, 66)
	time.Sleep(500 * time.Millisecond) // time for the server to read what was sent
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`); r.Status != 201 {
		t.Fatalf("authenticated POST beside 66 stalled GET /healthz bodies: %d %s", r.Status, r.Body)
	}
	m := refused(t, conns[0], "GET /healthz with a body")
	if !strings.Contains(m["detail"].(string), "takes no body") {
		t.Fatalf("detail %v", m["detail"])
	}
}

// TestBodilessRoutesRefuseBodies: a GET route (public or not: health, documentation, a
// keyed read) answers a request that announces a body, by length or chunked, 413 and
// closes the connection; an empty Content-Length is no body.
func TestBodilessRoutesRefuseBodies(t *testing.T) {
	s := apitest.Start(t, append(testRoutes(), docs.Routes()...), nil)
	tn := s.Tenant(t, false)
	auth := "Authorization: Bearer " + tn.Secret + "\r\n"
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789",
		"GET /v1/readyz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"GET /openapi.json HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n{",
		"GET /developers/limits HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"HEAD /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"GET /things HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
	} {
		what := req[:strings.Index(req, " HTTP")]
		if strings.HasPrefix(req, "HEAD") {
			c := rawConn(t, s, req)
			br := bufio.NewReader(c)
			if r := readHead(t, c, br); r.Status != 413 {
				t.Fatalf("%s with a body: %d, want 413", what, r.Status)
			}
			closed(t, c, br, what)
			continue
		}
		refused(t, rawConn(t, s, req), what+" with a body")
	}
	c := rawConn(t, s, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		if r := readAnswer(t, c, br); r.Status != 200 {
			t.Fatalf("GET /healthz without a body (%d): %d %s", i, r.Status, r.Body)
		}
	}
}

// readHead reads the answer to a HEAD request (no body follows its headers).
func readHead(t *testing.T, c net.Conn, br *bufio.Reader) apitest.Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	r := apitest.Response{Header: map[string][]string{}}
	r.Status, _ = strconv.Atoi(strings.Fields(line)[1])
	for {
		l, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(l) == "" {
			return r
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			r.Header.Add(k, strings.TrimSpace(v))
		}
	}
}

// TestRouteCeilingBeforeReading: a Content-Length over the route's own ceiling (4 KiB
// here, under SVC_MAX_BODY_BYTES) is answered 413 on the headers alone, before one byte
// of the body arrives, on a public route as on an authenticated one; a chunked body stops
// at the route's ceiling.
func TestRouteCeilingBeforeReading(t *testing.T) {
	s := apitest.Start(t, bodyRoutes(), func(c *httpserver.Config) { c.ReadTimeout = 2 * time.Second })
	tn := s.Tenant(t, false)
	apitest.Problem(t, s.Oversize(t, "POST", "/hooks", "", 4097), 413, "payload_too_large")

	ceiling := append(testRoutes(), httpserver.Route{Method: "POST", Path: "/small", MaxBody: 4096,
		Handle: func(r *httpserver.Request) error { return r.JSON(200, map[string]int{"bytes": len(r.Body())}) }})
	a := apitest.Start(t, ceiling, func(c *httpserver.Config) { c.ReadTimeout = 2 * time.Second })
	atn := a.Tenant(t, false)
	apitest.Problem(t, a.Oversize(t, "POST", "/small", atn.Secret, 4097), 413, "payload_too_large")

	chunk := strconv.FormatInt(4097, 16) + "\r\n" + strings.Repeat("x", 4097) + "\r\n0\r\n\r\n"
	refused(t, rawConn(t, s, "POST /hooks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+chunk), "a chunked body over /hooks' ceiling")
	if r := s.Do(t, "POST", "/hooks", "", strings.Repeat("x", 4096)); r.Status != 200 {
		t.Fatalf("a body at /hooks' ceiling: %d %s", r.Status, r.Body)
	}
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`); r.Status != 201 {
		t.Fatalf("authenticated POST: %d %s", r.Status, r.Body)
	}
}

// TestPublicBodiesHaveTheirOwnBudget: bodies read before any key is checked (a public
// route's) draw from SVC_MAX_INFLIGHT_PUBLIC_BODY_BYTES, not from the authenticated
// budget: 20 stalled public bodies of 4 KiB each (more than the main budget of 64 KiB
// holds) leave a public request 503 with Retry-After and an authenticated one served.
func TestPublicBodiesHaveTheirOwnBudget(t *testing.T) {
	s := apitest.Start(t, bodyRoutes(), func(c *httpserver.Config) {
		c.MaxBodyBytes, c.MaxInflightBodyBytes, c.MaxInflightPublicBodyBytes = 8192, 64<<10, 16<<10
	})
	tn := s.Tenant(t, false)
	held := "POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n" + strings.Repeat("x", 4000)
	s.Flood(t, held, 20)
	time.Sleep(500 * time.Millisecond) // time for the server to read what was sent
	r := s.Do(t, "POST", "/hooks", "", `{}`)
	apitest.Problem(t, r, 503, "service_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`); r.Status != 201 {
		t.Fatalf("authenticated POST beside a full public budget: %d %s", r.Status, r.Body)
	}
}
