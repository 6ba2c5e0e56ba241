package process

import (
	"os/exec"
	"strings"
	"testing"
)

// The consumer, the contract between roles and the shared plumbing do not depend on the
// HTTP server stack: no arrow from rollup/, schema/ or lib/ into fasthttp or into the
// api package (the server and its conventions), whose HTTP front main.go puts in front
// of the roles. (Stores under api/ that carry no HTTP, such as api/keys, may be used.)
func TestNoHTTPStackBelowTheRoles(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "svc/rollup/...", "svc/schema/...", "svc/lib/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/valyala/fasthttp") || dep == "svc/api" || dep == "svc/api/admin" {
			t.Errorf("%s is a dependency of rollup, schema or lib", dep)
		}
	}
}
