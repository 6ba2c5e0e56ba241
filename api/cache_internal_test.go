package api

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"svc/lib/apikey"
	"svc/lib/httpserver"
)

// cacheRequest is a GET of uri by a key of workspace ws, as the server hands it to a
// route once the key and its scope are checked.
func cacheRequest(ws uuid.UUID, uri string) *httpserver.Request {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	return &httpserver.Request{Ctx: ctx, Key: &apikey.Key{WorkspaceID: ws, Env: apikey.Live}, Version: "2026-09-01"}
}

// TestCacheQueriesOnceForConcurrentRequests: identical requests arriving while the first
// queries wait for its answer (one query, not hundreds); another workspace's identical
// URI, and an offset-paged request, always query (the cache's contract).
func TestCacheQueriesOnceForConcurrentRequests(t *testing.T) {
	c := NewCache(time.Minute, 1<<20)
	ws := uuid.New()
	var fills atomic.Int32
	release := make(chan struct{})
	fill := func(r *httpserver.Request) func() error {
		return func() error {
			fills.Add(1)
			<-release
			r.Raw(200, "application/json", []byte(`{"data":[]}`))
			return nil
		}
	}
	var wg sync.WaitGroup
	reqs := make([]*httpserver.Request, 20)
	for i := range reqs {
		reqs[i] = cacheRequest(ws, "/v1/pixel-rollups?pixel_id=p")
		wg.Add(1)
		go func(r *httpserver.Request) {
			defer wg.Done()
			if err := c.serve(r, 5*time.Second, fill(r)); err != nil {
				t.Error(err)
			}
		}(reqs[i])
	}
	time.Sleep(200 * time.Millisecond) // every request has claimed or is waiting
	close(release)
	wg.Wait()
	if n := fills.Load(); n != 1 {
		t.Fatalf("20 concurrent identical requests ran %d queries, want 1", n)
	}
	for i, r := range reqs {
		if string(r.Ctx.Response.Body()) != `{"data":[]}` {
			t.Fatalf("request %d answered %q", i, r.Ctx.Response.Body())
		}
	}
	for _, r := range []*httpserver.Request{
		cacheRequest(uuid.New(), "/v1/pixel-rollups?pixel_id=p"),
		cacheRequest(ws, "/v1/pixel-rollups?pixel_id=p&offset=10"),
		cacheRequest(ws, "/v1/pixel-rollups?pixel_id=p&offset=10"),
	} {
		before := fills.Load()
		if err := c.serve(r, time.Second, fill(r)); err != nil || fills.Load() != before+1 {
			t.Fatalf("%s of another workspace or offset-paged: served from the cache (%v)", r.Ctx.RequestURI(), err)
		}
	}
}
