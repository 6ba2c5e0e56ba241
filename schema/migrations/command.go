package migrations

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"svc/lib/chpool"
	"svc/lib/settings"
)

// MigrateMain is `svc migrate [--print] [--clustered] [--cluster NAME]`: it applies the
// schema to the configured ClickHouse (SVC_CLICKHOUSE_*), or with --print writes the
// SQL to stdout instead. The ReplicatedMergeTree + Distributed variant is used for the
// cluster named by --cluster, else by SVC_CLICKHOUSE_CLUSTER; --clustered insists on
// one of them.
func MigrateMain(ctx context.Context, args []string) error {
	return migrateMain(ctx, args, os.Stdout)
}

func migrateMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	print := fs.Bool("print", false, "print the SQL instead of applying it")
	clustered := fs.Bool("clustered", false, "use the clustered variant (ReplicatedMergeTree + Distributed)")
	cluster := fs.String("cluster", "", "cluster name for --clustered (default SVC_CLICKHOUSE_CLUSTER)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 { // "svc migrate print" must not apply the schema
		return fmt.Errorf("svc migrate takes no arguments, only flags (--print, --clustered, --cluster NAME): got %q", fs.Args())
	}
	r := settings.New()
	cfg := chpool.ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	if *cluster != "" {
		cfg.Cluster = *cluster
	}
	if *clustered && cfg.Cluster == "" {
		return errors.New("--clustered needs --cluster NAME or SVC_CLICKHOUSE_CLUSTER")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if *print {
		s, err := SQLScript(cfg.Database, cfg.Cluster)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, s)
		return err
	}
	if err := Migrate(ctx, cfg); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "svc migrate: database %s on %s is up to date\n", cfg.Database, cfg.Addr)
	return nil
}
