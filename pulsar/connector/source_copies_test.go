package connector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// The properties a stage's nack names (messaging.WithNackProperties) go on every copy its
// failure makes under failure-strategy babelqueue: the republished retry and the dead-letter
// copy, beside the contract's own properties, which they cannot replace. It runs on the
// embedded broker and, with PULSAR_URL set, on a real one.
func TestNackPropertiesGoOnEveryCopy(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		t.Helper()
		f := newSourceFixture(t, tg, "copyprops", 2, true)
		client, topic, copies, dead := f.client, f.topic, f.copies, f.dead
		runStage(t, f.src, func(m bytesMsg) {
			// Each attempt names its own value, so that the dead-letter copy's cannot come
			// from the retry copy that it was made from.
			md, ok := messaging.MetadataOf[connector.IncomingMetadata](m.Metadata())
			assert.True(t, ok, "incoming metadata")
			why := fmt.Sprintf("boom %d", md.Attempts+1)
			assert.NoError(t, m.Nack(context.Background(), errors.New(why),
				messaging.WithNackProperties(map[string]string{"why": why, bqpulsar.PropAttempts: "99"})))
		})

		pub, err := bqpulsar.NewPublisher(client, topic)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, pub.Close()) })
		_, err = pub.Publish(t.Context(), "urn:babel:orders:created", map[string]any{"id": 1})
		require.NoError(t, err)

		got := copies.Wait(t, 2, waitLong)
		assert.NotContains(t, got[0].Properties(), "why", "the original")
		assert.Equal(t, "boom 1", got[1].Properties()["why"], "the republished retry")
		assert.Equal(t, "1", got[1].Properties()[bqpulsar.PropAttempts], "the contract's count, not the stage's")
		dl := dead.Wait(t, 1, waitLong)[0]
		assert.Equal(t, "boom 2", dl.Properties()["why"], "the dead-letter copy")
		assert.Equal(t, "2", dl.Properties()[bqpulsar.PropAttempts], "the dead-letter copy's count, not the stage's")
		env, err := envelope.Decode(dl.Payload())
		require.NoError(t, err)
		require.NotNil(t, env.DeadLetter)
		assert.Equal(t, 2, env.DeadLetter.Attempts)
		admin := tg.Admin(t)
		testwait.Eventually(t, brokertest.WaitLong, func() bool { return brokertest.Backlog(t, admin, topic, "app") == 0 },
			"every delivery settled")
	})
}

// A stage that cannot decode a payload of a raw-payload Source (Envelopes off, so the
// Source delivers what is not an envelope) and nacks with messaging.ErrDecode, without
// asking for the dead-letter topic, still gets the poison copy at once, as a body that the
// babelqueue codec refuses does: no retry, {"raw":…} with reason poison. It runs on the
// embedded broker and, with PULSAR_URL set, on a real one.
func TestDecodeFailureOfARawPayloadIsPoisonAtOnce(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		t.Helper()
		f := newSourceFixture(t, tg, "rawpoison", 3, false)
		client, topic, copies, dead := f.client, f.topic, f.copies, f.dead
		runStage(t, f.src, func(m bytesMsg) {
			assert.NoError(t, m.Nack(context.Background(), fmt.Errorf("%w: not the stage's format", messaging.ErrDecode)))
		})

		p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		require.NoError(t, err)
		defer p.Close()
		_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("<order id=1/>"), Key: "k"})
		require.NoError(t, err)

		dl := dead.Wait(t, 1, waitLong)[0]
		var body struct {
			Raw        string `json:"raw"`
			DeadLetter struct {
				Reason   string `json:"reason"`
				Attempts int    `json:"attempts"`
			} `json:"dead_letter"`
		}
		require.NoError(t, json.Unmarshal(dl.Payload(), &body), "%s", dl.Payload())
		assert.Equal(t, "<order id=1/>", body.Raw)
		assert.Equal(t, "poison", body.DeadLetter.Reason)
		assert.Equal(t, 1, body.DeadLetter.Attempts, "dead-lettered on its first delivery")
		assert.Equal(t, "k", dl.Key())
		admin := tg.Admin(t)
		testwait.Eventually(t, brokertest.WaitLong, func() bool { return brokertest.Backlog(t, admin, topic, "app") == 0 },
			"the original acknowledged")
		copies.Wait(t, 1, waitLong)
		assert.Equal(t, 1, copies.Count(), "the original alone: no retry was republished")
	})
}

// sourceFixture is a Source under failure-strategy babelqueue on a fresh topic of a target
// (a Shared subscription "app" from the earliest message, retries by republish), with
// collectors of the topic and of its dead-letter topic.
type sourceFixture struct {
	client       apulsar.Client
	topic        string
	copies, dead *brokertest.Collector
	src          *connector.Source
}

func newSourceFixture(t *testing.T, tg *brokertest.Target, base string, maxAttempts int, envelopes bool) *sourceFixture {
	t.Helper()
	f := &sourceFixture{client: tg.Client(t), topic: tg.Topic(t, base)}
	f.copies = brokertest.Collect(t, f.client, f.topic)
	f.dead = brokertest.Collect(t, f.client, f.topic+".dlq")
	var err error
	f.src, err = connector.NewSource(f.client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{
			Topic: f.topic, SubscriptionName: "app", Type: apulsar.Shared,
			SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		},
		MaxAttempts: maxAttempts, RetryStrategy: retry.Republish, Envelopes: envelopes,
	})
	require.NoError(t, err)
	return f
}
