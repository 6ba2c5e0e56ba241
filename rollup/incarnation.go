package rollup

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic's offsets are positions in one incarnation of it: delete the topic and create
// it again (an operator on a Kafka cluster; a new embedded broker against a ClickHouse
// database that outlived the old one's data) and its offsets start again at 0. The
// exactly-once read-back (consumer.readStored) compares offsets, so rows must say which
// incarnation they came from: their kafka_topic holds the topic's label,
//
//	<topic>@<first 8 bytes of the Kafka topic id, hex>   e.g. events.v1@3f2a…
//
// (just <topic> from a broker without topic ids, Kafka before 2.8). Rows of an earlier
// incarnation then never hide records of the current one. Rows stored before labels
// existed carry the bare topic name and are not read back: a consumer upgraded right
// after a crash between an INSERT and its commit stores that flush once more (a clean
// shutdown commits what it inserted, so a rolling upgrade stores nothing twice).

// topicLabel returns the kafka_topic value of topic's current incarnation, asking the
// brokers behind cl for the topic's id.
func topicLabel(ctx context.Context, cl *kgo.Client, topic string) (string, error) {
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("read the id of topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok {
		return "", fmt.Errorf("read the id of topic %s: not in the metadata", topic)
	}
	if d.Err != nil {
		return "", fmt.Errorf("read the id of topic %s: %w", topic, d.Err)
	}
	return labelOf(topic, d.ID), nil
}

// labelOf is topic's label for topic id id (all zero: the broker has no ids).
func labelOf(topic string, id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return topic
	}
	return topic + "@" + hex.EncodeToString(id[:8])
}
