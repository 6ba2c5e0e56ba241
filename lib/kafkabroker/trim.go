package kafkabroker

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/logs"
)

// trimmer bounds the embedded broker's log by what its consumers have finished with.
//
// kfake keeps an in-memory index entry (about 72 bytes) for every produced batch it
// retains, and its retention is by time (7 days by default), so a broker under steady
// load grows by that index for as long as it runs: about 3.6 MiB a minute at 50,000
// events/s. The trimmer deletes, every interval, the records that every consumer group
// of a topic had committed past at least retain ago; a partition some group of its topic
// has not committed is left whole, and a topic no group reads (the dead letters) is
// never trimmed. So nothing a consumer still needs is deleted, and the log, its index
// and the disk it uses stay proportional to retain × the event rate.
type trimmer struct {
	adm      *kadm.Client
	hold     segmentHold
	retain   time.Duration
	interval time.Duration
	log      *slog.Logger
	// freed counts the files the trimmer freed itself (segmentHold), not in kfake's loop.
	freed int
	// snaps are the committed floors seen at each tick, oldest first; a snapshot is
	// applied once it is retain old, and dropped after.
	snaps []floorSnapshot
}

type floorSnapshot struct {
	at    time.Time
	floor kadm.Offsets
}

// startTrimmer runs a trimmer against the broker at addrs until the returned stop is
// called.
func startTrimmer(addrs []string, hold segmentHold, retain, interval time.Duration, log *slog.Logger) (stop func(), err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.Dialer(Dial), kgo.WithLogger(logs.Kgo(log)))
	if err != nil {
		return nil, err
	}
	t := &trimmer{adm: kadm.NewClient(cl), hold: hold, retain: retain, interval: interval, log: log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.run(ctx)
	}()
	return func() { cancel(); <-done; cl.Close() }, nil
}

func (t *trimmer) run(ctx context.Context) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if err := t.tick(ctx, now); err != nil && ctx.Err() == nil {
				t.log.Warn("embedded kafka: trimming consumed records", "err", err.Error())
			}
		}
	}
}

// tick records the current committed floor and deletes up to the newest floor that is
// at least retain old.
func (t *trimmer) tick(ctx context.Context, now time.Time) error {
	floor, err := t.committedFloor(ctx)
	if err != nil {
		return err
	}
	t.snaps = append(t.snaps, floorSnapshot{at: now, floor: floor})
	apply := t.due(now)
	if len(apply) == 0 {
		return nil
	}
	links := t.hold.link(apply)
	res, err := t.adm.DeleteRecords(ctx, apply)
	t.freed += t.hold.release(links)
	if err != nil {
		return err
	}
	return res.Error()
}

// due returns the newest floor that is at least retain old at now (nil if none), and
// forgets it and every older one.
func (t *trimmer) due(now time.Time) kadm.Offsets {
	i := -1
	for j, s := range t.snaps {
		if now.Sub(s.at) >= t.retain {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	floor := t.snaps[i].floor
	t.snaps = append(t.snaps[:0], t.snaps[i+1:]...)
	return floor
}

// committedFloor is, per partition, the lowest offset committed by the groups that
// read its topic; partitions that one of those groups has not committed are left out.
func (t *trimmer) committedFloor(ctx context.Context) (kadm.Offsets, error) {
	groups, err := t.adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	floor := kadm.Offsets{}
	var readers []kadm.Offsets
	for _, g := range groups.Groups() {
		res, err := t.adm.FetchOffsets(ctx, g)
		if err != nil {
			return nil, err
		}
		if err := res.Error(); err != nil {
			return nil, err
		}
		readers = append(readers, res.Offsets())
	}
	for _, offs := range readers {
		offs.Each(func(o kadm.Offset) {
			if o.At < 0 {
				return
			}
			if cur, ok := floor.Lookup(o.Topic, o.Partition); !ok || o.At < cur.At {
				floor.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.At, LeaderEpoch: -1})
			}
		})
	}
	// A group that reads a topic but has not committed one of its partitions (or
	// committed no offset, -1) holds that partition back entirely.
	for _, offs := range readers {
		for topic, parts := range floor {
			if _, reads := offs[topic]; !reads {
				continue
			}
			for p := range parts {
				if o, ok := offs.Lookup(topic, p); !ok || o.At < 0 {
					floor.Delete(topic, p)
				}
			}
		}
	}
	return floor, nil
}
