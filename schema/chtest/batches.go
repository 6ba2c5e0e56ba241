package chtest

import (
	"syscall"
	"time"

	"svc/schema"
)

// Batches returns n records of 50 events each, as the edge would write them.
func Batches(n int) []schema.Batch {
	out := make([]schema.Batch, n)
	for i := range out {
		b := &out[i]
		b.Workspace[0], b.Pixel[0], b.Key[0] = 1, byte(i%7), 3
		b.ReceivedAt = time.Now().UnixMilli()
		b.RequestID = "req_0123456789abcdef"
		b.Events = make([]schema.Event, 50)
		for j := range b.Events {
			e := &b.Events[j]
			e.ID[0], e.ID[1], e.ID[2] = byte(i), byte(i>>8), byte(j)
			e.Name = []string{"purchase", "page_view", "signup"}[j%3]
			e.OccurredAt = b.ReceivedAt - int64(j)*1000
			e.HasValue, e.Value = j%3 == 0, int64(j)*12345
			e.Currency = [3]byte{'E', 'U', 'R'}
			e.Consent = j%4 != 0
			e.HasEmail = e.Consent
			e.EmailSHA[0], e.EmailSHA[1] = byte(j), byte(i)
		}
	}
	return out
}

// CPUTime is the user+system CPU time of this process so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
