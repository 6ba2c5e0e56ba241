package api_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	json "github.com/goccy/go-json"

	"svc/api"
	"svc/lib/apikey"
	"svc/lib/limits"
	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

// env is a read API over the real Redis and a private ClickHouse database.
type env struct {
	*apitest.Server
	API  *api.API
	Conn driver.Conn
}

func newEnv(t testing.TB) *env {
	t.Helper()
	_, conn := chtest.NewDB(t)
	a := &api.API{Conn: conn}
	s := apitest.Start(t, a.Routes(), nil)
	a.Keys = s.Keys
	return &env{Server: s, API: a, Conn: conn}
}

// tenant is a workspace with a pixel and a key holding every scope and generous limits.
type tenant struct {
	apitest.Tenant
}

func (e *env) tenant(t testing.TB, showroom bool) tenant {
	t.Helper()
	w := e.Workspace(t, showroom)
	envName := apikey.Live
	if showroom {
		envName = apikey.Sandbox
	}
	k, sec := e.Key(t, workspace.KeySpec{WorkspaceID: w.ID, Env: envName, Burst: 1 << 20, Daily: limits.MaxQuota})
	return tenant{apitest.Tenant{Workspace: w, Pixel: e.Pixel(t, w.ID), Key: k, Secret: sec}}
}

// importDoc loads doc into tn's workspace.
func (e *env) importDoc(t testing.TB, tn tenant, doc catalog.Document) catalog.Batch {
	t.Helper()
	b, errs := doc.Resolve(tn.Workspace.ID)
	if len(errs) > 0 {
		t.Fatalf("document: %v", errs)
	}
	if _, errs, err := catalog.Write(context.Background(), e.Conn, tn.Workspace.ID, b); err != nil || len(errs) > 0 {
		t.Fatalf("import: %v %v", errs, err)
	}
	return b
}

// get sends GET path with tn's key and decodes a 200 body into v.
func (e *env) get(t testing.TB, secret, path string, v any) apitest.Response {
	t.Helper()
	resp := e.Do(t, "GET", path, secret, "")
	if v != nil && resp.Status == 200 {
		if err := json.Unmarshal(resp.Body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, resp.Body)
		}
	}
	return resp
}

// listPage is a decoded list response.
type listPage struct {
	Data []map[string]any `json:"data"`
	Meta struct {
		NextCursor *string `json:"next_cursor"`
		NextOffset *int    `json:"next_offset"`
	} `json:"meta"`
}

// walk follows path's cursor to the end with page size limit and returns every record.
func (e *env) walk(t testing.TB, secret, path string, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	sep := "?"
	if u, _ := url.Parse(path); u.RawQuery != "" {
		sep = "&"
	}
	next := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("walking %s does not end", path)
		}
		var p listPage
		resp := e.get(t, secret, next, &p)
		if resp.Status != 200 {
			t.Fatalf("GET %s: %d %s", next, resp.Status, resp.Body)
		}
		if len(p.Data) > limit {
			t.Fatalf("GET %s: %d records, limit %d", next, len(p.Data), limit)
		}
		all = append(all, p.Data...)
		if p.Meta.NextCursor == nil {
			return all
		}
		next = fmt.Sprintf("%s%slimit=%d&cursor=%s", path, sep, limit, url.QueryEscape(*p.Meta.NextCursor))
	}
}
