package e2e

// End-to-end tests of `svc api` (the read API alone) and its admin commands, through
// the built binary (helpers in e2e_test.go).

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startAPI runs `svc api` as the instance's process (stopped by in.stop) until ready.
func (in *instance) startAPI() {
	in.t.Helper()
	in.log = &bytes.Buffer{}
	in.dev = exec.Command(svcBin, "api")
	in.dev.Env = in.env
	in.dev.Stdout, in.dev.Stderr = in.log, in.log
	if err := in.dev.Start(); err != nil {
		in.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + in.http + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	in.t.Fatalf("svc api not ready:\n%s", in.log.String())
}

func TestReadAPIServesSeedAndImport(t *testing.T) {
	in := newInstance(t)
	in.run("migrate")
	seed := in.run("admin", "seed", "showroom")
	if again := in.run("admin", "seed", "showroom"); !bytes.Equal(seed, again) {
		t.Fatalf("seed differs between runs:\n%s\n%s", seed, again)
	}
	show := field(t, seed, "workspace_id")
	if !strings.HasPrefix(show, "org_") || !strings.HasPrefix(field(t, seed, "pixel_id"), "pxl_") {
		t.Fatalf("seed output %s", seed)
	}
	sandbox := field(t, in.run("admin", "key", "create", "--workspace", show, "--env", "sandbox",
		"--scopes", "plans:read,account:read,pixels:read"), "secret")

	ws := field(t, in.run("admin", "workspace", "create", "--name", "Importer"), "id")
	file := filepath.Join(t.TempDir(), "catalog.json")
	doc := `{"plans":[{"id":"pln_0c6f7d0e-4b8e-4c53-9a43-3f1b8f0c1a01","name":"Q1","objective":"conversion","status":"live",
		"start_date":"2026-01-01","end_date":"2026-03-31","budget":"5000","currency":"EUR","channels":["search"],
		"lines":[{"name":"Search","channel":"search","buy_type":"cpc","unit_cost":"0.5","start_date":"2026-01-01",
		"end_date":"2026-03-31","budget":"5000","status":"live"}]}]}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := in.run("admin", "import", file, "--workspace", ws); !bytes.Contains(out, []byte(`"plans":1`)) {
		t.Fatalf("import: %s", out)
	}
	live := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "plans:read"), "secret")

	in.startAPI()
	if st, b := in.get(sandbox, "/v1/plans"); st != 200 || bytes.Count(b, []byte(`"id":"pln_`)) != 3 {
		t.Fatalf("showroom plans: %d %s", st, b)
	}
	if st, b := in.get(sandbox, "/account"); st != 200 || !bytes.Contains(b, []byte(`"id":"`+show+`"`)) {
		t.Fatalf("showroom account: %d %s", st, b)
	}
	if st, b := in.get(live, "/v1/plans/0c6f7d0e-4b8e-4c53-9a43-3f1b8f0c1a01/lines"); st != 200 || bytes.Count(b, []byte(`"id":"lin_`)) != 1 {
		t.Fatalf("imported lines: %d %s", st, b)
	}
	if st, b := in.get(sandbox, "/v1/plans/pln_0c6f7d0e-4b8e-4c53-9a43-3f1b8f0c1a01"); st != 404 || !bytes.Contains(b, []byte(`"code":"not_found"`)) {
		t.Fatalf("a sandbox key reading a live plan: %d %s", st, b)
	}
	if err := in.stop(); err != nil {
		t.Fatalf("svc api did not stop cleanly: %v\n%s", err, in.log.String())
	}
}
