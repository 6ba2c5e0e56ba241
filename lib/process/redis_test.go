package process

import (
	"context"
	"strings"
	"testing"

	"svc/lib/settings"
)

func TestCheckRedisVersion(t *testing.T) {
	for info, ok := range map[string]bool{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n": true,
		"# Server\r\nredis_version:8.2.1\r\n":                           true,
		"# Server\r\nredis_version:6.2.14\r\n":                          false,
		"# Server\r\nredis_version:5.0.7\r\n":                           false,
	} {
		err := checkRedisVersion(info)
		if (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", info, err, ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "7.0 or newer") || !strings.Contains(err.Error(), strings.TrimSpace(strings.SplitN(info, ":", 2)[1]))) {
			t.Errorf("%q: %v does not say what is needed and what was found", info, err)
		}
	}
	// The Redis this suite runs against passes (every node of a cluster is asked).
	rdb, err := OpenRedis(context.Background(), RedisFromEnv(settings.New()))
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
}
