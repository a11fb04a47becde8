package pulsartest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The admin subset answers Pulsar's trim call with Broker.Trim and Pulsar 4.0's status codes: 200 with an empty
// body (not 204), 404 for a topic that does not exist; a partitioned topic is trimmed partition by partition.
func TestAdminTrim(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	c := newClient(t, b.URL())
	base := b.AdminURL() + "/admin/v2/persistent/public/default/"

	topic := uniqueName(t, "t")
	sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), numbered(3)...)
	code, body := adminDo(t, http.MethodPost, base+topic+"/trim", "")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Empty(t, body)
	assert.Zero(t, b.Stats(topic).Entries, "no subscription needed them")

	code, body = adminDo(t, http.MethodPost, base+"missing/trim", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.JSONEq(t, `{"reason":"Topic persistent://public/default/missing not found"}`, body)
	assert.NotContains(t, b.Topics(), "persistent://public/default/missing", "the call creates nothing")

	part := uniqueName(t, "p")
	require.NoError(t, b.CreatePartitionedTopic(part, 2))
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: part, DisableBatching: true})
	sendAll(t, p, numbered(6)...)
	code, body = adminDo(t, http.MethodPost, base+part+"/trim", "")
	assert.Equal(t, http.StatusOK, code, body)
	for _, name := range []string{part + "-partition-0", part + "-partition-1"} {
		assert.Zero(t, b.Stats(name).Entries, name)
	}
	code, _ = adminDo(t, http.MethodPost, base+part+"-partition-1/trim", "")
	assert.Equal(t, http.StatusOK, code, "a partition on its own")
	code, _ = adminDo(t, http.MethodPost, base+part+"-partition-7/trim", "")
	assert.Equal(t, http.StatusNotFound, code, "no such partition")
}

// ForceTrim (unload, then trim) deletes, on both brokers, what no durable subscription needs: everything of a
// topic without subscriptions, nothing that a durable subscription has not acknowledged (whose last entry
// GET_LAST_MESSAGE_ID still answers). On Pulsar the unload
// matters: a trim never deletes the ledger being written.
func TestForceTrimDeletesWhatNoSubscriptionNeeds(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "a forced trim")
		kept := topic + "-kept"
		k := durable(t, c, kept, "keep")
		k.Close() // a durable subscription without consumers still holds what it has not acknowledged
		var keptIDs []apulsar.MessageID
		for _, name := range []string{topic, kept} {
			keptIDs = sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: name, DisableBatching: true}), numbered(3)...)
		}
		brokertest.ForceTrim(t, admin, topic, kept)

		st, ok := brokertest.Stats(t, admin, topic)
		require.True(t, ok)
		assert.Zero(t, st.StorageSize, "nothing stored")
		late := durable(t, c, topic, "late")
		expectNone(t, late, time.Second)
		k = durable(t, c, kept, "keep")
		assert.Equal(t, keptIDs[2].EntryID(), lastID(t, k).EntryID(), "GET_LAST_MESSAGE_ID: the last entry, still kept")
		assert.Equal(t, numbered(3), payloads(receiveN(t, k, 3)), "the subscription kept them")
	})
}

// Trimming a partitioned topic trims each partition; unloading it unloads each partition.
func TestForceTrimOfAPartitionedTopic(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "a forced trim")
		tg.CreatePartitionedTopic(t, topic, 2)
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendAll(t, p, numbered(6)...)
		brokertest.ForceTrim(t, admin, topic)
		for _, name := range []string{topic + "-partition-0", topic + "-partition-1"} {
			st, ok := brokertest.Stats(t, admin, name)
			require.True(t, ok, name)
			assert.Zero(t, st.StorageSize, name)
		}
		late := durable(t, c, topic, "late")
		expectNone(t, late, time.Second)
	})
}

// Unload and trim answer the same status codes on both brokers: 204 for an unload, 200 with an empty body for a
// trim, 404 with the topic's name for a topic that does not exist.
func TestAdminUnloadAndTrimStatusCodes(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		base := needAdmin(t, tg, "the unload and trim calls") + "/admin/v2/persistent/public/default/"
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic}), "x")
		code, body := adminDo(t, http.MethodPut, base+topic+"/unload", "")
		assert.Equal(t, http.StatusNoContent, code, body)
		code, body = adminDo(t, http.MethodPost, base+topic+"/trim", "")
		assert.Equal(t, http.StatusOK, code, body)
		assert.Empty(t, body)
		for _, m := range []string{http.MethodPut + " unload", http.MethodPost + " trim"} {
			method, call, _ := strings.Cut(m, " ")
			code, body = adminDo(t, method, base+topic+"-missing/"+call, "")
			assert.Equal(t, http.StatusNotFound, code, m)
			assert.JSONEq(t, `{"reason":"Topic persistent://public/default/`+topic+`-missing not found"}`, body, m)
		}
	})
}

// The partitioned-topic metadata of a topic that does not exist is a 404 on both brokers, unless the caller asks
// whether the topic could be created on use (checkAllowAutoCreation=true); neither call creates it.
func TestAdminPartitionsOfAMissingTopic(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		base := needAdmin(t, tg, "the partitioned-topic metadata") + "/admin/v2/persistent/public/default/"
		code, body := adminDo(t, http.MethodGet, base+topic+"/partitions", "")
		assert.Equal(t, http.StatusNotFound, code, body)
		assert.JSONEq(t, `{"reason":"Topic persistent://public/default/`+topic+` not found"}`, body)
		code, body = adminDo(t, http.MethodGet, base+topic+"/partitions?checkAllowAutoCreation=true", "")
		assert.Equal(t, http.StatusOK, code, body)
		assert.JSONEq(t, `{"partitions":0,"deleted":false}`, body)
		assert.Empty(t, brokertest.Topics(t, tg.AdminURL(), "persistent://public/default/"+topic), "nothing created")

		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic}), "x")
		code, body = adminDo(t, http.MethodGet, base+topic+"/partitions", "")
		assert.Equal(t, http.StatusOK, code, body)
		assert.JSONEq(t, `{"partitions":0,"deleted":false}`, body, "a non-partitioned topic")
		tg.CreatePartitionedTopic(t, topic+"-p", 2)
		code, body = adminDo(t, http.MethodGet, base+topic+"-p/partitions", "")
		assert.Equal(t, http.StatusOK, code, body)
		assert.JSONEq(t, `{"partitions":2,"deleted":false}`, body)
	})
}
