package bench

import (
	"os"
	"path/filepath"
	"strings"
)

// Storage describes the filesystem a run's data is written to: the one holding the
// working directory (`make bench` keeps ClickHouse's, Redis's and the embedded broker's
// data under the checkout's .data).
//
// An ext4 filesystem without a journal is named as such: there, each file created
// makes ext4 check every free inode it considers for a recent deletion (the inode
// allocator's recently_deleted), a scan that grows with the files deleted in the last
// minutes. ClickHouse 18.16 writes each part as two files a column (about 116 files a
// flush of the events table and its views here) and deletes the parts it merged, so on
// such a filesystem part of ClickHouse's CPU is that scan (bench/HISTORY.md, stop 52).
type Storage struct {
	Mount     string `json:"mount"`
	Type      string `json:"type"`
	Device    string `json:"device"`
	NoJournal bool   `json:"ext4_no_journal,omitempty"`
}

// String is "ext4 on /dev/vda at / (no journal)" (the HTML report prints it).
func (s Storage) String() string {
	out := s.Type + " on " + s.Device + " at " + s.Mount
	if s.NoJournal {
		out += " (no journal)"
	}
	return out
}

// DescribeStorage describes the filesystem holding dir (its longest mount point in
// /proc/self/mountinfo); ok is false when that cannot be read.
func DescribeStorage(dir string) (s Storage, ok bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return s, false
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return s, false
	}
	var devNum string
	for _, line := range strings.Split(string(b), "\n") {
		m, dev, ok := parseMountinfo(line)
		if ok && containsPath(m.Mount, abs) && len(m.Mount) >= len(s.Mount) {
			s, devNum = m, dev
		}
	}
	if s.Mount == "" {
		return s, false
	}
	s.NoJournal = s.Type == "ext4" && !hasJournal(devNum)
	return s, true
}

// parseMountinfo reads one line of /proc/self/mountinfo: "36 35 98:0 / /mnt rw - ext4
// /dev/vda rw": the mount point, the type and source after the separator, and the
// device's major:minor.
func parseMountinfo(line string) (s Storage, dev string, ok bool) {
	f := strings.Fields(line)
	sep := -1
	for i, v := range f {
		if v == "-" {
			sep = i
			break
		}
	}
	if sep < 5 || len(f) < sep+3 {
		return s, "", false
	}
	return Storage{Mount: f[4], Type: f[sep+1], Device: f[sep+2]}, f[2], true
}

// containsPath reports whether path is mount or below it.
func containsPath(mount, path string) bool {
	return mount == "/" || path == mount || strings.HasPrefix(path, mount+"/")
}

// hasJournal reports whether the block device major:minor has a jbd2 journal: the
// kernel lists each journal in /proc/fs/jbd2 as "<device name>-<journal inode>".
func hasJournal(devNum string) bool {
	link, err := os.Readlink("/sys/dev/block/" + devNum)
	if err != nil {
		return true // not a block device we can name: say nothing
	}
	names, _ := filepath.Glob("/proc/fs/jbd2/" + filepath.Base(link) + "-*")
	return len(names) > 0
}
