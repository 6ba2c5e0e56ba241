package schema

import (
	"errors"
	"testing"
)

func TestLoadZone(t *testing.T) {
	for _, name := range []string{"UTC", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Europe/Berlin",
		"Australia/Sydney", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Etc/GMT-14", "EST5EDT"} {
		loc, err := LoadZone(name)
		if err != nil || loc.String() != name {
			t.Errorf("LoadZone(%q) = %v, %v", name, loc, err)
		}
	}
	for _, name := range []string{"", "Local", "localtime", "posixrules", "Factory", "utc", "america/new_york",
		"Mars/Olympus_Mons", "America/New York", "America/New_York'", "../../etc/passwd", "/usr/share/zoneinfo/UTC",
		"posix/Europe/Berlin", "right/UTC", "+05:45", "Asia/Kathmandu\x00", "A/B/C/D"} {
		if _, err := LoadZone(name); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("LoadZone(%q): %v, want ErrUnknownZone", name, err)
		}
	}
}
