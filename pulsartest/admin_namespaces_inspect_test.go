package pulsartest_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The embedded broker also takes pulsaradmin's metadata body ({"partitions":N,"properties":…}), which Pulsar
// takes only with pulsaradmin's own media type.
func TestAdminPartitionsMetadataBody(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	base := b.AdminURL() + "/admin/v2/persistent/public/default"
	code, _ := adminDo(t, http.MethodPut, base+"/p/partitions", `{"properties":null,"partitions":2}`)
	require.Equal(t, http.StatusNoContent, code)
	assert.Len(t, b.Topics(), 2)
	code, _ = adminDo(t, http.MethodPut, base+"/q/partitions", `{"partitions":"x"}`)
	assert.Equal(t, http.StatusBadRequest, code)
}

// The embedded broker deletes a namespace with its topics on ?force=true, which Pulsar 4.0 refuses unless
// forceDeleteNamespaceAllowed is set (doc.go, deliberate limits).
func TestAdminNamespacesForceDelete(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	ns := b.AdminURL() + "/admin/v2/namespaces/public/"
	code, _ := adminDo(t, http.MethodPut, ns+"fresh", "{}")
	require.Equal(t, http.StatusNoContent, code)
	require.NoError(t, b.CreateTopic("persistent://public/fresh/a"))
	code, _ = adminDo(t, http.MethodDelete, ns+"fresh?force=true", "")
	assert.Equal(t, http.StatusNoContent, code)
	assert.Empty(t, b.Topics())
}

// Stats report real backlog, subscriptions, consumers and producers; the message-by-id endpoint answers the
// payload with its metadata in headers; lookup answers this broker.
func TestAdminStatsMessageAndLookup(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true, Properties: map[string]string{"app": "x"}})
	k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Properties: map[string]string{"who": "me"}})
	ids := sendAll(t, p, "one", "two")
	m := receive(t, k)
	require.NoError(t, k.Ack(m))

	base := b.AdminURL() + "/admin/v2/persistent/public/default/" + topic
	var st struct {
		MsgInCounter int64    `json:"msgInCounter"`
		MsgRateIn    *float64 `json:"msgRateIn"`
		Publishers   []struct {
			ProducerName string            `json:"producerName"`
			Metadata     map[string]string `json:"metadata"`
			AccessMode   string            `json:"accessMode"`
		} `json:"publishers"`
		Subscriptions map[string]struct {
			MsgBacklog int64  `json:"msgBacklog"`
			Type       string `json:"type"`
			Consumers  []struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"consumers"`
		} `json:"subscriptions"`
	}
	testwait.Eventually(t, eventuallyWithin, func() bool {
		code, body := adminDo(t, http.MethodGet, base+"/stats", "")
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		return st.Subscriptions["s"].MsgBacklog == 1
	}, "the ack to reach the broker")
	assert.EqualValues(t, 2, st.MsgInCounter)
	require.NotNil(t, st.MsgRateIn, "rate fields are present")
	require.Len(t, st.Publishers, 1)
	assert.Equal(t, map[string]string{"app": "x"}, st.Publishers[0].Metadata)
	assert.Equal(t, "Shared", st.Publishers[0].AccessMode)
	assert.Equal(t, "Exclusive", st.Subscriptions["s"].Type)
	require.Len(t, st.Subscriptions["s"].Consumers, 1)
	assert.Equal(t, map[string]string{"who": "me"}, st.Subscriptions["s"].Consumers[0].Metadata)

	code, body := adminDo(t, http.MethodGet, base+"/ledger/"+itoa(ids[1].LedgerID())+"/entry/"+itoa(ids[1].EntryID()), "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "two", body)
	code, _ = adminDo(t, http.MethodGet, base+"/ledger/1/entry/99", "")
	assert.Equal(t, http.StatusNotFound, code)

	code, body = adminDo(t, http.MethodGet, b.AdminURL()+"/lookup/v2/topic/persistent/public/default/"+topic, "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"brokerUrl":"`+b.URL()+`"`)
	code, _ = adminDo(t, http.MethodGet, base+"/partitioned-stats", "")
	assert.Equal(t, http.StatusNotFound, code, "not a partitioned topic")
	code, _ = adminDo(t, http.MethodPut, base+"/unload", "")
	assert.Equal(t, http.StatusNoContent, code)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
