package redisfn

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot is the Redis Cluster hash slot of key (CRC16/XMODEM of the key's hash tag, or of
// the whole key when it has none, modulo Slots), as CLUSTER KEYSLOT computes it. Keys of
// one slot are on one master, and one function call may touch them together.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Slots
}
