package pulsartest_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
)

// What the admin API answers about a topic's content, the same on both brokers: Apache Pulsar 4.0.7's
// counts, payloads and side effects.

// A subscription's msgBacklog counts entries, not messages: a batch of three is one, as in Pulsar
// (ManagedCursor.getNumberOfEntriesInBacklog). dlq.Summarize reports this number.
func TestAdminBacklogCountsEntries(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "topic stats")
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		batched := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Minute})
		sendBatch(t, batched, "b0", "b1", "b2")
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "single")
		ms := receiveN(t, k, 4)
		require.Equal(t, []string{"b0", "b1", "b2", "single"}, payloads(ms))
		require.Equal(t, ms[0].ID().EntryID(), ms[2].ID().EntryID(), "the three went in one batch")

		code, body := brokertest.AdminDo(t, http.MethodGet, brokertest.TopicURL(admin, topic)+"/stats", "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		var st struct {
			Subscriptions map[string]struct {
				MsgBacklog          int64 `json:"msgBacklog"`
				MsgBacklogNoDelayed int64 `json:"msgBacklogNoDelayed"`
				UnackedMessages     int64 `json:"unackedMessages"`
			} `json:"subscriptions"`
		}
		require.NoError(t, json.Unmarshal(body, &st))
		s := st.Subscriptions["s"]
		assert.EqualValues(t, 2, s.MsgBacklog, "msgBacklog: two entries")
		assert.EqualValues(t, 2, s.MsgBacklogNoDelayed, "msgBacklogNoDelayed: two entries")
		assert.EqualValues(t, 4, s.UnackedMessages, "unackedMessages: four messages")
	})
}
