package schema

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the zone database is in the binary: zones load on a minimal container too

	"github.com/ClickHouse/clickhouse-go/v2"
)

// UTC is the default reporting time zone of a workspace.
const UTC = "UTC"

// ErrUnknownZone is returned for a time zone name that is not an IANA zone both this
// binary and ClickHouse know.
var ErrUnknownZone = errors.New("unknown time zone")

// zoneNameRE is the shape of an IANA zone name as ClickHouse loads it from its zone
// files: letters, digits, '_', '+', '-', and '/' between parts ("America/New_York",
// "Etc/GMT+5", "EST5EDT"). It keeps anything else (quotes, spaces, "..", absolute
// paths) out of SQL and out of file lookups.
var zoneNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9][A-Za-z0-9_+\-]*){0,2}$`)

// notZones are names Go's time.LoadLocation accepts that are not zones of the IANA
// database as ClickHouse uses it: the process's local zone, and files of a system zone
// directory that are not zones or count leap seconds.
var notZones = map[string]bool{"Local": true, "localtime": true, "posixrules": true, "Factory": true}

var zones sync.Map // name -> *time.Location, valid names only (a few hundred at most)

// LoadZone returns the location of an IANA time zone name ("UTC", "America/New_York",
// "Asia/Kathmandu"). The name is exact (case matters) and must be one ClickHouse
// knows too; a name that passes is safe as an SQL string literal. Any other name is
// ErrUnknownZone.
func LoadZone(name string) (*time.Location, error) {
	if v, ok := zones.Load(name); ok {
		return v.(*time.Location), nil
	}
	if len(name) > 64 || !zoneNameRE.MatchString(name) || notZones[name] ||
		strings.HasPrefix(name, "posix/") || strings.HasPrefix(name, "right/") {
		return nil, fmt.Errorf("%w %q: want an IANA name such as America/New_York", ErrUnknownZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: want an IANA name such as America/New_York", ErrUnknownZone, name)
	}
	zones.Store(name, loc)
	return loc, nil
}

// ZoneUnknownToServer reports whether err is ClickHouse refusing a time zone it has no
// zone file for (its own zone database can be older than the binary's): code 1000
// "Cannot load time zone" on 18.16, BAD_ARGUMENTS (36) with the same words on later
// releases.
func ZoneUnknownToServer(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && (ex.Code == 1000 || ex.Code == 36) && strings.Contains(ex.Message, "time zone")
}
