package paging

import (
	"testing"

	"svc/lib/problem"
)

// The default page size is literally 100: rollups.md ("limit | 1–1000, default 100"),
// rejections.md (the same) and decisions.md ("limit 1–1000, default 100"). A list
// request without limit is a page of 100.
func TestDefaultLimitIsLiterally100(t *testing.T) {
	if DefaultLimit != 100 {
		t.Fatalf("DefaultLimit is %d, the pages say 100", DefaultLimit)
	}
	var errs []problem.FieldError
	if p := Parse(func(string) string { return "" }, "pixel_rollups", nil, &errs); p.Limit != 100 || len(errs) != 0 {
		t.Fatalf("no limit: page %+v, errors %v; want a limit of 100", p, errs)
	}
}
