package paging

import (
	"os/exec"
	"strings"
	"testing"

	"svc/lib/problem"
)

// The convention packages a store or the Go client imports (api/README.md: "no HTTP")
// carry no HTTP server stack.
func TestNoHTTPStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "svc/lib/paging", "svc/lib/signature", "svc/api/client",
		"svc/lib/problem", "svc/schema/workspace", "svc/lib/limits", "svc/lib/idempotency", "svc/lib/ids").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "github.com/valyala/fasthttp") {
		t.Fatal("a package api/README.md says has no HTTP depends on fasthttp")
	}
}

// Parse reports every bad parameter and refuses an offset beside a cursor; a cursor
// round-trips and belongs to one list.
func TestParse(t *testing.T) {
	cur := *Cursor{List: "plans", Name: "x"}.Encode()
	q := map[string]string{"limit": "1001", "cursor": cur, "offset": "5"}
	var errs []problem.FieldError
	p := Parse(func(k string) string { return q[k] }, "plans", nil, &errs)
	if len(errs) != 2 || errs[0].Rule != "range_1_1000" || errs[1].Rule != "not_with_cursor" || p.After == nil || p.After.Name != "x" {
		t.Fatalf("page %+v, errors %+v", p, errs)
	}
	errs = nil
	p = Parse(func(k string) string { return q[k] }, "campaigns", nil, &errs)
	if p.After != nil || len(errs) != 2 || errs[1].Rule != "cursor" || !p.OffsetParam {
		t.Fatalf("another list's cursor: page %+v, errors %+v", p, errs)
	}
	errs = nil
	if p = Parse(func(string) string { return "" }, "plans", nil, &errs); p.Limit != DefaultLimit || len(errs) != 0 {
		t.Fatalf("defaults: %+v %v", p, errs)
	}
}
