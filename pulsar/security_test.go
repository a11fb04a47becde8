package pulsar_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// TestPublishAndConsumeOverTLSWithAToken drives the SDK through a client with TLS and token
// authentication against an embedded broker that requires both, end to end: a retry and a
// dead letter are written over the same authenticated connection. Connect refuses a wrong
// token with a ConnectError of kind authentication.
func TestPublishAndConsumeOverTLSWithAToken(t *testing.T) {
	t.Parallel()
	pki, err := pulsartest.NewTestPKI(t.TempDir(), "app")
	require.NoError(t, err)
	secret := []byte("0123456789abcdef0123456789abcdef")
	b, err := pulsartest.Start(t.Context(),
		pulsartest.WithTLS("localhost:0", pki.ServerConfig()),
		pulsartest.WithAuth(pulsartest.Auth{TokenSecret: secret}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	require.NotEmpty(t, b.TLSURL())

	opts := func(token string) apulsar.ClientOptions {
		return apulsar.ClientOptions{
			URL: b.TLSURL(), TLSTrustCertsFilePath: pki.CAFile,
			Authentication:    apulsar.NewAuthenticationToken(token),
			ConnectionTimeout: 5 * time.Second, OperationTimeout: 5 * time.Second,
			Logger: bqpulsar.NewClientLogger(zap.NewNop()),
		}
	}
	wrong := opts(pulsartest.SignToken([]byte("wrong secret, wrong secret, wrong"), `{"sub":"app"}`))
	wrong.OperationTimeout = 300 * time.Millisecond
	_, err = bqpulsar.Connect(t.Context(), wrong)
	var ce *bqpulsar.ConnectError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, bqpulsar.ConnectAuthentication, ce.Kind, "%v", err)
	// The refused client's own retry of the probe ends within its operation timeout
	// (documented by Connect); wait for it so that the leak check stays meaningful.
	t.Cleanup(func() { waitGoroutineGone(t, "probeBroker") })

	client, err := bqpulsar.Connect(t.Context(), opts(pulsartest.SignToken(secret, `{"sub":"app"}`)))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	topic := uniqueTopic(t, "secure")
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	_, err = pub.Publish(t.Context(), "urn:babel:x", map[string]any{"n": 1})
	require.NoError(t, err)
	require.NoError(t, pub.Close())

	var calls atomic.Int32
	dead := make(chan struct{}, 1)
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.WithMaxAttempts(2),
		bqpulsar.Handle("urn:babel:x", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			calls.Add(1)
			return assert.AnError
		}),
		onDeadLettered(func() { dead <- struct{}{} }))
	require.NoError(t, err)
	runConsumer(t, c)
	select {
	case <-dead:
	case <-time.After(waitLong):
		t.Fatal("not dead-lettered over TLS")
	}
	assert.Equal(t, int32(2), calls.Load(), "delivered, retried by republish, then dead-lettered")
}

// waitGoroutineGone waits until no goroutine's stack mentions fn.
func waitGoroutineGone(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(waitLong)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine in %s is still running", fn)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
