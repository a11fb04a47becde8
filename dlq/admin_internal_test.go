package dlq

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// batchMember encodes a SingleMessageMetadata with one property (p=key), a partition key,
// an ordering key (when ok is not empty) and the payload size, followed by the payload,
// length-prefixed as in a batch. The property and
// the metadata each have a field the parser does not know, which it skips.
func batchMember(key, pk, ok string, payload []byte) []byte {
	var kv []byte
	kv = protowire.AppendTag(kv, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "p")
	kv = protowire.AppendTag(kv, 3, protowire.VarintType) // not in KeyValue: skipped
	kv = protowire.AppendVarint(kv, 1)
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendString(kv, key)
	var md []byte
	md = protowire.AppendTag(md, 1, protowire.BytesType)
	md = protowire.AppendBytes(md, kv)
	md = protowire.AppendTag(md, 2, protowire.BytesType)
	md = protowire.AppendString(md, pk)
	md = protowire.AppendTag(md, 3, protowire.VarintType)
	md = protowire.AppendVarint(md, uint64(len(payload)))
	if ok != "" {
		md = protowire.AppendTag(md, 7, protowire.BytesType)
		md = protowire.AppendString(md, ok)
	}
	md = protowire.AppendTag(md, 5, protowire.VarintType) // event_time: skipped
	md = protowire.AppendVarint(md, 99)
	out := binary.BigEndian.AppendUint32(nil, uint32(len(md)))
	out = append(out, md...)
	return append(out, payload...)
}

func TestParsePeekedOldAndNewHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-Pulsar-Message-ID", "12:3:-1")
	h.Set("X-Pulsar-publish-time", "2026-07-27T10:11:12.345+0000")
	h.Set("X-Pulsar-PROPERTY", `{"bq-job":"urn:babel:a:b","Mixed":"x"}`)
	h.Set("X-Pulsar-PROPERTY-TOTAL-CHUNKS", "2")
	msgs, err := parsePeeked("persistent://t/n/q.dlq-partition-2", h, []byte(`{"job":"x"}`))
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, map[string]string{"bq-job": "urn:babel:a:b", "Mixed": "x"}, msgs[0].Properties, "JSON wins, exact names")
	assert.Equal(t, int64(12), msgs[0].ID.LedgerID())
	assert.Equal(t, int64(3), msgs[0].ID.EntryID())
	assert.Equal(t, int32(2), msgs[0].ID.PartitionIdx())
	assert.Equal(t, int32(-1), msgs[0].ID.BatchIdx(), "not batched: the client's id of it")
	assert.Equal(t, int64(1785147072345), msgs[0].PublishTime.UnixMilli())
	assert.Equal(t, KindRaw, msgs[0].Kind)

	old := http.Header{}
	old.Set("X-Pulsar-Message-ID", "5:6")
	old.Set("X-Pulsar-PROPERTY-bq-job", "urn:babel:a:b")
	old.Set("X-Pulsar-PROPERTY-Total-Chunks", "2")
	msgs, err = parsePeeked("q.dlq", old, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"bq-job": "urn:babel:a:b"}, msgs[0].Properties, "one header per property, chunk counters left out")
	assert.Equal(t, int32(-1), msgs[0].ID.PartitionIdx())

	for _, id := range []string{"", "5", "a:1", "1:b"} {
		bad := http.Header{}
		bad.Set("X-Pulsar-Message-ID", id)
		_, err := parsePeeked("q", bad, nil)
		require.Error(t, err, id)
	}
	bad := http.Header{}
	bad.Set("X-Pulsar-Message-ID", "1:1")
	bad.Set("X-Pulsar-PROPERTY", "{")
	_, err = parsePeeked("q", bad, nil)
	require.Error(t, err)
}

func TestParsePeekedBatch(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-Pulsar-Message-ID", "7:8")
	h.Set("X-Pulsar-num-batch-message", "2")
	body := append(batchMember("one", "k1", "", []byte("first")), batchMember("two", "k2", "o2", []byte("second"))...)
	msgs, err := parsePeeked("q", h, body)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, "first", string(msgs[0].Payload))
	assert.Equal(t, "k2", msgs[1].Key)
	assert.Equal(t, "o2", msgs[1].OrderingKey)
	assert.Empty(t, msgs[0].OrderingKey)
	assert.Equal(t, "two", msgs[1].Properties["p"])
	assert.Equal(t, "one", msgs[0].Properties["p"], "each message has its own properties")
	assert.Equal(t, int32(1), msgs[1].ID.BatchIdx())

	h.Set("X-Pulsar-num-batch-message", "3")
	msgs, err = parsePeeked("q", h, append(body, batchMember("three", "", "", nil)...))
	require.NoError(t, err, "a last message with an empty payload: its metadata ends the entry")
	require.Len(t, msgs, 3)
	assert.Empty(t, msgs[2].Payload)

	for _, n := range []string{"0", "x", "3"} {
		h.Set("X-Pulsar-num-batch-message", n)
		_, err := parsePeeked("q", h, body)
		require.Error(t, err, n)
	}
	h.Set("X-Pulsar-num-batch-message", "1")
	_, err = parsePeeked("q", h, body[:10])
	require.ErrorIs(t, err, errBatch)
}

// TestTheDefaultClientWaits30s: without WithHTTPClient, each request is bounded by 30 s.
func TestTheDefaultClientWaits30s(t *testing.T) {
	t.Parallel()
	a, err := NewAdmin("http://localhost:8080")
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, a.hc.Timeout)
}

func TestRestPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"orders.dlq":                           "persistent/public/default/orders.dlq",
		"acme/shop/orders.dlq":                 "persistent/acme/shop/orders.dlq",
		"non-persistent://acme/shop/x y":       "non-persistent/acme/shop/x%20y",
		"persistent://acme/shop/q-partition-1": "persistent/acme/shop/q-partition-1",
	} {
		got, err := restPath(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	_, err := restPath("a/b")
	require.ErrorIs(t, err, ErrInvalidTopic)
}

// FuzzParsePeeked feeds arbitrary admin API answers (headers and body) to the parser: it
// must return messages or an error, never panic.
func FuzzParsePeeked(f *testing.F) {
	f.Add("1:2", "", `{"a":"b"}`, []byte("x"))
	f.Add("1:2", "2", "", append(batchMember("a", "k", "o", []byte("p")), batchMember("b", "", "", nil)...))
	f.Add("1:2:3", "1", "{", []byte{0, 0, 0, 200})
	f.Fuzz(func(t *testing.T, id, batch, props string, body []byte) {
		h := http.Header{}
		h.Set("X-Pulsar-Message-ID", id)
		if batch != "" {
			h.Set("X-Pulsar-num-batch-message", batch)
		}
		if props != "" {
			h.Set("X-Pulsar-PROPERTY", props)
		}
		msgs, err := parsePeeked("q-partition-1", h, body)
		if err == nil && len(msgs) == 0 {
			t.Fatal("no error and no message")
		}
	})
}

func TestSubscriptionFailureNamesTheFix(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"server error: SubscriptionNotFound: Subscription does not exist": "allowAutoSubscriptionCreation=false",
		"server error: TopicNotFound: Topic does not exist":               "pulsar-admin topics create orders.dlq",
		"server error: AuthorizationError: not authorized":                "consume permission",
		"connection refused": "bq subscription create --topic orders.dlq --name bq-dlq",
	} {
		err := subscriptionFailure("orders.dlq", "bq-dlq", errors.New(msg))
		var se *SubscriptionError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, "orders.dlq", se.Topic)
		assert.Equal(t, "bq-dlq", se.Subscription)
		assert.Contains(t, err.Error(), want, msg)
		assert.True(t, strings.HasPrefix(err.Error(), `dlq: subscription "bq-dlq" on "orders.dlq": `), "it names the subscription and the topic: %s", err)
		assert.Contains(t, err.Error(), msg, "the client's error is kept")
		require.ErrorIs(t, err, ErrSubscription)
	}
}
