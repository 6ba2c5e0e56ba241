package schema

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.hex golden records")

// goldenBatches are the known batches behind testdata/<name>.hex. Never change an
// existing one: the files pin the wire format events.v1 that deployed edges write.
var goldenBatches = map[string]Batch{
	"minimal": {
		Workspace:  UUID{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10},
		Pixel:      UUID{0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f},
		Key:        UUID{0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f},
		ReceivedAt: 1767225600000, // 2026-01-01T00:00:00Z
		RequestID:  "req_min",
		Events: []Event{{
			ID:         UUID{0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
			Name:       "page_view",
			OccurredAt: 1767225599000,
		}},
	},
	"sandbox_full": {
		Sandbox:    true,
		Workspace:  UUID{0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00},
		Pixel:      UUID{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf},
		Key:        UUID{0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf},
		ReceivedAt: 1767312000123,
		RequestID:  "req_0123456789abcdef",
		Events: []Event{
			{ // purchase with value, currency, consent and an (arbitrary) email hash
				ID: UUID{0xc0, 1}, Name: "purchase", OccurredAt: 1767311999999,
				HasValue: true, Value: 1234500, Currency: [3]byte{'E', 'U', 'R'},
				Consent: true, HasEmail: true,
				EmailSHA: [32]byte{0x8a, 0xe4, 0x70, 0x2c, 0x07, 0xf8, 0x0e, 0x1b, 0x3b, 0x40, 0x0c, 0x8e, 0x0e, 0x0f, 0x0e, 0x1f,
					0x33, 0x67, 0x4b, 0x6f, 0x5c, 0x5e, 0xad, 0x0e, 0x67, 0xd0, 0x2e, 0x1b, 0x2a, 0x0c, 0x1a, 0x99},
			},
			{ // refund: negative value, no consent, no email
				ID: UUID{0xc0, 2}, Name: "refund", OccurredAt: 1767225600000 - 86400000*3,
				HasValue: true, Value: -500, Currency: [3]byte{'U', 'S', 'D'},
			},
			{ // consented without email, no value, long name
				ID: UUID{0xc0, 3}, Name: strings.Repeat("n", MaxNameLen), OccurredAt: 0, Consent: true,
			},
		},
	},
}

// TestGoldenRecords: a golden record of the version AppendBatch writes is what it
// writes, byte for byte; every golden record, of that version or an older one, decodes
// to its batch (without the fields its version does not carry). -update writes the
// missing files and those of the current version, never an older one.
func TestGoldenRecords(t *testing.T) {
	for name, b := range goldenBatches {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name+".hex")
			got := AppendBatch(nil, &b)
			raw, err := os.ReadFile(path)
			if *update && (os.IsNotExist(err) || err == nil && recordVersionOf(raw) == recordVersion) {
				raw = []byte(hex.EncodeToString(got) + "\n")
				if err = os.WriteFile(path, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err != nil {
				t.Fatalf("%v (run go test ./schema -run Golden -update once to create it)", err)
			}
			want, err := hex.DecodeString(strings.TrimSpace(string(raw)))
			if err != nil || len(want) < 3 {
				t.Fatalf("%s: %v", path, err)
			}
			if want[2] == recordVersion && !bytes.Equal(got, want) {
				t.Fatalf("encoding changed:\n got %x\nwant %x", got, want)
			}
			var back Batch
			if err := DecodeBatch(want, &back); err != nil {
				t.Fatal(err)
			}
			if old := asOfVersion(b, want[2]); !reflect.DeepEqual(back, old) {
				t.Fatalf("decoded %+v\nwant %+v", back, old)
			}
		})
	}
}

// recordVersionOf is the version byte of a golden file's record (0 if unreadable).
func recordVersionOf(hexRecord []byte) uint8 {
	b, err := hex.DecodeString(strings.TrimSpace(string(hexRecord)))
	if err != nil || len(b) < 3 {
		return 0
	}
	return b[2]
}

func TestDecodeRejects(t *testing.T) {
	good := AppendBatch(nil, ptr(goldenBatches["sandbox_full"]))
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XX"), good[2:]...),
		"version":   append([]byte{'S', 'E', recordVersion + 1}, good[3:]...),
		"version 0": append([]byte{'S', 'E', 0}, good[3:]...),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte(nil), good...), 0),
	}
	zero := *ptr(goldenBatches["minimal"])
	zero.Events = nil
	cases["no events"] = AppendBatch(nil, &zero)
	for name, v := range cases {
		var b Batch
		if err := DecodeBatch(v, &b); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: got %v, want ErrRecord", name, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// benchRecordBatch is a record as the edge writes it under load: 50 events, two thirds
// with a value, most consented with an email hash.
func benchRecordBatch() *Batch {
	b := &Batch{Workspace: UUID{1}, Pixel: UUID{2}, Key: UUID{3}, ReceivedAt: 1767225600000, RequestID: "req_0123456789abcdef01234567"}
	for i := range 50 {
		e := Event{ID: UUID{0x40, byte(i)}, Name: []string{"purchase", "page_view", "add_to_cart"}[i%3],
			OccurredAt: 1767225600000 - int64(i)*1000, Consent: i%5 != 0}
		if i%3 != 2 {
			e.HasValue, e.Value, e.Currency = true, int64(i)*12345, [3]byte{'E', 'U', 'R'}
		}
		if e.Consent {
			e.HasEmail, e.EmailSHA = true, [32]byte{byte(i), 0xab}
		}
		b.Events = append(b.Events, e)
	}
	return b
}

// BenchmarkAppendBatch is the edge's encoding of one 50-event record (reported per event).
func BenchmarkAppendBatch(b *testing.B) {
	batch := benchRecordBatch()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBatch(buf[:0], batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50, "ns/event")
}

// BenchmarkDecodeBatch is the consumer's decoding of one 50-event record (reported per
// event), into a reused Batch as the consumer does.
func BenchmarkDecodeBatch(b *testing.B) {
	rec := AppendBatch(nil, benchRecordBatch())
	var back Batch
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeBatch(rec, &back); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50, "ns/event")
}

// BenchmarkScanClientIDs is the consumer's scan of one 50-event record for the ids
// clients gave (reported per event), into a reused ClientIDs; half the events carry one.
func BenchmarkScanClientIDs(b *testing.B) {
	batch := benchRecordBatch()
	for i := range batch.Events {
		if i%2 == 0 {
			batch.Events[i].ID = ClientEventID([]byte{byte(i)})
		}
	}
	rec := AppendBatch(nil, batch)
	var s ClientIDs
	b.ReportAllocs()
	for b.Loop() {
		if err := ScanClientIDs(rec, &s); err != nil {
			b.Fatal(err)
		}
	}
	if len(s.IDs) != 25 {
		b.Fatalf("%d ids from the client, want 25", len(s.IDs))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50, "ns/event")
}
