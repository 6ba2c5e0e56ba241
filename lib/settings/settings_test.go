package settings

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var nameRE = regexp.MustCompile(`^SVC_[A-Z0-9_]*[A-Z0-9]$`)

// Every declared setting is complete: a well-formed unique name, a group, readers, a
// meaning, and a default that parses as its kind.
func TestTableIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Table {
		if !nameRE.MatchString(s.Name) || seen[s.Name] {
			t.Errorf("%q: malformed or declared twice", s.Name)
		}
		seen[s.Name] = true
		if s.Group == "" || len(s.ReadBy) == 0 || s.Meaning == "" {
			t.Errorf("%s: group %q, read by %v, meaning %q: all are required", s.Name, s.Group, s.ReadBy, s.Meaning)
		}
		r := Map(nil)
		switch s.Kind {
		case String:
			r.String(s.Name)
		case Int:
			r.Int(s.Name)
		case Duration:
			r.Duration(s.Name)
		case Bool:
			r.Bool(s.Name)
		case List:
			r.List(s.Name)
		}
		if err := r.Err(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

// A name the table lacks is refused (the process does not start), and a setting read as
// another kind than declared too.
func TestReaderRefusesUndeclaredNames(t *testing.T) {
	undeclared := "SVC_" + "NOT_IN_THE_TABLE" // split: the source scan must not see it
	r := Map(map[string]string{undeclared: "1"})
	if v := r.String(undeclared); v != "" {
		t.Fatalf("undeclared setting read as %q", v)
	}
	r.Duration("SVC_HTTP_ADDR")
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), undeclared+": not a declared setting") ||
		!strings.Contains(err.Error(), "SVC_HTTP_ADDR: read as duration but declared string") {
		t.Fatalf("got %v", err)
	}
}

// Defaults come from the table; set values win; every bad value is reported at once.
func TestReaderDefaultsAndEveryError(t *testing.T) {
	r := Map(map[string]string{"SVC_ROLLUP_BATCH_ROWS": " 5000 ", "SVC_KAFKA_BROKERS": "a:1, ,b:2",
		"SVC_ROLLUP_BATCH_INTERVAL": "soon", "SVC_KAFKA_PARTITIONS": "many", "SVC_PPROF": "maybe"})
	if r.String("SVC_HTTP_ADDR") != "127.0.0.1:8080" || r.Duration("SVC_KEY_CACHE_TTL") != 500*time.Millisecond ||
		!r.Bool("SVC_REDIS_AUTOPIPELINE") || r.String("SVC_CLICKHOUSE_CLUSTER") != "" {
		t.Fatal("defaults are not the table's")
	}
	if r.Int("SVC_ROLLUP_BATCH_ROWS") != 5000 || !slices.Equal(r.List("SVC_KAFKA_BROKERS"), []string{"a:1", "b:2"}) {
		t.Fatal("set values")
	}
	r.Duration("SVC_ROLLUP_BATCH_INTERVAL")
	r.Int("SVC_KAFKA_PARTITIONS")
	r.Bool("SVC_PPROF")
	err := r.Err()
	for _, name := range []string{"SVC_ROLLUP_BATCH_INTERVAL", "SVC_KAFKA_PARTITIONS", "SVC_PPROF"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
	want := []string{"SVC_HTTP_ADDR", "SVC_KEY_CACHE_TTL", "SVC_REDIS_AUTOPIPELINE", "SVC_CLICKHOUSE_CLUSTER",
		"SVC_ROLLUP_BATCH_ROWS", "SVC_KAFKA_BROKERS", "SVC_ROLLUP_BATCH_INTERVAL", "SVC_KAFKA_PARTITIONS", "SVC_PPROF"}
	if got := r.Read(); !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// Printed values hide secrets and URL passwords.
func TestMasked(t *testing.T) {
	pw, _ := Lookup("SVC_CLICKHOUSE_PASSWORD")
	redis, _ := Lookup("SVC_REDIS_URL")
	if got := pw.Masked("hunter2"); strings.Contains(got, "hunter2") {
		t.Fatalf("password printed: %q", got)
	}
	if got := redis.Masked("redis://user:hunter2@r:6379/0"); strings.Contains(got, "hunter2") || !strings.Contains(got, "r:6379") {
		t.Fatalf("redis URL printed as %q", got)
	}
	var b strings.Builder
	Effective(&b, Map(map[string]string{"SVC_CLICKHOUSE_PASSWORD": "hunter2"}), []string{"SVC_CLICKHOUSE_PASSWORD", "SVC_HTTP_ADDR"})
	if strings.Contains(b.String(), "hunter2") || !strings.Contains(b.String(), "SVC_HTTP_ADDR=127.0.0.1:8080\t# default") {
		t.Fatalf("effective values:\n%s", b.String())
	}
}
