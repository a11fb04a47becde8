package pulsartest_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
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

// Peeking at a compressed entry, and reading it by id, answers its uncompressed payload, with the codec and the
// uncompressed size in headers, as Pulsar does (it decodes before it answers). The connector's compressionType
// attribute publishes such entries to the topics that dlq.Peek reads.
func TestAdminPeekUncompresses(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "peeking")
		payload := strings.Repeat("babelqueue ", 40)
		for _, tc := range []struct {
			name  string
			codec apulsar.CompressionType
		}{{"LZ4", apulsar.LZ4}, {"ZLIB", apulsar.ZLib}, {"ZSTD", apulsar.ZSTD}, {"SNAPPY", apulsar.SNAPPY}} {
			tp := topic + "-" + strings.ToLower(tc.name)
			subscribe(t, c, apulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s"})
			p := newProducer(t, c, apulsar.ProducerOptions{Topic: tp, DisableBatching: true, CompressionType: tc.codec})
			id := sendAll(t, p, payload)[0]
			base := brokertest.TopicURL(admin, tp)
			for _, path := range []string{
				"/subscription/s/position/1",
				"/ledger/" + strconv.FormatInt(id.LedgerID(), 10) + "/entry/" + strconv.FormatInt(id.EntryID(), 10),
			} {
				code, h, body := adminCall(t, http.MethodGet, base+path, "")
				require.Equal(t, http.StatusOK, code, "%s %s: %s", tc.name, path, body)
				assert.Equal(t, payload, body, "%s %s", tc.name, path)
				assert.Equal(t, tc.name, h.Get("X-Pulsar-compression"), "%s %s", tc.name, path)
				assert.Equal(t, strconv.Itoa(len(payload)), h.Get("X-Pulsar-uncompressed-size"), "%s %s", tc.name, path)
			}
		}
	})
}

// Peeking at a subscription that does not exist creates it, durable and at the earliest entry, and answers
// from there: Pulsar's admin API looks the subscription up with getSubscriptionReference, which creates what
// it does not find. A peek by a name nobody subscribed with therefore retains the topic from then on.
func TestAdminPeekCreatesAMissingSubscription(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "peeking")
		subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "first", "second")

		code, body := brokertest.AdminDo(t, http.MethodGet, brokertest.TopicURL(admin, topic)+"/subscription/ghost/position/2", "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		assert.Equal(t, "second", string(body))
		assert.Equal(t, []string{"ghost", "s"}, brokertest.Subscriptions(t, admin, topic))
		st, ok := brokertest.Stats(t, admin, topic)
		require.True(t, ok)
		assert.Equal(t, brokertest.SubscriptionStats{Backlog: 2, Durable: true}, st.Subscriptions["ghost"])

		k := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "ghost", SubscriptionInitialPosition: apulsar.SubscriptionPositionLatest,
		})
		assert.Equal(t, []string{"first", "second"}, payloads(receiveN(t, k, 2)), "the subscription starts at the earliest entry")
	})
}

// backlogSizes reads a topic's backlogSize and its subscriptions' from the admin stats.
func backlogSizes(t *testing.T, admin, topic string) (storage, topicBacklog int64, subs map[string]int64) {
	t.Helper()
	code, body := brokertest.AdminDo(t, http.MethodGet, brokertest.TopicURL(admin, topic)+"/stats", "")
	require.Equal(t, http.StatusOK, code, "%s", body)
	var st struct {
		StorageSize   int64 `json:"storageSize"`
		BacklogSize   int64 `json:"backlogSize"`
		Subscriptions map[string]struct {
			BacklogSize int64 `json:"backlogSize"`
		} `json:"subscriptions"`
	}
	require.NoError(t, json.Unmarshal(body, &st))
	subs = map[string]int64{}
	for name, s := range st.Subscriptions {
		subs[name] = s.BacklogSize
	}
	return st.StorageSize, st.BacklogSize, subs
}

// A subscription's backlogSize is the size of the entries after its mark-delete position, the individually
// acknowledged ones included (Pulsar estimates it from the ledgers), and the topic's backlogSize is that of its
// slowest subscription, not a sum.
func TestAdminBacklogSizes(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "topic stats")
		subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "idle"}).Close()
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared, AckWithResponse: true})
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "m0", "m1", "m2")
		ms := receiveN(t, k, 3)
		require.NoError(t, k.Ack(ms[1]))
		storage, topicBacklog, subs := backlogSizes(t, admin, topic)
		assert.Equal(t, storage, subs["idle"], "idle: everything")
		assert.Equal(t, storage, subs["s"], "s: everything after its mark-delete position, the hole included")
		assert.Equal(t, storage, topicBacklog, "topic: the slowest subscription's")

		require.NoError(t, k.Ack(ms[0]))
		require.NoError(t, k.Ack(ms[2]))
		storage, topicBacklog, subs = backlogSizes(t, admin, topic)
		assert.Zero(t, subs["s"], "s: nothing left")
		assert.Equal(t, storage, topicBacklog, "topic: the slowest subscription's")
	})
}

// Partitioned topics are created with a count (PUT …/partitions) and grown with POST, with Pulsar 4.0's status
// codes and reasons for a count below 1, a name holding "-partition-", a shrink and a topic that is not
// partitioned.
func TestAdminPartitionsCreateAndUpdate(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, _ apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "partitioned topics")
		p := brokertest.TopicURL(admin, topic) + "/partitions"
		for _, tc := range []struct {
			method, url, body string
			code              int
			reason            string
		}{
			{http.MethodPut, p, "2", http.StatusNoContent, ""},
			{http.MethodPost, p, "4", http.StatusNoContent, ""},
			{http.MethodPost, p, "4", http.StatusNoContent, ""},
			{http.MethodPost, p, "1", http.StatusUnprocessableEntity, "Desired partitions 1 can't be less than the current partitions 4."},
			{http.MethodPut, p, "4", http.StatusConflict, "This topic already exists"},
			{
				http.MethodPost, brokertest.TopicURL(admin, topic+"-missing") + "/partitions", "3", http.StatusConflict,
				"Topic persistent://public/default/" + topic + "-missing is not the partitioned topic.",
			},
			{
				http.MethodPut, brokertest.TopicURL(admin, topic+"-zero") + "/partitions", "0", http.StatusNotAcceptable,
				"Number of partitions should be more than 0",
			},
			{
				http.MethodPut, brokertest.TopicURL(admin, topic+"-partition-x") + "/partitions", "2", http.StatusPreconditionFailed,
				"Partitioned Topic Name should not contain '-partition-'",
			},
		} {
			code, body := brokertest.AdminDo(t, tc.method, tc.url, tc.body)
			assert.Equal(t, tc.code, code, "%s %s %s: %s", tc.method, tc.url, tc.body, body)
			if tc.reason != "" {
				assert.JSONEq(t, jsonReason(t, tc.reason), string(body), "%s %s %s", tc.method, tc.url, tc.body)
			}
		}
		code, body := brokertest.AdminDo(t, http.MethodGet, p, "")
		require.Equal(t, http.StatusOK, code)
		assert.JSONEq(t, `{"partitions":4,"deleted":false}`, string(body))
		if b := tg.Broker(); b != nil {
			assert.Len(t, b.Topics(), 4)
		}
	})
}

// Namespaces are created, listed and deleted with Pulsar 4.0's status codes and reasons. The namespace that is
// deleted never held a topic: right after a topic's deletion Pulsar may still refuse the namespace's ("Cannot
// delete non empty bundle").
func TestAdminNamespaces(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, _ apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "namespaces")
		suffix := topic[len(topic)-12:]
		full, empty := "public/full-"+suffix, "public/empty-"+suffix
		nsURL := func(name string) string { return admin + "/admin/v2/namespaces/" + name }
		for _, tc := range []struct {
			method, url string
			code        int
			reason      string
		}{
			{http.MethodGet, nsURL(full) + "/topics", http.StatusNotFound, "Namespace does not exist"},
			{http.MethodPut, nsURL(full), http.StatusNoContent, ""},
			{http.MethodPut, nsURL(full), http.StatusConflict, "Namespace already exists"},
			{http.MethodGet, nsURL(full) + "/topics", http.StatusOK, ""},
			{http.MethodPut, brokertest.TopicURL(admin, "persistent://"+full+"/a"), http.StatusNoContent, ""},
			{http.MethodDelete, nsURL(full), http.StatusConflict, "Cannot delete non empty namespace"},
			{http.MethodPut, nsURL(empty), http.StatusNoContent, ""},
			{http.MethodDelete, nsURL(empty), http.StatusNoContent, ""},
			{http.MethodDelete, nsURL(empty), http.StatusNotFound, "Namespace " + empty + " does not exist."},
			{http.MethodPut, nsURL("public/default"), http.StatusConflict, "Namespace already exists"},
		} {
			body := ""
			if tc.method == http.MethodPut && strings.Contains(tc.url, "/namespaces/") {
				body = "{}"
			}
			code, got := brokertest.AdminDo(t, tc.method, tc.url, body)
			assert.Equal(t, tc.code, code, "%s %s: %s", tc.method, tc.url, got)
			if tc.reason != "" {
				assert.JSONEq(t, jsonReason(t, tc.reason), string(got), "%s %s", tc.method, tc.url)
			}
		}
	})
}
