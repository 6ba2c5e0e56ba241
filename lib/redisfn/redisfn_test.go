package redisfn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/redisfn"
	"svc/lib/svctest"
)

// counter is a library whose function counts its calls in KEYS[1] and answers the count
// and ARGV[1]: a call that ran twice shows.
func counter(version string) *redisfn.Library {
	return redisfn.New("test_counter", `
local function bump(KEYS, ARGV)
  return {redis.call('INCR', KEYS[1]), ARGV[1], '`+version+`'}
end
`, "bump")
}

func TestCallLoadsTheLibraryWhereItIsMissing(t *testing.T) {
	ctx := context.Background()
	rdb := svctest.Redis(t)
	lib := counter(uuid.NewString()) // a library this Redis has never seen
	t.Cleanup(func() { rdb.FunctionDelete(ctx, lib.Name()) })
	key := "svc:test:redisfn:{" + uuid.NewString() + "}"
	t.Cleanup(func() { rdb.Del(ctx, key) })

	if err := rdb.FCall(ctx, lib.Function("bump"), []string{key}, "x").Err(); err == nil ||
		!strings.Contains(err.Error(), "Function not found") {
		t.Fatalf("before the first call, FCALL answered %v; want Function not found", err)
	}
	for want := int64(1); want <= 2; want++ {
		got, err := lib.Call(ctx, rdb, "bump", []string{key}, "x").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != want || got[1] != "x" {
			t.Fatalf("call %d answered %v; want [%d x ...]: the function must run exactly once", want, got, want)
		}
	}
	// Deleted from Redis (a new or emptied node): the next call loads it again.
	if err := rdb.FunctionDelete(ctx, lib.Name()).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := lib.Call(ctx, rdb, "bump", []string{key}, "y").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != int64(3) {
		t.Fatalf("call after the library was deleted answered %v; want count 3", got)
	}
}

func TestPipelinedLoadsTheLibraryAndRunsEachOnce(t *testing.T) {
	ctx := context.Background()
	rdb := svctest.Redis(t)
	lib := counter(uuid.NewString())
	t.Cleanup(func() { rdb.FunctionDelete(ctx, lib.Name()) })
	keys := []string{"svc:test:redisfn:{" + uuid.NewString() + "}", "svc:test:redisfn:{" + uuid.NewString() + "}"}
	t.Cleanup(func() { rdb.Del(ctx, keys...) })

	cmds, err := lib.Pipelined(ctx, rdb, "bump", keys, [][]any{{"a"}, {"b"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		got, err := c.Slice()
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != int64(1) || got[1] != []string{"a", "b"}[i] {
			t.Fatalf("pipelined call %d answered %v; want count 1 and its own argument", i, got)
		}
	}
}

func TestTwoVersionsLiveSideBySide(t *testing.T) {
	ctx := context.Background()
	rdb := svctest.Redis(t)
	v1, v2 := counter("v1"+uuid.NewString()), counter("v2"+uuid.NewString())
	if v1.Name() == v2.Name() || v1.Function("bump") == v2.Function("bump") {
		t.Fatalf("two codes share the name %s", v1.Name())
	}
	t.Cleanup(func() { rdb.FunctionDelete(ctx, v1.Name()); rdb.FunctionDelete(ctx, v2.Name()) })
	key := "svc:test:redisfn:{" + uuid.NewString() + "}"
	t.Cleanup(func() { rdb.Del(ctx, key) })
	for i, lib := range []*redisfn.Library{v1, v2, v1} {
		got, err := lib.Call(ctx, rdb, "bump", []string{key}, "x").Slice()
		if err != nil {
			t.Fatalf("call %d (%s): %v", i, lib.Name(), err)
		}
		if got[0] != int64(i+1) {
			t.Fatalf("call %d answered %v; want count %d", i, got, i+1)
		}
	}
}

func TestCallReportsOtherErrors(t *testing.T) {
	ctx := context.Background()
	rdb := svctest.Redis(t)
	lib := redisfn.New("test_failing", `
local function fail(KEYS, ARGV) return redis.error_reply('ERR failing on purpose') end
`, "fail")
	t.Cleanup(func() { rdb.FunctionDelete(ctx, lib.Name()) })
	err := lib.Call(ctx, rdb, "fail", []string{"svc:test:redisfn:x"}).Err()
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.Contains(err.Error(), "failing on purpose") {
		t.Fatalf("Call answered %v; want the function's own error", err)
	}
}

// TestAutoPipelinedCallsLoadThroughTheBase: calls through an auto-pipeliner over keys of
// many hash slots. Under make test-scale the client is a Redis Cluster's, and a library
// missing on every master is loaded, through Client.Base, where each key lives.
func TestAutoPipelinedCallsLoadThroughTheBase(t *testing.T) {
	ctx := context.Background()
	rdb := svctest.Redis(t)
	ap, err := rdb.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	lib := counter(uuid.NewString())
	t.Cleanup(func() { rdb.FunctionDelete(ctx, lib.Name()) })
	pair := redisfn.Client{Cmdable: ap, Base: rdb}
	for i := range 30 {
		var c redis.Cmdable = pair
		if i%2 == 1 {
			c = &pair // a pointer to the pair loads through its Base too
		}
		key := "svc:test:redisfn:{" + uuid.NewString() + "}"
		t.Cleanup(func() { rdb.Del(ctx, key) })
		got, err := lib.Call(ctx, c, "bump", []string{key}, "x").Slice()
		if err != nil {
			t.Fatalf("call %d (%s): %v", i, key, err)
		}
		if got[0] != int64(1) {
			t.Fatalf("call %d answered %v; want count 1", i, got)
		}
	}
}
