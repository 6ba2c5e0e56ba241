package httpserver

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"

	"svc/lib/ids"
	"svc/lib/problem"
)

// perIPListener bounds the open connections from one client address
// (Config.MaxConnsPerIP): an IPv4 address, or an IPv6 client's /64 (what one subscriber
// usually holds). Trusted proxies are exempt: every client behind them shares their
// address. A connection past the bound is answered 429 rate_limited at once and closed,
// before anything is read from it.
type perIPListener struct {
	net.Listener
	srv   *Server
	limit int
	mu    sync.Mutex
	open  map[netip.Addr]int
}

// limitConnsPerIP wraps ln when Config.MaxConnsPerIP is set.
func (s *Server) limitConnsPerIP(ln net.Listener) net.Listener {
	if s.Config.MaxConnsPerIP <= 0 {
		return ln
	}
	return &perIPListener{Listener: ln, srv: s, limit: s.Config.MaxConnsPerIP, open: map[netip.Addr]int{}}
}

// Accept returns the next connection within its address's bound.
func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client, ok := l.client(c)
		if !ok {
			return c, nil
		}
		if l.admit(client) {
			return &countedConn{Conn: c, release: func() { l.leave(client) }}, nil
		}
		l.refuse(c, client)
	}
}

// client is the address c counts against; false when c is exempt or not TCP.
func (l *perIPListener) client(c net.Conn) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, false
	}
	a := ap.Addr().Unmap()
	if l.srv.trusted(a) {
		return netip.Addr{}, false
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a, true
}

func (l *perIPListener) admit(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a] >= l.limit {
		return false
	}
	l.open[a]++
	return true
}

func (l *perIPListener) leave(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a]--; l.open[a] <= 0 {
		delete(l.open, a)
	}
}

// refuse answers c with a 429 problem document and closes it. The write goes to a fresh
// socket's empty send buffer, so it does not block the accept loop (a deadline bounds it
// regardless). No key is known: the rate-limit headers declare the default windows, with
// nothing spent, as any answer given before a key is.
func (l *perIPListener) refuse(c net.Conn, a netip.Addr) {
	p := problem.New(problem.RateLimited, "This address already holds %d open connections, the most allowed; reuse keep-alive connections.", l.limit)
	p.Finish(l.srv.Config.DocsURL(), ids.RequestID())
	body, _ := json.Marshal(p)
	head := "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n" +
		"Request-Id: " + p.RequestID + "\r\n"
	for _, kv := range rateHeaderValues(&l.srv.noKey) {
		head += kv[0] + ": " + kv[1] + "\r\n"
	}
	head += "Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(append([]byte(head), body...))
	_ = c.Close()
}

// countedConn gives its place back once, when closed.
type countedConn struct {
	net.Conn
	release func()
	closed  atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.release()
	}
	return c.Conn.Close()
}
