package chpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/logs"
	"svc/lib/settings"
)

// Config says where ClickHouse is. Only the native protocol is used: the HTTP interface
// of ClickHouse 18.16 does not work with clickhouse-go v2.
type Config struct {
	// Addr is host:port of the native protocol (SVC_CLICKHOUSE_ADDR, default
	// 127.0.0.1:9000), or several, comma-separated: a new connection goes to the first
	// that answers, so a process keeps working while one server of a cluster is down.
	Addr string
	// Database holds every table of the service (SVC_CLICKHOUSE_DB, default svc). It
	// must be a plain identifier: migrations substitute it for {db}.
	Database string
	// User and Password authenticate (SVC_CLICKHOUSE_USER, default "default";
	// SVC_CLICKHOUSE_PASSWORD, default empty).
	User     string
	Password string
	// Cluster, when set, makes Migrate apply the clustered variant of the schema
	// (ReplicatedMergeTree tables named *_local plus Distributed tables under the
	// plain names, every statement ON CLUSTER) (SVC_CLICKHOUSE_CLUSTER, default empty).
	Cluster string
	// DialTimeout bounds connecting (SVC_CLICKHOUSE_DIAL_TIMEOUT, default 5s).
	DialTimeout time.Duration
	// MaxOpenConns caps the connection pool (SVC_CLICKHOUSE_MAX_CONNS, default 8).
	MaxOpenConns int
}

// ConfigFromEnv reads the SVC_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{
		Addr:         r.String("SVC_CLICKHOUSE_ADDR"),
		Database:     r.String("SVC_CLICKHOUSE_DB"),
		User:         r.String("SVC_CLICKHOUSE_USER"),
		Password:     r.String("SVC_CLICKHOUSE_PASSWORD"),
		Cluster:      r.String("SVC_CLICKHOUSE_CLUSTER"),
		DialTimeout:  r.Duration("SVC_CLICKHOUSE_DIAL_TIMEOUT"),
		MaxOpenConns: r.Int("SVC_CLICKHOUSE_MAX_CONNS"),
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	for _, a := range c.Addrs() {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("SVC_CLICKHOUSE_ADDR %q: %v", c.Addr, err))
		}
	}
	if !identRE.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("SVC_CLICKHOUSE_DB %q: want a plain identifier [A-Za-z_][A-Za-z0-9_]*", c.Database))
	}
	if c.Cluster != "" && !identRE.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("SVC_CLICKHOUSE_CLUSTER %q: want a plain identifier", c.Cluster))
	}
	if c.User == "" {
		errs = append(errs, errors.New("SVC_CLICKHOUSE_USER: must not be empty"))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SVC_CLICKHOUSE_DIAL_TIMEOUT %v: must be positive", c.DialTimeout))
	}
	if c.MaxOpenConns < 1 || c.MaxOpenConns > 1000 {
		errs = append(errs, fmt.Errorf("SVC_CLICKHOUSE_MAX_CONNS %d: want 1..1000", c.MaxOpenConns))
	}
	return errors.Join(errs...)
}

// Addrs returns the addresses of Addr, in order.
func (c Config) Addrs() []string {
	var out []string
	for _, a := range strings.Split(c.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return []string{c.Addr} // reported by Validate
	}
	return out
}

// Open connects to c.Database over the native protocol and pings it. The caller owns
// the returned pool and must Close it. Every query on the pool carries the settings of
// QuerySettings that the server knows (settings.go): among them, every INSERT is
// synchronous, never deduplicated, and one block (one part per partition) on the
// server. Its PrepareBatch is guarded against a clickhouse-go race that could close a
// pooled connection after Send (batch.go).
//
// The server that answers first is asked which settings it knows; a connection made
// later may reach another server of Addr. The servers of one pool therefore run one
// version (or the first listed knows no setting that a later one does not): a server
// that lacks a setting refuses the query, loudly, and one that knows more would apply
// its own default.
func Open(ctx context.Context, c Config) (driver.Conn, error) {
	return OpenDatabase(ctx, c, c.Database)
}

// OpenDatabase opens a pool as Open does, with database as the default database (migrations
// open "default" to create c.Database).
func OpenDatabase(ctx context.Context, c Config, database string) (driver.Conn, error) {
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.MaxOpenConns <= 0 {
		c.MaxOpenConns = 8
	}
	pctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	probe, err := dial(pctx, c, database, 1, clickhouse.Settings{"max_insert_block_size": maxInsertBlockSize})
	if err != nil {
		return nil, err
	}
	known, err := knownSettings(pctx, probe)
	probe.Close()
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s/%s: %w", c.Addr, database, err)
	}
	settings, err := QuerySettings(known)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s/%s: %w", c.Addr, database, err)
	}
	conn, err := dial(pctx, c, database, c.MaxOpenConns, settings)
	if err != nil {
		return nil, err
	}
	return pool{Conn: conn, settings: settings}, nil
}

// dial opens clickhouse-go's pool of at most conns connections with settings on every
// query, and pings it.
func dial(ctx context.Context, c Config, database string, conns int, settings clickhouse.Settings) (driver.Conn, error) {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Protocol: clickhouse.Native,
		Addr:     c.Addrs(),
		Auth: clickhouse.Auth{
			Database: database,
			Username: c.User,
			Password: c.Password,
		},
		DialTimeout:     c.DialTimeout,
		MaxOpenConns:    conns,
		MaxIdleConns:    conns,
		ConnMaxLifetime: time.Hour,
		Settings:        settings,
		// Its failures come back to svc as errors, which svc logs; its own lines (one
		// warning per connection to an 18.16 server, for one) only under debug, with
		// every SQL string literal redacted: statements carry identity digests.
		Logger: logs.ClickHouse(slog.Default()),
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", c.Addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse %s/%s: %w", c.Addr, database, err)
	}
	return conn, nil
}

// ErrorCode returns the ClickHouse server error code carried by err, or 0.
func ErrorCode(err error) int32 {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code
	}
	return 0
}
