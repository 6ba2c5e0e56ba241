package logs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lines reads buf as JSON lines, failing on any other line.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %s", sc.Bytes())
		}
		out = append(out, m)
	}
	return out
}

// Every library adapter writes JSON lines through the role's logger, naming the library,
// at the level the library meant (franz-go's and kfake's chatty info lines as debug).
func TestAdaptersWriteJSONWithRole(t *testing.T) {
	var buf bytes.Buffer
	l := NewTo(&buf, slog.LevelInfo).With(RoleKey, "rollup")
	k := Kgo(l)
	if k.Level() != kgo.LogLevelWarn {
		t.Fatalf("franz-go level at info: %v, want warn", k.Level())
	}
	k.Log(kgo.LogLevelWarn, "unable to open connection to broker", "broker", "0", "err", errors.New("refused"))
	k.Log(kgo.LogLevelInfo, "chatty") // below the level: dropped
	Kfake(l).Logf(kfake.LogLevelError, "persist to disk: %v", "disk full")
	Kfake(l).Logf(kfake.LogLevelInfo, "request %d", 1)
	Printf(l, slog.LevelWarn).Printf("The incoming connection cannot be served, because %d concurrent connections are served", 5)
	StdLog(l, slog.LevelWarn).Print("http: TLS handshake error")
	Quiet(l, "clickhouse-go").Warn("unsupported clickhouse version") // debug only
	got := lines(t, &buf)
	want := []struct{ level, msg, lib string }{
		{"WARN", "unable to open connection to broker", "franz-go"},
		{"ERROR", "persist to disk: disk full", "kfake"},
		{"WARN", "The incoming connection cannot be served, because 5 concurrent connections are served", ""},
		{"WARN", "http: TLS handshake error", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		lib, _ := g[LibKey].(string)
		if g["level"] != w.level || g["msg"] != w.msg || g[RoleKey] != "rollup" || lib != w.lib {
			t.Errorf("line %d: %v, want %+v with role rollup", i, g, w)
		}
	}
	if got[0]["err"] != "refused" || got[0]["broker"] != "0" {
		t.Errorf("franz-go's key-value pairs: %v", got[0])
	}
}

// Under debug, clickhouse-go's lines show, demoted to DEBUG with their own level kept.
func TestQuietShowsUnderDebug(t *testing.T) {
	var buf bytes.Buffer
	Quiet(NewTo(&buf, slog.LevelDebug).With(RoleKey, "api"), "clickhouse-go").Warn("server exception received", "code", 60)
	got := lines(t, &buf)
	if len(got) != 1 || got[0]["level"] != "DEBUG" || got[0]["lib_level"] != "WARN" || got[0][LibKey] != "clickhouse-go" || got[0][RoleKey] != "api" {
		t.Fatalf("got %v", got)
	}
}

// Install routes the standard log package and go-redis's internal logger through l.
func TestInstallRoutesStdLogAndRedis(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old); redis.SetLogger(redisLogger{old}) })
	var buf bytes.Buffer
	Install(NewTo(&buf, slog.LevelInfo).With(RoleKey, "ingest"))
	log.Printf("plain %s", "line")
	// go-redis logs a failed dial through its internal logger.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	got := lines(t, &buf)
	if len(got) < 2 || got[0]["msg"] != "plain line" || got[0][RoleKey] != "ingest" {
		t.Fatalf("standard log line: %v", got)
	}
	if got[1][LibKey] != "go-redis" || got[1]["level"] != "WARN" || got[1][RoleKey] != "ingest" {
		t.Fatalf("go-redis line: %v", got[1])
	}
}

// clickhouse-go's lines lose every SQL string literal (in the message, in strings, in
// errors and other values, in attributes added by With) and any bare 32-byte hex value
// or address; the statement's shape stays.
func TestClickHouseRedactsLiterals(t *testing.T) {
	digest := "e814ff3dc480a94c7ce9334062ec4733c75a002f4bcec0197f62ffea64059e2f"
	esc := `'\xe8\x14\xff\x3d\xc4\x80\xa9\x4c\x7c\xe9\x33\x40\x62\xec\x47\x33\xc7\x5a\x00\x2f\x4b\xce\xc0\x19\x7f\x62\xff\xea\x64\x05\x9e\x2f'`
	stmt := "ALTER TABLE db.events UPDATE has_email = 0 WHERE email_sha256 IN (" + esc + ", unhex('" + digest +
		"'), 'ada@example.com', 'it''s \\' still', 'cut"
	var buf bytes.Buffer
	l := ClickHouse(NewTo(&buf, slog.LevelDebug)).With("conn_sql", "SELECT 'ada@example.com'")
	l.Debug("executing statement", "sql", stmt, "n", 3)
	l.Error("query processing failed", "error", errors.New("code: 27, Cannot parse input near "+digest+" from ada@example.com"),
		slog.Group("g", "query", "x = 'ada@example.com'"), "args", []any{"ada@example.com"})
	got := lines(t, &buf)
	if len(got) != 2 {
		t.Fatalf("%d lines: %v", len(got), got)
	}
	want := "ALTER TABLE db.events UPDATE has_email = 0 WHERE email_sha256 IN ('<redacted>', unhex('<redacted>'), '<redacted>', '<redacted>', '<redacted>'"
	if got[0]["sql"] != want || got[0]["n"] != 3.0 || got[0]["conn_sql"] != "SELECT '<redacted>'" {
		t.Errorf("statement line: %v\nwant sql %s", got[0], want)
	}
	raw := buf.String()
	for _, s := range []string{digest, `\\xe8\\x14`, "ada@", "still"} {
		if bytes.Contains([]byte(raw), []byte(s)) {
			t.Errorf("%q survives: %s", s, raw)
		}
	}
	if got[1]["error"] != "code: 27, Cannot parse input near <hex> from <email>" {
		t.Errorf("error: %v", got[1]["error"])
	}
}

// A dependency's error keeps its address and words and loses its credentials.
func TestRedactCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"dial redis://default:pa55@10.1.2.3:6379: refused":        "dial redis://<redacted>@10.1.2.3:6379: refused",
		"clickhouse://u@h:9000/db?password=pa55&dial_timeout=1s":  "clickhouse://<redacted>@h:9000/db?password=<redacted>&dial_timeout=1s",
		"code: 516, Authentication failed: password is incorrect": "code: 516, Authentication failed: password is incorrect",
	} {
		if got := RedactCredentials(in); got != want {
			t.Errorf("RedactCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}
