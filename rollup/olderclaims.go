package rollup

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/process"
)

// Claims older consumers wrote in Redis. Before the claim logs, batch claims were fields
// of bucket tables and, before those, of epoch tables (both named by claim group:
// claimDir, epochClaimDir), and before those one key each (legacyClaimKey). A consumer
// honours them for legacyClaimsFor after it starts: an older consumer may have written
// one shortly before, and a retry that found no answer makes a second copy that must be
// caught.
//
// An upgrade stops the older consumers before the new ones start (deploy/README.md), so
// no claim of those formats is written after a consumer starts. Its first claim therefore
// takes stock once (olderClaims): which claim groups have a table (one pipeline of 256
// EXISTS), and, by a SCAN in the background, whether any key of the key format is left.
// A poll then asks Redis only about batches whose group has a table, and GETs keys only
// until the scan found none: a deployment that never ran an older consumer, or ran one
// more than a day ago, asks nothing. Before (issue 30), every batch cost an EXISTS and a
// GET for 26 h after every start of a consumer: two of an idempotent request's four Redis
// commands in `make bench`, and about 3% of svc's CPU at 200k events/s.

// legacyClaimsFor: claims of the formats before are read for this long after the process
// starts (an upgrade's rollout taking under an hour, and a claim's 25 h).
const legacyClaimsFor = 26 * time.Hour

var processStart = time.Now()

// legacyClaimKey is the key of a batch claim of the key format: the holder's
// "partition:offset", 25 h.
func legacyClaimKey(topic string, id []byte) string {
	return "svc:batch:" + topic + ":" + hex.EncodeToString(id)
}

// The state of olderClaims' scan for keys of the key format.
const (
	keysUnknown int32 = iota // scanning: every batch's key is read
	keysNone                 // none left: no key is read
	keysSome                 // some left, or the scan failed: every batch's key is read
)

// olderClaims is what a consumer found, at its first claim, of the claims older
// consumers wrote in its topic.
type olderClaims struct {
	groups [256]bool     // claim groups (by a batch id's last byte) with a table of a format before
	keys   atomic.Int32  // keysUnknown, keysNone or keysSome
	done   chan struct{} // closed when the scan has ended
}

// olderClaimsScanPause paces the scan: Redis runs nothing else during a SCAN call (each
// visits about 1,000 keys), so a pause between calls leaves it to the hot path.
const olderClaimsScanPause = 2 * time.Millisecond

// readOlderClaims takes stock of topic's claims of the formats before: the groups' tables
// now, the key format's keys in the background (the scan ends with ctx, the consumer's, or
// at legacyClaimsFor).
func readOlderClaims(ctx context.Context, rdb redis.UniversalClient, topic string) (*olderClaims, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmds := make([]*redis.IntCmd, 256)
	_, _ = rdb.Pipelined(qctx, func(p redis.Pipeliner) error {
		for g := range cmds {
			id := []byte{byte(g)}
			cmds[g] = p.Exists(qctx, claimDir(topic, id), epochClaimDir(topic, id))
		}
		return nil
	})
	o := &olderClaims{done: make(chan struct{})}
	for g, cmd := range cmds {
		n, err := cmd.Result()
		if err != nil {
			return nil, fmt.Errorf("claims of the formats before: %w", err)
		}
		o.groups[g] = n > 0
	}
	sctx, scancel := context.WithDeadline(ctx, processStart.Add(legacyClaimsFor))
	go func() {
		defer scancel()
		defer close(o.done)
		// A Kafka topic's name has no glob character (letters, digits, '.', '_', '-').
		found, err := anyKey(sctx, rdb, "svc:batch:"+topic+":*")
		if err == nil && !found {
			o.keys.Store(keysNone)
		} else {
			o.keys.Store(keysSome)
		}
	}()
	return o, nil
}

// anyKey reports whether a key matching pattern exists, on any master, scanning paced by
// olderClaimsScanPause.
func anyKey(ctx context.Context, rdb redis.UniversalClient, pattern string) (bool, error) {
	var found atomic.Bool
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if len(keys) > 0 {
				found.Store(true)
			}
			if err != nil || len(keys) > 0 || next == 0 {
				return err
			}
			cursor = next
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(olderClaimsScanPause):
			}
		}
	}
	err := process.EachMaster(ctx, rdb, scan)
	return found.Load(), err
}

// hasTables reports whether some claim group had a table.
func (o *olderClaims) hasTables() bool { return slices.Contains(o.groups[:], true) }

// earlierClaims reads what the claims of the formats before say of a poll's batches (ids,
// of recs), while they may exist: the first call takes stock (readOlderClaims).
func (c *consumer) earlierClaims(ctx context.Context, recs []*kgo.Record, ids [][]byte) (earlierClaims, error) {
	if time.Since(processStart) > legacyClaimsFor {
		return earlierClaims{}, nil
	}
	if c.older == nil {
		o, err := readOlderClaims(ctx, c.cfg.Redis, c.cfg.Topic)
		if err != nil {
			return earlierClaims{}, err
		}
		c.older = o
	}
	var e earlierClaims
	if c.older.keys.Load() == keysNone && !c.older.hasTables() {
		return e, nil
	}
	return e, e.read(ctx, c.cfg.Redis, c.cfg.Topic, c.older, ids, positions(recs))
}

// earlierClaims is what the claims of the formats before say of a poll's batches: which
// are second copies. The zero value says none is.
type earlierClaims struct{ copies []bool }

func (e *earlierClaims) copy(i int) bool { return i < len(e.copies) && e.copies[i] }

// read looks the batches (ids, at the records pos) of topic up where older says claims
// may be: a pipeline of GETs of their keys of the key format while the scan has not
// found none, then one held call per claim group with a table.
func (e *earlierClaims) read(ctx context.Context, rdb redis.UniversalClient, topic string, older *olderClaims, ids [][]byte, pos []recordPos) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.copies = make([]bool, len(ids))
	if older.keys.Load() != keysNone {
		if err := e.readKeys(qctx, rdb, topic, ids, pos); err != nil {
			return err
		}
	}
	var inTables []int
	for i, id := range ids {
		if older.groups[id[len(id)-1]] {
			inTables = append(inTables, i)
		}
	}
	if len(inTables) == 0 {
		return nil
	}
	return e.readTables(qctx, rdb, topic, ids, pos, inTables)
}

// readKeys reads the batches' claims of the key format: one pipeline of GETs.
func (e *earlierClaims) readKeys(ctx context.Context, rdb redis.UniversalClient, topic string, ids [][]byte, pos []recordPos) error {
	gets := make([]*redis.StringCmd, len(ids))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			gets[i] = p.Get(ctx, legacyClaimKey(topic, id))
		}
		return nil
	})
	for i := range ids {
		held, err := gets[i].Result()
		switch {
		case err == nil:
			e.copies[i] = held != strconv.Itoa(int(pos[i].p))+":"+strconv.FormatInt(pos[i].o, 10)
		case !errors.Is(err, redis.Nil):
			return fmt.Errorf("claims of the format before: %w", err)
		}
	}
	return nil
}

// readTables reads the claims of batches of (indexes into ids) from their groups'
// bucket and epoch tables: one held call per group.
func (e *earlierClaims) readTables(ctx context.Context, rdb redis.UniversalClient, topic string, ids [][]byte, pos []recordPos, of []int) error {
	calls := groupCalls(topic, ids, of, func(i int) []any { return []any{claimField(ids[i])} })
	held, err := runCalls(ctx, rdb, "held", calls, len(ids))
	if err != nil {
		return fmt.Errorf("claims of the formats before: %w", err)
	}
	for _, i := range of {
		e.copies[i] = e.copies[i] || heldElsewhere(held[i], pos[i])
	}
	return nil
}
