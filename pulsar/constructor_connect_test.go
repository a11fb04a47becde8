package pulsar_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// TestConstructorsSayWhyTheBrokerCannotBeReached: against a closed port, NewPublisher and
// NewConsumer fail within the client's timeouts with a *ConnectError that names the cause
// on one line and still reaches the client's error.
func TestConstructorsSayWhyTheBrokerCannotBeReached(t *testing.T) {
	t.Parallel()
	client := brokertest.RefusedClient(t)

	_, perr := bqpulsar.NewPublisher(client, "persistent://public/default/orders")
	_, cerr := bqpulsar.NewConsumer(client, bqpulsar.WithTopic("persistent://public/default/orders"),
		bqpulsar.WithSubscription("s", apulsar.Shared), bqpulsar.HandleUnknown(func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }))
	for _, err := range []error{perr, cerr} {
		require.Error(t, err)
		var ce *bqpulsar.ConnectError
		require.ErrorAs(t, err, &ce, "%v", err)
		require.ErrorIs(t, err, bqpulsar.ErrConnect)
		assert.NotContains(t, err.Error(), "\n")
		if errors.Is(err, syscall.ECONNREFUSED) {
			assert.Contains(t, err.Error(), "connection refused")
		} else {
			// pulsar-client-go v0.21.0 (as v0.19.0) often returns a bare "connection error"
			// without the cause: the message still says it is a connection failure.
			assert.Contains(t, err.Error(), "connect to the service")
		}
	}
}
