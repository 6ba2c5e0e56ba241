package chtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"encoding/json"

	"svc/lib/settings"
)

// ChDB is a current ClickHouse (26.x) running in-process in a Node process: chDB, the
// npm packages pinned in chdb/package.json, which `make chdb` (part of `make test`)
// installs under SVC_DATA_DIR/chdb. No 26.x server runs here; chDB runs the same SQL
// engine, so a test runs the service's statements on it and on the local 18.16 server
// and compares the answers.
type ChDB struct {
	t       testing.TB
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	stderr  *bytes.Buffer
	version string
}

// NewChDB starts a chDB session for t (its data in a temporary folder), stopped at
// cleanup. Without node or the installed packages the test is skipped, unless CI=true,
// where it fails: CI must run every check.
func NewChDB(t testing.TB) *ChDB {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data := settings.New().String("SVC_DATA_DIR")
	if !filepath.IsAbs(data) {
		data = filepath.Join(root, data)
	}
	mods := filepath.Join(data, "chdb", "node_modules")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(mods, "chdb", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chDB is not installed (CI=true, not skipping; `make chdb` installs it): %v", err)
		}
		t.Skipf("chDB is not installed (`make chdb` installs it): %v", err)
	}
	dir := t.TempDir()
	c := &ChDB{t: t, stderr: &bytes.Buffer{}}
	c.cmd = exec.Command(node, filepath.Join(root, "schema", "chtest", "chdb", "chdb.js"), dir)
	c.cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	c.cmd.Stderr = c.stderr
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReaderSize(out, 1<<20)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	v, err := c.Query("SELECT version()")
	if err != nil || len(v.Rows) != 1 {
		t.Fatalf("chDB does not answer: %v (%s)", err, c.stderr)
	}
	c.version = v.Rows[0][0]
	return c
}

// stop closes the session's input and waits for node to exit (killing it after 10 s).
func (c *ChDB) stop() {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// Version is the ClickHouse version chDB runs, e.g. 26.7.2.1.
func (c *ChDB) Version() string { return c.version }

// Query runs sql and returns its answer (see Table).
func (c *ChDB) Query(sql string) (Table, error) {
	out, err := c.run(sql, "TabSeparatedWithNamesAndTypes")
	if err != nil {
		return Table{}, err
	}
	return parseTSV(out)
}

// Exec runs statements that answer nothing, one at a time.
func (c *ChDB) Exec(sqls ...string) error {
	for _, s := range sqls {
		if _, err := c.run(s, "TabSeparated"); err != nil {
			return err
		}
	}
	return nil
}

func (c *ChDB) run(sql, format string) (string, error) {
	req, err := json.Marshal(map[string]string{"sql": sql, "format": format})
	if err != nil {
		return "", err
	}
	if _, err := c.in.Write(append(req, '\n')); err != nil {
		return "", fmt.Errorf("chDB: %w (%s)", err, c.stderr)
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return "", fmt.Errorf("chDB: %w (%s)", err, c.stderr)
	}
	var ans struct {
		OK    bool   `json:"ok"`
		Out   string `json:"out"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &ans); err != nil {
		return "", fmt.Errorf("chDB answered %q: %w", line, err)
	}
	if !ans.OK {
		return "", fmt.Errorf("chDB %s: %s\nstatement:\n%s", c.version, ans.Error, sql)
	}
	return ans.Out, nil
}

// parseTSV reads TabSeparatedWithNamesAndTypes.
func parseTSV(s string) (Table, error) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" || len(lines) < 2 {
		return Table{}, nil
	}
	t := Table{Names: splitTSV(lines[0]), Types: splitTSV(lines[1])}
	for _, l := range lines[2:] {
		f := splitTSV(l)
		if len(f) != len(t.Types) {
			return Table{}, fmt.Errorf("chDB row %q: %d fields, %d columns", l, len(f), len(t.Types))
		}
		for i := range f {
			f[i] = canonical(t.Types[i], f[i])
		}
		t.Rows = append(t.Rows, f)
	}
	return t, nil
}

// splitTSV splits a TabSeparated line into unescaped fields.
func splitTSV(line string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == '\t':
			out = append(out, b.String())
			b.Reset()
		case ch == '\\' && i+1 < len(line):
			i++
			switch e := line[i]; e {
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(ch)
		}
	}
	return append(out, b.String())
}

// moduleRoot is the folder of go.mod, found upwards from the test's folder.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the test's folder")
		}
		dir = up
	}
}
