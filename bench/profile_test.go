package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// -cpuprofile writes a profile go tool pprof reads (gzip-compressed protobuf); without a
// path, or where the file cannot be made, the load runs without one, and leaves no
// profile running that would keep the next from starting.
func TestStartCPUProfile(t *testing.T) {
	dir := t.TempDir()
	startCPUProfile("")() // no path: nothing to stop
	startCPUProfile(filepath.Join(dir, "missing", "gen.pb.gz"))()
	for _, name := range []string{"a.pb.gz", "b.pb.gz"} {
		path := filepath.Join(dir, name)
		stop := startCPUProfile(path)
		x := 0
		for i := range 20_000_000 {
			x ^= i * i
		}
		stop()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("%s: %d bytes, not a gzip-compressed profile (x %d)", name, len(b), x)
		}
	}
}
