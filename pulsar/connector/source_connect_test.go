package connector_test

import (
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Against a closed port, NewSource fails as NewConsumer does: with a *ConnectError that says
// why on one line (the Source subscribes through the Consumer, which wraps the error).
func TestNewSourceSaysWhyTheBrokerCannotBeReached(t *testing.T) {
	t.Parallel()
	client := brokertest.RefusedClient(t)

	_, err := connector.NewSource(client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{Topic: "persistent://public/default/orders", SubscriptionName: "s", Type: apulsar.Shared},
	})
	require.Error(t, err)
	var ce *bqpulsar.ConnectError
	require.ErrorAs(t, err, &ce, "%v", err)
	require.ErrorIs(t, err, bqpulsar.ErrConnect)
	assert.NotContains(t, err.Error(), "\n")
}

// The nack backoff of negativeAck.redeliveryBackoff and of a Consumer's retry.Nack policy is
// one adapter: the n-th redelivery (0-based count) waits the backoff's delay of retry n+1.
func TestNackBackoffFollowsTheRetryBackoff(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	p := seam.NackBackoff(b)
	for count := range uint32(6) {
		assert.Equal(t, b.Delay(int(count)+1), p.Next(count), "redelivery %d", count)
	}
	assert.Equal(t, b.Delay(1<<20+1), p.Next(1<<31), "a huge count is clamped, not overflowed")
}
