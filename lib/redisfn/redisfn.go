// Package redisfn runs the hot path's Lua code as Redis function libraries (Redis 7:
// FUNCTION LOAD, then FCALL) rather than as EVAL scripts.
//
// An EVAL script runs its whole text on every call: each helper it defines (the table
// functions, the rate limiter, the records' operations) is made anew as a Lua closure,
// and the Lua collector then reclaims it. A library's text runs once, when it is loaded;
// a call runs only the function it names. For the gate that is 26 µs of Redis's time
// against 34 (BenchmarkGateAndComplete in api/, and bench/HISTORY.md).
//
// Contract:
//   - A Library's code defines local Lua functions; New registers those it names,
//     under names that carry the code's hash, so two versions of a library (a rolling
//     upgrade) live side by side in Redis and each process calls its own.
//   - The functions are called as f(KEYS, ARGV), the parameters an EVAL script sees as
//     globals, and may write (no flags): they are called with FCALL, never FCALL_RO.
//   - The code sees string, math, table, tonumber, tostring and unpack as upvalues
//     (libsPrelude), set when a function of the library is first called: code that runs
//     while the library loads (its top level) finds them nil, as Redis gives it no
//     standard library then either.
//   - Redis keeps loaded libraries in its AOF and RDB and replicates them. A node that
//     does not have one (new, emptied, or promoted before the load reached it) answers
//     "Function not found"; Call then loads the library and calls again (the first call
//     did not run). Pipelined runs its whole pipeline again, where other nodes may have
//     run their part already: a function called through it must have the same effect
//     run once or twice.
package redisfn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Library is Lua code loaded into Redis as a function library.
type Library struct {
	name string // family and code hash: svc_<family>_<hash>
	code string // the FUNCTION LOAD text
}

// New returns the library family made of code, registering the local functions fns of
// code. The library's name, and each function's, carry a hash of code and fns.
func New(family, code string, fns ...string) *Library {
	h := sha256.Sum256([]byte(code + "\x00" + strings.Join(fns, ",")))
	l := &Library{name: "svc_" + family + "_" + hex.EncodeToString(h[:5])}
	var b strings.Builder
	b.WriteString("#!lua name=" + l.name + "\n" + libsPrelude + code + "\n")
	for _, fn := range fns {
		b.WriteString("redis.register_function('" + l.Function(fn) + "', function(KEYS, ARGV)\n" +
			"  if not string then " + libsNames + " = lua_libs() end\n" +
			"  return " + fn + "(KEYS, ARGV)\nend)\n")
	}
	l.code = b.String()
	return l
}

// libsNames are the Lua standard library's names a library's code sees as upvalues
// (libsPrelude), not as globals.
const libsNames = "string, math, table, tonumber, tostring, unpack"

// libsPrelude starts every library. In a function Redis 7 gives a global name an empty
// table whose metatable's __index is the real globals: each string.sub is two table
// misses and a metamethod before the string table's own lookup. A library's code sees
// those names as upvalues instead, set from the globals at its functions' first call
// (lua_libs: while a library loads, its globals hold only a reduced redis table).
// bench/HISTORY.md, stop 55.
const libsPrelude = "local function lua_libs() return " + libsNames + " end\nlocal " + libsNames + "\n"

// Name is the library's name in Redis (FUNCTION LIST).
func (l *Library) Name() string { return l.name }

// Function is the name Redis knows the library's function fn by.
func (l *Library) Function(fn string) string { return l.name + "_" + fn }

// Client pairs a client made for calls (go-redis's auto-pipeliner) with the client it
// was made from, through which a Library loads: the auto-pipeliner does not carry
// FUNCTION LOAD to every master of a cluster.
type Client struct {
	redis.Cmdable
	Base redis.UniversalClient
}

// Load loads the library, replacing a library of the same name (which has the same
// code): on every master when c is (or was made from) a cluster client, else on the
// server c talks to.
func (l *Library) Load(ctx context.Context, c redis.Cmdable) error {
	switch pair := c.(type) {
	case Client:
		c = pair.Base
	case *Client:
		c = pair.Base
	}
	if cluster, ok := c.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.FunctionLoadReplace(ctx, l.code).Err()
		})
	}
	return c.FunctionLoadReplace(ctx, l.code).Err()
}

// Call runs the library's function fn over keys and args through c, loading the library
// first when the node does not have it.
func (l *Library) Call(ctx context.Context, c redis.Cmdable, fn string, keys []string, args ...any) *redis.Cmd {
	cmd := c.FCall(ctx, l.Function(fn), keys, args...)
	if !notFound(cmd.Err()) {
		return cmd
	}
	if err := l.Load(ctx, c); err != nil {
		cmd.SetErr(err)
		return cmd
	}
	return c.FCall(ctx, l.Function(fn), keys, args...)
}

// Pipelined runs fn over keys[i] with args[i] for every i in one pipeline through c; when
// a node does not have the library, it loads it and runs the whole pipeline again, so
// fn's effect must be the same run once or twice. It returns each run's result, or the
// first error that is not redis.Nil.
func (l *Library) Pipelined(ctx context.Context, c redis.Cmdable, fn string, keys []string, args [][]any) ([]*redis.Cmd, error) {
	all := make([][]string, len(keys))
	for i, k := range keys {
		all[i] = []string{k}
	}
	return l.PipelinedKeys(ctx, c, fn, all, args)
}

// PipelinedKeys is Pipelined for runs of several keys each: fn over keys[i] with args[i].
func (l *Library) PipelinedKeys(ctx context.Context, c redis.Cmdable, fn string, keys [][]string, args [][]any) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(keys))
	run := func() (missing bool) {
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				cmds[i] = p.FCall(ctx, l.Function(fn), k, args[i]...)
			}
			return nil
		})
		for _, cmd := range cmds {
			if notFound(cmd.Err()) {
				return true
			}
		}
		return false
	}
	if run() {
		if err := l.Load(ctx, c); err != nil {
			return nil, err
		}
		run()
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	return cmds, nil
}

// notFound reports whether err is Redis's answer to a call of a function it does not
// have.
func notFound(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "Function not found")
}
