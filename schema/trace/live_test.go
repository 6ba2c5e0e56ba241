package trace

import (
	"testing"
	"time"
)

// A live cursor survives its token; a token it did not make is refused.
func TestLiveCursorToken(t *testing.T) {
	c := LiveCursor{E: map[int32]int64{0: 12, 3: -1}, R: map[int32]int64{}, Floor: time.Unix(1_800_000_000, 0).UTC()}
	s := c.String()
	if s != "1800000000~e0.12,3.-1~r" {
		t.Fatalf("token %q", s)
	}
	back, err := ParseLiveCursor(s)
	if err != nil || back.String() != s || !back.Floor.Equal(c.Floor) {
		t.Fatalf("%q read back as %+v, %v", s, back, err)
	}
	for _, bad := range []string{"", "x", "1~e~", "1~r~e", "-1~e~r", "1~e0~r", "1~e0.x~r", "1~e-1.0~r", "1~e0.-2~r", "1~e0.1;DROP~r", "999999999999~e~r", "4102444801~e~r"} {
		if _, err := ParseLiveCursor(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
	if got := offsetOf(map[int32]int64{1: 5, 0: 7}); got != "multiIf(kafka_partition = 0, toInt64(7), kafka_partition = 1, toInt64(5), toInt64(-1))" {
		t.Fatalf("offsetOf: %s", got)
	}
}
