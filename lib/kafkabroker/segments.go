package kafkabroker

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// segmentHold keeps the embedded broker's file removals out of its run loop.
//
// kfake serves every request of the cluster from one goroutine, and a DeleteRecords
// removes there each segment file (100 MiB) and index file wholly before the new start.
// Unlinking the last name of a file frees its blocks (and, on a disk mounted with
// discard, trims them): about 20 ms per 100 MiB segment on our VM, during which no
// produced batch is acknowledged. So before the trimmer sends a DeleteRecords, it links
// every file that request will remove under a second name in its own directory; kfake's
// removal then only drops a directory entry, and the trimmer frees the data afterwards by
// removing its links, in its own goroutine.
//
// It relies on kfake's layout (DataDir/partitions/<topic escaped>-<partition>/<base
// offset>.dat and .idx; a segment is removed once the next one starts at or before the
// new start offset): a file it predicts wrongly is either not linked (kfake frees it in
// its loop, as without the hold) or linked and kept by kfake (the link's removal is
// cheap). It never removes a name of kfake's.
type segmentHold struct {
	// dir is kfake's data directory (Config.DataDir/kafka); empty: the broker keeps its
	// log in memory and there is nothing to hold.
	dir string
	// trash holds the second names (Config.DataDir/kafka-trimmed): on the same file
	// system, outside kfake's directory, emptied at start.
	trash string
}

// newSegmentHold returns the hold for kfake's data directory dir (empty: none), emptying
// trash of links a killed process left.
func newSegmentHold(dir, trash string) (segmentHold, error) {
	if dir == "" {
		return segmentHold{}, nil
	}
	if err := os.RemoveAll(trash); err != nil {
		return segmentHold{}, err
	}
	if err := os.MkdirAll(trash, 0o755); err != nil {
		return segmentHold{}, err
	}
	return segmentHold{dir: dir, trash: trash}, nil
}

// link gives every segment and index file a DeleteRecords to floor will remove a second
// name, returning those names. A file that cannot be linked is left to kfake.
func (h segmentHold) link(floor kadm.Offsets) []string {
	if h.dir == "" {
		return nil
	}
	var links []string
	floor.Each(func(o kadm.Offset) {
		part := fmt.Sprintf("%s-%d", url.PathEscape(o.Topic), o.Partition)
		dir := filepath.Join(h.dir, "partitions", part)
		for _, base := range removedSegments(dir, o.At) {
			for _, ext := range []string{".dat", ".idx"} {
				name := strconv.FormatInt(base, 10) + ext
				link := filepath.Join(h.trash, part+"-"+name)
				if os.Link(filepath.Join(dir, name), link) == nil {
					links = append(links, link)
				}
			}
		}
	})
	return links
}

// release removes the links; for a file kfake has removed meanwhile, this frees it. It
// returns how many it removed.
func (h segmentHold) release(links []string) int {
	n := 0
	for _, l := range links {
		if os.Remove(l) == nil {
			n++
		}
	}
	return n
}

// removedSegments returns the base offsets of the segments in dir that lie wholly
// before start: every one but the newest whose successor begins at or before start.
func removedSegments(dir string, start int64) []int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var bases []int64
	for _, e := range entries {
		b, ok := strings.CutSuffix(e.Name(), ".dat")
		if !ok {
			continue
		}
		if base, err := strconv.ParseInt(b, 10, 64); err == nil {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	var out []int64
	for i := 0; i+1 < len(bases) && bases[i+1] <= start; i++ {
		out = append(out, bases[i])
	}
	return out
}
