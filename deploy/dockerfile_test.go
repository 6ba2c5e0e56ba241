package deploy

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile: the image builds with the Go release go.mod names, every COPY --from
// names an earlier stage, the build stage compiles the module root (bin/svc's main
// package), and the runtime stage runs as a non-root user with svc as entrypoint.
func TestDockerfile(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := ""
	for _, l := range strings.Split(string(mod), "\n") {
		if strings.HasPrefix(l, "go ") {
			goVersion = strings.TrimSpace(strings.TrimPrefix(l, "go "))
		}
	}
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	from := regexp.MustCompile(`(?i)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$`)
	copyFrom := regexp.MustCompile(`(?i)^COPY\s+--from=(\S+)`)
	stages := map[string]bool{}
	var last, argGo, user, entrypoint string
	built := false
	sc := bufio.NewScanner(f)
	var line string
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		line += strings.TrimSuffix(l, "\\")
		if strings.HasSuffix(l, "\\") {
			line += " "
			continue
		}
		l, line = line, ""
		if m := from.FindStringSubmatch(l); m != nil {
			last = m[2]
			if last != "" {
				stages[strings.ToLower(last)] = true
			}
			user, entrypoint = "", ""
			continue
		}
		if m := copyFrom.FindStringSubmatch(l); m != nil && !stages[strings.ToLower(m[1])] {
			t.Errorf("COPY --from=%s: no earlier stage of that name", m[1])
		}
		switch {
		case strings.HasPrefix(l, "ARG GO_VERSION="):
			argGo = strings.TrimPrefix(l, "ARG GO_VERSION=")
		case strings.HasPrefix(l, "USER "):
			user = strings.TrimPrefix(l, "USER ")
		case strings.HasPrefix(l, "ENTRYPOINT "):
			entrypoint = strings.TrimPrefix(l, "ENTRYPOINT ")
		case strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") && strings.HasSuffix(l, " ."):
			built = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Same language version (major.minor); a newer patch in go.mod is fetched by the
	// toolchain itself (GOTOOLCHAIN=auto) during docker build.
	if minor := func(v string) string { p := strings.SplitN(v, ".", 3); return strings.Join(p[:min(2, len(p))], ".") }; argGo == "" || minor(argGo) != minor(goVersion) {
		t.Errorf("Dockerfile GO_VERSION %q, go.mod says go %q", argGo, goVersion)
	}
	if !built {
		t.Error("no `go build ... .` of the module root")
	}
	if last != "runtime" {
		t.Errorf("last stage %q, want runtime", last)
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("runtime stage runs as %q, want a non-root user", user)
	}
	if !strings.Contains(entrypoint, "/usr/local/bin/svc") {
		t.Errorf("ENTRYPOINT %s, want svc", entrypoint)
	}
}
