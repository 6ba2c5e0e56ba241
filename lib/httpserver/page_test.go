package httpserver_test

import (
	"net/http"
	"strings"
	"testing"

	"svc/lib/httpserver"
	"svc/schema/apitest"
)

// An application's page (Route.Page) needs no key, answers HTML and redirects without
// problem documents or rate-limit headers, and is no API operation: Routes leaves it out.
func TestPageRoutes(t *testing.T) {
	routes := []httpserver.Route{
		{Method: "GET", Path: "/app/page", Page: true, Handle: func(r *httpserver.Request) error {
			r.HTML(200, []byte("<!doctype html><p>hello"))
			return nil
		}},
		{Method: "POST", Path: "/app/page", Page: true, MaxBody: 1024, Handle: func(r *httpserver.Request) error {
			r.SeeOther("/app/page?posted=" + string(r.Body()))
			return nil
		}},
	}
	s := apitest.Start(t, routes, nil)
	r := s.Do(t, "GET", "/app/page", "", "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "text/html; charset=utf-8" || string(r.Body) != "<!doctype html><p>hello" ||
		r.Header.Get("RateLimit-Policy") != "" || !strings.HasPrefix(r.Header.Get("Request-Id"), "req_") {
		t.Fatalf("page: %d %v %s", r.Status, r.Header, r.Body)
	}
	s.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	r = s.Do(t, "POST", "/app/page", "", "x=1")
	if r.Status != 303 || r.Header.Get("Location") != "/app/page?posted=x=1" || len(r.Body) != 0 {
		t.Fatalf("redirect: %d %v %s", r.Status, r.Header, r.Body)
	}
	for _, rt := range s.API.Routes() {
		if rt.Page {
			t.Fatalf("Routes lists the page %s", rt.Path)
		}
	}
	// A page has no /v1 alias, as API operations do.
	apitest.Problem(t, s.Do(t, "GET", "/v1/app/page", "", ""), 404, "not_found")
}
