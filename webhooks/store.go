package webhooks

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/schema/webhook"
)

// Store is the role's view of the webhook state in Redis: the shared store
// (schema/webhook.Store: endpoints, inbound secrets, events, the delivery schedule)
// and, under the same prefix, the keys only this role uses:
//
//	in:msg:<ws>:<message id> STRING processing | processed | ignored (replay guard, by id)
//	in:sig:<ws>:<digest>     STRING the same, by signed content (hex SHA-256 of "<t>.<body>")
//	in:fail:<address>        STRING refused attempts of a client address (throttle.go)
//	logq                     LIST  delivery-log rows waiting for ClickHouse
//	eventq                   LIST  emitted events' rows waiting for ClickHouse (their bodies)
//	scan:*                   trigger state (last closed day scanned)
type Store struct {
	*webhook.Store
	rdb redis.UniversalClient
	p   string
}

// NewStore returns a Store over rdb with key prefix (normally "svc:wh:").
func NewStore(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{Store: webhook.NewStore(rdb, prefix), rdb: rdb, p: prefix}
}

// ---- inbound replay guard ----

// The guard has two keys per message, both reserved before its effect and ended (or
// released) after it: its id, and the digest of its signed content
// (signature.Digest: "<t>.<body>"; the id is not signed, so a captured message resent
// under a new id is the same content).
func (s *Store) msgKey(ws uuid.UUID, id string) string {
	return s.p + "in:msg:" + ws.String() + ":" + id
}

func (s *Store) contentKey(ws uuid.UUID, digest [32]byte) string {
	return s.p + "in:sig:" + ws.String() + ":" + hex.EncodeToString(digest[:])
}

// Message states of the replay guard.
const (
	msgProcessing = "processing"
	msgProcessed  = "processed"
	msgIgnored    = "ignored"
)

// BeginMessage reserves message id for processing. It returns "" when reserved, or the
// state already recorded (processing, processed, ignored). The reservation lapses after
// hold if the holder dies.
func (s *Store) BeginMessage(ctx context.Context, ws uuid.UUID, id string, hold time.Duration) (string, error) {
	return s.begin(ctx, s.msgKey(ws, id), hold)
}

// EndMessage records the final state of a reserved message for window.
func (s *Store) EndMessage(ctx context.Context, ws uuid.UUID, id, state string, window time.Duration) error {
	return s.rdb.Set(ctx, s.msgKey(ws, id), state, window).Err()
}

// ReleaseMessage forgets a reservation, so that a retry of the message is processed.
func (s *Store) ReleaseMessage(ctx context.Context, ws uuid.UUID, id string) error {
	return s.rdb.Del(ctx, s.msgKey(ws, id)).Err()
}

// BeginContent is BeginMessage for the signed content's digest.
func (s *Store) BeginContent(ctx context.Context, ws uuid.UUID, digest [32]byte, hold time.Duration) (string, error) {
	return s.begin(ctx, s.contentKey(ws, digest), hold)
}

// EndContent records the final state of reserved content for window, which must cover
// the signature's tolerance both ways: after it the content's timestamp is stale.
func (s *Store) EndContent(ctx context.Context, ws uuid.UUID, digest [32]byte, state string, window time.Duration) error {
	return s.rdb.Set(ctx, s.contentKey(ws, digest), state, window).Err()
}

// ReleaseContent forgets a reservation of content.
func (s *Store) ReleaseContent(ctx context.Context, ws uuid.UUID, digest [32]byte) error {
	return s.rdb.Del(ctx, s.contentKey(ws, digest)).Err()
}

func (s *Store) begin(ctx context.Context, key string, hold time.Duration) (string, error) {
	ok, err := s.rdb.SetNX(ctx, key, msgProcessing, hold).Result()
	if err != nil {
		return "", err
	}
	if ok {
		return "", nil
	}
	st, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return s.begin(ctx, key, hold) // lapsed in between
	}
	return st, err
}

// ---- queues of rows ClickHouse could not take yet ----

// The queues (lists under the prefix): delivery-log rows, and emitted events' rows.
const (
	logQueue   = "logq"
	eventQueue = "eventq"
)

func (s *Store) push(ctx context.Context, queue string, b []byte) error {
	return s.rdb.RPush(ctx, s.p+queue, b).Err()
}

// pop takes up to n rows of queue (the caller pushes them back if it cannot write them).
func (s *Store) pop(ctx context.Context, queue string, n int) ([]string, error) {
	v, err := s.rdb.LPopCount(ctx, s.p+queue, n).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// ---- trigger state ----

func (s *Store) getState(ctx context.Context, name string) (string, error) {
	v, err := s.rdb.Get(ctx, s.p+"scan:"+name).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

func (s *Store) setState(ctx context.Context, name, v string) error {
	return s.rdb.Set(ctx, s.p+"scan:"+name, v, 0).Err()
}

// takeTurn takes name's turn for every (true), or reports that a process took it within
// that time (false).
func (s *Store) takeTurn(ctx context.Context, name string, every time.Duration) (bool, error) {
	return s.rdb.SetNX(ctx, s.p+"scan:"+name+":claim", "1", every).Result()
}

// giveTurnBack gives name's turn back, so that the next scan tries again.
func (s *Store) giveTurnBack(ctx context.Context, name string) {
	_ = s.rdb.Del(ctx, s.p+"scan:"+name+":claim").Err()
}
