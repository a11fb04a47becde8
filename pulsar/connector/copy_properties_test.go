package connector_test

import (
	"context"
	"errors"
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
		client := tg.Client(t)
		topic := tg.Topic(t, "copyprops")
		copies := brokertest.Collect(t, client, topic)
		dead := brokertest.Collect(t, client, topic+".dlq")

		src, err := connector.NewSource(client, connector.SourceOptions{
			Consumer: apulsar.ConsumerOptions{
				Topic: topic, SubscriptionName: "app", Type: apulsar.Shared,
				SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
			},
			MaxAttempts: 2, RetryStrategy: retry.Republish, Envelopes: true,
		})
		require.NoError(t, err)
		runStage(t, src, func(m bytesMsg) {
			assert.NoError(t, m.Nack(context.Background(), errors.New("boom"),
				messaging.WithNackProperties(map[string]string{"why": "boom", bqpulsar.PropAttempts: "99"})))
		})

		pub, err := bqpulsar.NewPublisher(client, topic)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, pub.Close()) })
		_, err = pub.Publish(t.Context(), "urn:babel:orders:created", map[string]any{"id": 1})
		require.NoError(t, err)

		got := copies.Wait(t, 2, waitLong)
		assert.NotContains(t, got[0].Properties(), "why", "the original")
		assert.Equal(t, "boom", got[1].Properties()["why"], "the republished retry")
		assert.Equal(t, "1", got[1].Properties()[bqpulsar.PropAttempts], "the contract's count, not the stage's")
		dl := dead.Wait(t, 1, waitLong)[0]
		assert.Equal(t, "boom", dl.Properties()["why"], "the dead-letter copy")
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
