package pulsar_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// TestConstructorsSayWhyTheBrokerCannotBeReached: against a closed port, NewPublisher and
// NewConsumer fail within the client's timeouts with a *ConnectError that names the cause
// on one line and still reaches the client's error.
func TestConstructorsSayWhyTheBrokerCannotBeReached(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // a port nobody listens on: connection refused
	client, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: "pulsar://" + addr, ConnectionTimeout: time.Second, OperationTimeout: 2 * time.Second,
		Logger: bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(t, err)
	defer client.Close()

	_, perr := bqpulsar.NewPublisher(client, "persistent://public/default/orders")
	_, cerr := bqpulsar.NewConsumer(client, bqpulsar.WithTopic("persistent://public/default/orders"),
		bqpulsar.WithSubscription("s", apulsar.Shared), bqpulsar.OnUnknownURN(func(*envelope.Envelope, apulsar.Message) {}))
	for _, err := range []error{perr, cerr} {
		require.Error(t, err)
		var ce *bqpulsar.ConnectError
		require.ErrorAs(t, err, &ce, "%v", err)
		require.ErrorIs(t, err, bqpulsar.ErrConnect)
		assert.NotContains(t, err.Error(), "\n")
		if errors.Is(err, syscall.ECONNREFUSED) {
			assert.Contains(t, err.Error(), "connection refused")
		} else {
			// pulsar-client-go v0.19.0 often returns a bare "connection error" without the
			// cause: the message still says it is a connection failure.
			assert.Contains(t, err.Error(), "connect to the service")
		}
	}
}
