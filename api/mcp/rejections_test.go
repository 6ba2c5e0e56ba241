package mcp_test

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"svc/api/docs"
	"svc/schema/catalog"
	"svc/schema/rejection"
)

// mcp.md: "| rejections | GET /rejections | pixels:read |"; "Each tool has an input schema
// (the operation's parameters) and returns the operation's JSON body as structured
// content. List tools take limit and cursor and return meta.next_cursor." At the current
// revision and the one before it, the tool is listed with those parameters; its result
// matches GET /rejections' response schema and is the REST body for the same query
// (newest first, since and rule applied, meta.rejections and meta.not_stored); a cursor
// is followed; without pixels:read it is a tool error naming that scope.
func TestRejectionsToolAtTheCurrentAndPreviousRevision(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	pixel := "pxl_" + catalog.ShowroomPixel.String()
	m0 := time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	sample := func(at time.Duration, req string, index int16, field, rule, value string) rejection.Row {
		return rejection.Row{Workspace: catalog.ShowroomWorkspace, Sandbox: true, Pixel: catalog.ShowroomPixel, ReceivedAt: m0.Add(at),
			RequestID: req, Status: 202, BatchEvents: 3, Index: index, Field: field, Rule: rule, Value: value, Sample: true, Rejections: 1}
	}
	rows := []rejection.Row{
		sample(10*time.Second, "req_a", 0, "currency", "iso4217", `"EURO"`),
		sample(time.Minute, "req_b", 2, "identity.email", "email", `"(withheld)"`),
		sample(2*time.Minute, "req_c", 1, "currency", "iso4217", `"EUROS"`),
		{Workspace: catalog.ShowroomWorkspace, Sandbox: true, Pixel: catalog.ShowroomPixel, ReceivedAt: m0.Add(2 * time.Minute),
			Status: 422, Field: "currency", Rule: "iso4217", Rejections: 5}, // counted past the cap, not stored
	}
	for i := range rows {
		rows[i].Offset = int64(i)
	}
	if err := rejection.Insert(ctx, rg.conn, "rejections.v1@test", time.Now(), rows); err != nil {
		t.Fatal(err)
	}
	schema := docs.Inline(docs.Operations["GET /rejections"].Response)
	secret := rg.key(t, "pixels:read")
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			cs := rg.connect(t, secret, rev)
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, tl := range lt.Tools {
				if tl.Name != "rejections" {
					continue
				}
				listed = true
				in, _ := json.Marshal(tl.InputSchema)
				for _, p := range []string{"pixel_id", "since", "rule", "limit", "cursor"} {
					if !strings.Contains(string(in), `"`+p+`"`) {
						t.Errorf("rejections' input schema %s lacks %s", in, p)
					}
				}
				if tl.OutputSchema == nil {
					t.Error("rejections has no output schema")
				}
			}
			if !listed {
				t.Fatal("tools/list has no rejections tool")
			}
			check := func(args map[string]any, wantReqs []string, wantRejections, wantNotStored float64) map[string]any {
				t.Helper()
				res := call(t, cs, "rejections", args)
				m := structured(t, res)
				if res.IsError {
					t.Fatalf("rejections %v: tool error: %v", args, m)
				}
				if errs := docs.Validate(schema, m, nil); len(errs) > 0 {
					t.Errorf("rejections %v: result does not match its output schema: %v", args, errs)
				}
				var reqs []string
				for _, d := range m["data"].([]any) {
					reqs = append(reqs, d.(map[string]any)["request_id"].(string))
				}
				meta := m["meta"].(map[string]any)
				if !reflect.DeepEqual(reqs, wantReqs) || meta["rejections"] != wantRejections || meta["not_stored"] != wantNotStored {
					t.Errorf("rejections %v: %v, meta %v; want %v, rejections %v, not_stored %v", args, reqs, meta, wantReqs, wantRejections, wantNotStored)
				}
				// The operation's JSON body, for the same query with the same key.
				v := url.Values{}
				for k, a := range args {
					v.Set(k, fmt.Sprint(a))
				}
				q := "/v1/rejections?" + v.Encode()
				var rest map[string]any
				if r := rg.Do(t, "GET", q, secret, ""); r.Status != 200 || json.Unmarshal(r.Body, &rest) != nil {
					t.Fatalf("GET %s: %d %s", q, r.Status, r.Body)
				} else if !reflect.DeepEqual(rest, m) {
					t.Errorf("rejections %v: %v\nGET %s: %v", args, m, q, rest)
				}
				return m
			}
			page := check(map[string]any{"pixel_id": pixel, "limit": 1}, []string{"req_c"}, 8, 5)
			cur, _ := page["meta"].(map[string]any)["next_cursor"].(string)
			if cur == "" {
				t.Fatalf("first page of one: no next_cursor in %v", page)
			}
			check(map[string]any{"pixel_id": pixel, "limit": 1, "cursor": cur}, []string{"req_b"}, 8, 5)
			check(map[string]any{"pixel_id": pixel, "rule": "iso4217"}, []string{"req_c", "req_a"}, 7, 5)
			check(map[string]any{"pixel_id": pixel, "since": m0.Add(time.Minute + 30*time.Second).Format(time.RFC3339)}, []string{"req_c", "req_b"}, 7, 5)
			check(map[string]any{"pixel_id": pixel, "rule": "email"}, []string{"req_b"}, 1, 0)
		})
	}
	cs := rg.connect(t, rg.key(t, "plans:read"), revisions[0])
	res := call(t, cs, "rejections", map[string]any{"pixel_id": pixel})
	if p := structured(t, res); !res.IsError || p["code"] != "insufficient_scope" || p["required_scope"] != "pixels:read" {
		t.Fatalf("rejections without pixels:read: %v %v, want insufficient_scope naming pixels:read", res.IsError, p)
	}
}
