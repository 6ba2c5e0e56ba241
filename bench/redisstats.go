package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/process"
)

// RedisWork is what Redis's commands cost per request over a run, from INFO
// commandstats (summed over a cluster's masters) before and after: the time Redis spent
// executing them, without reading requests or writing replies.
type RedisWork struct {
	Requests int64 `json:"requests"` // completed requests the figures are per
	// UsecPerRequest sums the top-level commands' usec: every command but those our
	// functions and scripts call (nestedCommands), whose time is already in the FCALL
	// or EVALSHA that ran them; plus the HSETs svc sends itself (one per stored
	// idempotent answer, DirectHSETs), at HSET's average usec per call.
	UsecPerRequest  float64 `json:"usec_per_request"`
	CallsPerRequest float64 `json:"calls_per_request"`
	DirectHSETs     int64   `json:"direct_hsets,omitempty"`
	// ByCommand is each command's calls and usec per request; a nested command's
	// figures include its calls from inside functions.
	ByCommand map[string]CommandWork `json:"by_command"`
	// HeldBytes and HeldKeys are what Redis held at the run's start (used_memory and
	// DBSIZE, summed over the masters; 0 when unknown): its commands' times grow with
	// it (a random key's GET costs about 20 times a hot key's over gigabytes,
	// HISTORY.md "stop 38"), so a figure is comparable only with others measured near
	// the same size.
	HeldBytes int64 `json:"held_bytes,omitempty"`
	HeldKeys  int64 `json:"held_keys,omitempty"`
	// ReadsPerRequest and WritesPerRequest are Redis's reads of its clients' commands
	// and writes of its replies per request (INFO stats: total_reads_processed,
	// total_writes_processed, summed over the masters; the bench's own INFOs included,
	// a handful a run): how many requests' commands shared a round trip. Each is a
	// system call and an event-loop turn of Redis's, time commandstats does not count
	// (bench/HISTORY.md, stop 55: about 30 µs a request at 200k, one read a request).
	ReadsPerRequest  float64 `json:"reads_per_request,omitempty"`
	WritesPerRequest float64 `json:"writes_per_request,omitempty"`
}

// RoundTrips describes ReadsPerRequest and WritesPerRequest: "0.96 reads and 0.96
// writes a request" ("" unknown).
func (w *RedisWork) RoundTrips() string {
	if w.ReadsPerRequest <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f reads and %.2f writes a request", w.ReadsPerRequest, w.WritesPerRequest)
}

// redisIO is total_reads_processed and total_writes_processed summed over every master.
func redisIO(ctx context.Context, rdb redis.UniversalClient) (reads, writes int64, err error) {
	err = eachMasterInfo(ctx, rdb, "stats", func(_ context.Context, _ *redis.Client, info string) error {
		reads += infoInt(info, "total_reads_processed")
		writes += infoInt(info, "total_writes_processed")
		return nil
	})
	return reads, writes, err
}

// setRoundTrips sets ReadsPerRequest and WritesPerRequest from the run's reads and
// writes (nothing when either went back: statistics reset during the run).
func (w *RedisWork) setRoundTrips(reads, writes int64) {
	if reads <= 0 || writes < 0 || w.Requests <= 0 {
		return
	}
	n := float64(w.Requests)
	w.ReadsPerRequest, w.WritesPerRequest = round(float64(reads)/n, 2), round(float64(writes)/n, 2)
}

// Held describes what Redis held at the start: "2.14 GB in 624,875 keys" ("" unknown).
func (w *RedisWork) Held() string {
	if w.HeldBytes <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f GB in %s keys", float64(w.HeldBytes)/1e9, thousands(w.HeldKeys))
}

// thousands writes n with commas: 624875 → "624,875".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// redisHeld is used_memory and DBSIZE summed over every master.
func redisHeld(ctx context.Context, rdb redis.UniversalClient) (bytes, keys int64, err error) {
	err = eachMasterInfo(ctx, rdb, "memory", func(ctx context.Context, node *redis.Client, info string) error {
		n, err := node.DBSize(ctx).Result()
		bytes += infoInt(info, "used_memory")
		keys += n
		return err
	})
	return bytes, keys, err
}

// eachMasterInfo runs INFO section on every master (concurrently) and hands each
// answer, with its node, to add, one call at a time: add may sum into its closure.
func eachMasterInfo(ctx context.Context, rdb redis.UniversalClient, section string, add func(ctx context.Context, node *redis.Client, info string) error) error {
	var mu sync.Mutex
	return process.EachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, section).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		return add(ctx, node, info)
	})
}

// infoInt is field name's integer value in an INFO answer (0 when absent).
func infoInt(info, name string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// CommandWork is one command's share of a request.
type CommandWork struct {
	Calls  float64 `json:"calls"`
	Usec   float64 `json:"usec"`
	Nested bool    `json:"nested,omitempty"` // counted within the functions, not in UsecPerRequest
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// nestedCommands are the commands svc's Lua (function libraries and scripts) calls
// (TestNestedCommandsCoverSvcsLua reads them from the sources).
// Redis counts a command a function runs both in its own line and in the FCALL's time,
// so these are left out of the sum; svc's hot path sends none of them itself.
var nestedCommands = map[string]bool{
	"get": true, "mget": true, "set": true, "del": true, "exists": true, "incr": true, "decr": true,
	"expire": true, "pexpire": true, "pexpireat": true, "pexpiretime": true, "persist": true,
	"hget": true, "hmget": true, "hset": true, "hdel": true, "hgetall": true, "hkeys": true,
	"hexists": true, "hincrby": true, "hvals": true,
	"zadd": true, "zrem": true, "zscore": true, "zrangebyscore": true,
}

// ownCommands are the bench's own reads around a run, not the requests' work.
var ownCommands = map[string]bool{"info": true}

// parseCommandStats reads INFO commandstats: calls and usec by command (subcommands as
// "config|get").
func parseCommandStats(info string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		var s cmdStat
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		out[name] = s
	}
	return out
}

// redisWork is the work between two commandstats snapshots, per request (nil without
// requests); hsets of the HSETs were sent by svc itself (see UsecPerRequest).
func redisWork(before, after map[string]cmdStat, requests, hsets int64) *RedisWork {
	if requests <= 0 {
		return nil
	}
	w := &RedisWork{Requests: requests, ByCommand: map[string]CommandWork{}, DirectHSETs: hsets}
	n := float64(requests)
	var usec, calls int64
	for name, a := range after {
		if ownCommands[name] {
			continue
		}
		b := before[name]
		dc, du := a.calls-b.calls, a.usec-b.usec
		if dc <= 0 { // untouched, or the statistics were reset during the run
			continue
		}
		base, _, _ := strings.Cut(name, "|")
		nested := nestedCommands[base]
		w.ByCommand[name] = CommandWork{Calls: round(float64(dc)/n, 3), Usec: round(float64(du)/n, 3), Nested: nested}
		if !nested {
			usec += du
			calls += dc
		}
	}
	if h := after["hset"].calls - before["hset"].calls; hsets > 0 && h > 0 {
		du := float64(after["hset"].usec - before["hset"].usec)
		w.UsecPerRequest = round((float64(usec)+float64(min(hsets, h))*du/float64(h))/n, 2)
		w.CallsPerRequest = round(float64(calls+min(hsets, h))/n, 2)
		return w
	}
	w.UsecPerRequest = round(float64(usec)/n, 2)
	w.CallsPerRequest = round(float64(calls)/n, 2)
	return w
}

// redisCommandStats is INFO commandstats summed over every master.
func redisCommandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]cmdStat, error) {
	total := map[string]cmdStat{}
	err := eachMasterInfo(ctx, rdb, "commandstats", func(_ context.Context, _ *redis.Client, info string) error {
		for k, s := range parseCommandStats(info) {
			t := total[k]
			total[k] = cmdStat{t.calls + s.calls, t.usec + s.usec}
		}
		return nil
	})
	return total, err
}

// redisSettle is how long after the load the second snapshot waits, so that the
// consumer's work on the last requests (its batch claims) is in it.
const redisSettle = time.Second

// watchRedisWork reads Redis's commandstats now; the function it returns reads them
// again (after redisSettle) and sets rep.Redis per completed request, hsets of the HSETs
// svc sent itself (the stored answers: the run's first, not replayed, idempotent 2xx),
// or a note when Redis cannot be asked.
func watchRedisWork(ctx context.Context, rdb redis.UniversalClient) func(rep *Report, hsets int64) {
	heldBytes, heldKeys, heldErr := redisHeld(ctx, rdb)
	reads, writes, ioErr := redisIO(ctx, rdb)
	before, err := redisCommandStats(ctx, rdb)
	return func(rep *Report, hsets int64) {
		if err == nil {
			time.Sleep(redisSettle)
			var after map[string]cmdStat
			if after, err = redisCommandStats(ctx, rdb); err == nil {
				rep.Redis = redisWork(before, after, rep.Requests.Completed, hsets)
				if rep.Redis != nil && heldErr == nil {
					rep.Redis.HeldBytes, rep.Redis.HeldKeys = heldBytes, heldKeys
				}
				if r, w, err := redisIO(ctx, rdb); rep.Redis != nil && ioErr == nil && err == nil {
					rep.Redis.setRoundTrips(r-reads, w-writes)
				}
				return
			}
		}
		rep.Notes = append(rep.Notes, "Redis's commandstats could not be read: "+err.Error())
	}
}

// TopCommands names the 4 commands of w with the most usec per request, as
// "fcall 9.10 µs × 2.00" (nested ones marked).
func (w *RedisWork) TopCommands() []string {
	const n = 4
	names := make([]string, 0, len(w.ByCommand))
	for k := range w.ByCommand {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := w.ByCommand[names[i]], w.ByCommand[names[j]]
		if a.Usec != b.Usec {
			return a.Usec > b.Usec
		}
		return names[i] < names[j]
	})
	var out []string
	for _, k := range names[:min(n, len(names))] {
		c := w.ByCommand[k]
		s := fmt.Sprintf("%s %.2f µs × %.2f", k, c.Usec, c.Calls)
		if c.Nested {
			s += " (in functions)"
		}
		out = append(out, s)
	}
	return out
}
