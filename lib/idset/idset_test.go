package idset_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"svc/lib/idset"
	"svc/lib/svctest"
)

func TestLoadSkipsMissingAndStopsOnFailure(t *testing.T) {
	rdb := svctest.Redis(t)
	ctx := context.Background()
	set := "svc:test:idset:" + uuid.NewString()
	t.Cleanup(func() { rdb.Del(context.Background(), set) })
	a, gone, bad := uuid.New(), uuid.New(), uuid.New()
	rdb.SAdd(ctx, set, a.String(), gone.String(), "not-a-uuid")
	missing := errors.New("missing")
	load := func(_ context.Context, id uuid.UUID) (string, error) {
		switch id {
		case gone:
			return "", missing
		case bad:
			return "", errors.New("store down")
		}
		return id.String(), nil
	}
	got, err := idset.Load(ctx, rdb, set, missing, load)
	if err != nil || len(got) != 1 || got[0] != a.String() {
		t.Fatalf("Load = %v, %v; want [%s]", got, err, a)
	}
	rdb.SAdd(ctx, set, bad.String())
	if got, err := idset.Load(ctx, rdb, set, missing, load); err == nil {
		t.Fatalf("Load with a failing record = %v, nil; want the error", got)
	}
}
