// Package logs is the one log format of every svc role: JSON lines on stderr through
// log/slog, each with time, level, msg and the role that wrote it (ingest, rollup, api,
// webhooks, broker, dev), plus request_id or topic/partition where there is one. It also
// adapts the libraries' own loggers to it, so that nothing else reaches stderr:
//
//	the standard log package and slog.Default   Install (slog.SetDefault)
//	go-redis's internal logger                  Install (redis.SetLogger), lib=go-redis
//	franz-go clients                            Kgo (kgo.WithLogger), lib=franz-go
//	the embedded kfake broker                   Kfake (kfake.WithLogger), lib=kfake
//	http.Server.ErrorLog, any Printf logger     StdLog, Printf
//	clickhouse-go's Logger                      ClickHouse (debug level only, SQL literals
//	                                            redacted), lib=clickhouse-go
//
// Nothing secret is passed to a logger (keys are logged by id, emails and their digests
// never); a library's lines that could carry one (clickhouse-go's SQL text) are redacted
// here (redact.go).
package logs

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RoleKey is the attribute naming the role that wrote a line.
const RoleKey = "role"

// LibKey is the attribute naming the library a line came from, when not svc's own code.
const LibKey = "lib"

// New returns a JSON logger writing to stderr at level (SVC_LOG_LEVEL, read by
// lib/process), with no role: callers add one (With(RoleKey, …)).
func New(level slog.Level) *slog.Logger { return NewTo(os.Stderr, level) }

// NewTo is New writing to w.
func NewTo(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// Install makes l the process's default logger: slog.Default, the standard log package
// (whose lines become INFO records of l) and go-redis's internal logger. Call it once,
// when the process knows its role.
func Install(l *slog.Logger) {
	slog.SetDefault(l)
	redis.SetLogger(redisLogger{l.With(LibKey, "go-redis")})
}

// redisLogger is go-redis's internal.Logging over slog. go-redis logs only trouble
// (failed dials, dropped connections), unlevelled: WARN.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r.l.Enabled(ctx, slog.LevelWarn) {
		r.l.WarnContext(ctx, fmt.Sprintf(format, v...))
	}
}

// Printer is a Printf logger.
type Printer interface {
	Printf(format string, args ...any)
}

// Printf returns a Printer writing each line to l at level.
func Printf(l *slog.Logger, level slog.Level) Printer { return printer{l, level} }

type printer struct {
	l     *slog.Logger
	level slog.Level
}

func (p printer) Printf(format string, args ...any) {
	if p.l.Enabled(context.Background(), p.level) {
		p.l.Log(context.Background(), p.level, fmt.Sprintf(format, args...))
	}
}

// StdLog returns a standard library *log.Logger writing to l at level (for
// http.Server.ErrorLog).
func StdLog(l *slog.Logger, level slog.Level) *log.Logger {
	return slog.NewLogLogger(l.Handler(), level)
}

// Kgo returns a franz-go logger over l. franz-go's info lines (connections, metadata,
// group steps) are frequent: they are debug here; its warnings and errors stay.
func Kgo(l *slog.Logger) kgo.Logger { return kgoLogger{l.With(LibKey, "franz-go")} }

type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	k.l.Log(context.Background(), kgoLevel(level), msg, keyvals...)
}

func kgoLevel(l kgo.LogLevel) slog.Level {
	switch l {
	case kgo.LogLevelError:
		return slog.LevelError
	case kgo.LogLevelWarn:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}

// Kfake returns a logger for the embedded kfake broker over l, with the same levels as
// Kgo (kfake's info lines are one per request).
func Kfake(l *slog.Logger) kfake.Logger { return kfakeLogger{l.With(LibKey, "kfake")} }

type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	lvl := slog.LevelDebug
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	}
	if k.l.Enabled(context.Background(), lvl) {
		k.l.Log(context.Background(), lvl, fmt.Sprintf(format, args...))
	}
}

// ClickHouse returns clickhouse-go's logger over l: Quiet, and every string its lines
// carry (above all the SQL text of "executing query" and "sending query", whose bound
// parameters are literals) has its SQL string literals redacted (RedactSQL). svc's
// statements carry identity digests as literals (privacy/sql.go), and no log line may.
func ClickHouse(l *slog.Logger) *slog.Logger {
	return Quiet(slog.New(redacting{l.Handler()}), "clickhouse-go")
}

// Quiet returns l for a library that reports its failures to svc as errors and logs
// them too (clickhouse-go): every line it writes is demoted to DEBUG, so it shows only
// under SVC_LOG_LEVEL=debug, still as JSON.
func Quiet(l *slog.Logger, lib string) *slog.Logger {
	return slog.New(quiet{l.Handler()}).With(LibKey, lib)
}

type quiet struct{ h slog.Handler }

func (q quiet) Enabled(ctx context.Context, _ slog.Level) bool {
	return q.h.Enabled(ctx, slog.LevelDebug)
}

func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.String("lib_level", r.Level.String()))
	r.Level = slog.LevelDebug
	return q.h.Handle(ctx, r)
}

func (q quiet) WithAttrs(as []slog.Attr) slog.Handler { return quiet{q.h.WithAttrs(as)} }
func (q quiet) WithGroup(name string) slog.Handler    { return quiet{q.h.WithGroup(name)} }
