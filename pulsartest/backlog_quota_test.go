package pulsartest_test

import (
	"net/http"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// Over its namespace's quota a topic refuses producers (producer_exception), once the periodic check ran.
func TestBacklogQuotaRefusesProducers(t *testing.T) {
	t.Parallel()
	clock := pulsartest.NewManualClock(time.Unix(1_700_000_000, 0))
	b := pulsartest.NewBroker(t, pulsartest.WithClock(clock), pulsartest.WithAdminHTTP("127.0.0.1:0"),
		pulsartest.WithBacklogQuotaCheck(5*time.Second))
	c := newClient(t, b.URL())
	topic := "persistent://acme/q/" + uniqueName(t, "t")
	ns := b.AdminURL() + "/admin/v2/namespaces/acme/q"
	code, body := adminDo(t, http.MethodPost, ns+"/backlogQuota?backlogQuotaType=destination_storage",
		`{"limitSize":100,"limitTime":-1,"policy":"producer_exception"}`)
	require.Equal(t, http.StatusNoContent, code, body)
	_, body = adminDo(t, http.MethodGet, ns+"/backlogQuotaMap", "")
	assert.Contains(t, body, `"policy":"producer_exception"`)

	subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: make([]byte, 1024)})
	require.NoError(t, err)
	_, err = c.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.Error(t, err, "over quota at once")
	assert.Contains(t, err.Error(), "ProducerBlockedQuotaExceededException")
	clock.Advance(5 * time.Second)
	testwait.Eventually(t, eventuallyWithin, func() bool { return b.Stats(topic).Producers == 0 }, "the producer to be disconnected")

	code, _ = adminDo(t, http.MethodDelete, ns+"/backlogQuota", "")
	require.Equal(t, http.StatusNoContent, code)
	newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
	require.ErrorIs(t, b.SetBacklogQuota("acme/q", 1, "drop_everything"), pulsartest.ErrInvalidQuota)
}

// consumer_backlog_eviction moves the slowest subscription on instead.
func TestBacklogQuotaEviction(t *testing.T) {
	t.Parallel()
	clock := pulsartest.NewManualClock(time.Unix(1_700_000_000, 0))
	b := pulsartest.NewBroker(t, pulsartest.WithClock(clock))
	c := newClient(t, b.URL())
	topic := "persistent://acme/e/" + uniqueName(t, "t")
	require.NoError(t, b.SetBacklogQuota("acme/e", 1500, pulsartest.ConsumerBacklogEvicton))
	subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", ReceiverQueueSize: 1})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for range 4 {
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: make([]byte, 1024)})
		require.NoError(t, err)
	}
	require.Equal(t, 4, b.Backlog(topic, "slow"))
	clock.Advance(time.Minute)
	assert.Equal(t, 1, b.Backlog(topic, "slow"), "evicted down to what fits 1500 bytes")
}
