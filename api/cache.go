package api

import (
	"strings"
	"sync"
	"time"

	"svc/lib/httpserver"
)

// Cache is a micro-cache of hot list pages (GET /pixel-rollups, /plans/{id}/actuals,
// /campaigns/{id}/actuals). A 200 answer is fresh for TTL and served to identical
// requests of the same workspace and environment. Identical requests arriving while
// the first one queries wait for its answer (one query, not hundreds). After TTL, one
// request refreshes the page while the others are still served the previous one, for at
// most another TTL. So a page is at most 2×TTL older than ClickHouse; an actuals import
// through this process drops its workspace's pages at once, so its writer reads its own
// writes.
//
// Entries are keyed by workspace, environment, version and the full request URI, and
// are looked up only after the server has authenticated the key and checked its scope:
// a cached page is never served across workspaces. Offset-paged requests (deprecated,
// with their own headers) are not cached. Entries are immutable once published.
type Cache struct {
	TTL      time.Duration
	MaxBytes int // bound on the bodies held; over it, every finished entry is dropped

	mu         sync.Mutex
	m          map[string]*cacheEntry
	refreshing map[string]bool
	bytes      int
	now        func() time.Time
}

type cacheEntry struct {
	done    chan struct{} // closed once body and expires are set (never changed after)
	body    []byte        // the 200 body; nil when the first query did not answer 200
	expires time.Time
}

// NewCache returns a cache keeping pages fresh for ttl, holding at most maxBytes.
func NewCache(ttl time.Duration, maxBytes int) *Cache {
	return &Cache{TTL: ttl, MaxBytes: maxBytes, m: map[string]*cacheEntry{}, refreshing: map[string]bool{}, now: time.Now}
}

// serve answers r from the cache, or runs fill (which writes r's response) and keeps a
// 200 answer; it waits at most wait for another request's query. A nil cache, or an
// offset-paged request, always runs fill.
func (c *Cache) serve(r *httpserver.Request, wait time.Duration, fill func() error) error {
	if c == nil || c.TTL <= 0 || r.Query("offset") != "" {
		return fill()
	}
	key := r.Key.WorkspaceID.String() + "|" + r.Key.Env + "|" + r.Version + "|" + string(r.Ctx.RequestURI())
	e, body, lead := c.claim(key)
	if body != nil {
		r.Raw(200, "application/json", body)
		return nil
	}
	if !lead {
		t := time.NewTimer(wait)
		select {
		case <-e.done:
			t.Stop()
		case <-t.C:
			return fill()
		}
		if e.body == nil {
			return fill() // the first query failed; try for ourselves
		}
		r.Raw(200, "application/json", e.body)
		return nil
	}
	err := fill()
	body = nil
	if err == nil && r.Ctx.Response.StatusCode() == 200 {
		body = append([]byte(nil), r.Ctx.Response.Body()...)
	}
	c.finish(key, e, body)
	return err
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// claim returns what to do for key: a body to serve; or an entry whose first query is
// in flight to wait for (lead false); or lead true: run the query (e is the entry it
// fills or refreshes).
func (c *Cache) claim(key string) (e *cacheEntry, body []byte, lead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	e, ok := c.m[key]
	switch {
	case !ok:
		e = &cacheEntry{done: make(chan struct{})}
		c.m[key] = e
		return e, nil, true
	case !closed(e.done):
		return e, nil, false
	case now.Before(e.expires):
		return e, e.body, false
	case c.refreshing[key] && now.Before(e.expires.Add(c.TTL)):
		return e, e.body, false // stale while one request refreshes it
	}
	c.refreshing[key] = true
	return e, nil, true
}

// finish publishes a leader's answer (body nil: not cacheable). A first fill wakes its
// waiters; a refresh replaces the entry. Nothing is published for a key forgotten (or
// replaced) meanwhile: its answer may predate a write.
func (c *Cache) finish(key string, e *cacheEntry, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	current := c.m[key] == e
	if current {
		delete(c.refreshing, key)
	}
	if !closed(e.done) { // first fill
		e.body, e.expires = body, c.now().Add(c.TTL)
		close(e.done)
		if current && body == nil {
			delete(c.m, key)
		}
		if current && body != nil {
			c.add(len(body))
		}
		return
	}
	if current && body != nil {
		c.bytes -= len(e.body)
		c.m[key] = &cacheEntry{done: e.done, body: body, expires: c.now().Add(c.TTL)}
		c.add(len(body))
	}
}

// add accounts n more bytes, first dropping every finished entry when over MaxBytes.
func (c *Cache) add(n int) {
	if c.bytes+n > c.MaxBytes {
		for k, e := range c.m {
			if closed(e.done) {
				c.bytes -= len(e.body)
				delete(c.m, k)
				delete(c.refreshing, k)
			}
		}
	}
	c.bytes += n
}

// Forget drops the cached pages of workspace ws (after a write to it).
func (c *Cache) Forget(ws string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if strings.HasPrefix(k, ws+"|") {
			if closed(e.done) {
				c.bytes -= len(e.body)
			}
			delete(c.m, k)
			delete(c.refreshing, k)
		}
	}
}
