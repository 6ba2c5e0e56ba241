package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"svc/lib/chpool"
	"svc/lib/settings"
)

// checkers read the settings of each command `svc config COMMAND` can check, as that
// command reads them, and validate them.
var checkers = map[string]func(r *settings.Reader) error{
	"broker":  func(r *settings.Reader) error { return readBrokerRole(r).validate() },
	"migrate": func(r *settings.Reader) error { return chpool.ConfigFromEnv(r).Validate() },
}

func init() {
	for name, read := range roleSets {
		checkers[name] = func(r *settings.Reader) error { return read(r).validate() }
	}
}

// configMain is `svc config [--markdown] [COMMAND]`: every setting with its effective
// value (set or default; secrets and URL passwords masked) and meaning; with a command,
// only the settings it reads, then every one that cannot work (exit status 1); with
// --markdown, the README table.
func configMain(_ context.Context, args []string) error {
	return printConfig(args, os.Stdout)
}

func printConfig(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	markdown := fs.Bool("markdown", false, "print the Markdown table of every setting (README.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *markdown {
		settings.Markdown(w, settings.InGroup("all"), true)
		return nil
	}
	r := settings.New()
	switch fs.NArg() {
	case 0:
		var names []string
		for _, s := range settings.Table {
			names = append(names, s.Name)
		}
		settings.Effective(w, r, names)
		return nil
	case 1:
		check, ok := checkers[fs.Arg(0)]
		if !ok {
			return fmt.Errorf("no settings to check for %q; commands: %s", fs.Arg(0), strings.Join(checkable(), ", "))
		}
		invalid := check(r)
		settings.Effective(w, r, r.Read())
		return errors.Join(r.Err(), invalid)
	}
	return fmt.Errorf("unexpected arguments %q", fs.Args()[1:])
}

func checkable() []string {
	var out []string
	for n := range checkers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
