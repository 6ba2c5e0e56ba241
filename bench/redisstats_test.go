package bench

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every command svc's Lua calls (redis.call in the repository's Go sources) is a nested
// command: its time is already in the FCALL or EVALSHA that ran it, so "redis per
// request" must leave its own line out. A command added to a library without being
// listed would be counted twice (reserve_gate's MGET was, until stop 53).
func TestNestedCommandsCoverSvcsLua(t *testing.T) {
	call := regexp.MustCompile(`redis\.call\('([A-Za-z]+)'`)
	seen := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllSubmatch(b, -1) {
			seen[strings.ToLower(string(m[1]))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d commands called from Lua: %v", len(seen), seen)
	}
	for cmd := range seen {
		if !nestedCommands[cmd] {
			t.Errorf("svc's Lua calls %s, which nestedCommands does not list", strings.ToUpper(cmd))
		}
	}
}
