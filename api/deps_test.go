package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The read role does not depend on the admin CLI (api/admin assembles its commands
// from the packages it drives, never the other way).
func TestReadRoleDoesNotDependOnTheCLI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "svc/api/read").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "svc/api/admin" {
			t.Fatal("svc/api/read depends on svc/api/admin")
		}
	}
}
