package api

import (
	"context"
	"os"
	"strings"
	"testing"
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
		if err != nil && !strings.Contains(err.Error(), "7.0 or newer") {
			t.Errorf("%q: %v does not say what is needed", info, err)
		}
	}
	// The Redis this suite runs against passes (every node of a cluster is asked).
	rc := RedisConfig{URL: os.Getenv("SVC_REDIS_URL")}
	if rc.URL == "" {
		rc.URL = DefaultRedisURL
	}
	if c := os.Getenv("SVC_REDIS_CLUSTER"); c != "" {
		rc.Cluster = strings.Split(c, ",")
	}
	rdb, err := OpenRedis(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
}
