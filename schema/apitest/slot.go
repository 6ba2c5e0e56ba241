package apitest

import "svc/lib/redisfn"

// Slot is the Redis Cluster hash slot of key, as CLUSTER KEYSLOT computes it
// (redisfn.Slot).
func Slot(key string) int { return redisfn.Slot(key) }
