package connector_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The same input through the two fronts of the engine, the Consumer and the Source (under
// failure-strategy=babelqueue with envelope payloads), must be settled the same way: each
// scenario runs on its own broker per front, with the same topic, and the dead-letter copies
// must be equal but for the failure time.
func TestBothFrontsSettleTheSameInputTheSameWay(t *testing.T) {
	t.Parallel()
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"id": 1}, envelope.WithQueue("orders"))
	require.NoError(t, err)
	good, err := env.Encode()
	require.NoError(t, err)
	props := bqpulsar.ProjectProperties(env)
	gate := bqpulsar.ProjectProperties(env)
	gate[bqpulsar.PropSchemaVersion] = "2"
	scenarios := []struct {
		name    string
		payload []byte
		props   map[string]string
	}{
		{"exhausted failure", good, props},
		{"poison", []byte("{\"job\":\"urn:x\",\xff}"), map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{"gate rejection", good, gate},
		{"routed by bq-job", good, map[string]string{bqpulsar.PropJob: "urn:babel:orders:routed", bqpulsar.PropAttempts: "0"}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			viaConsumer := throughConsumer(t, sc.payload, sc.props)
			viaSource := throughSource(t, sc.payload, sc.props)
			assert.Equal(t, viaConsumer.Properties(), viaSource.Properties())
			assert.Equal(t, maskTime(viaConsumer.Payload()), maskTime(viaSource.Payload()))
			assert.Equal(t, viaConsumer.Key(), viaSource.Key())
		})
	}
}

var failedAt = regexp.MustCompile(`"failed_at":[0-9]+`)

func maskTime(b []byte) string { return failedAt.ReplaceAllString(string(b), `"failed_at":0`) }

const frontsTopic = "persistent://public/default/orders"

var errBoom = errors.New("boom")

func startAndPublish(t *testing.T, payload []byte, props map[string]string) apulsar.Client {
	t.Helper()
	b, err := pulsartest.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	client := newClient(t, b)
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: frontsTopic})
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: payload, Properties: props, Key: "k"})
	require.NoError(t, err)
	p.Close()
	return client
}

func throughConsumer(t *testing.T, payload []byte, props map[string]string) apulsar.Message {
	t.Helper()
	client := startAndPublish(t, payload, props)
	dead := collect(t, client, frontsTopic+".dlq")
	fail := func(context.Context, *envelope.Envelope, apulsar.Message) error { return errBoom }
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(frontsTopic), bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.WithMaxAttempts(1),
		bqpulsar.Handle("urn:babel:orders:created", fail), bqpulsar.Handle("urn:babel:orders:routed", fail))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	got := dead.wait(t, 1)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, c.Close())
	return got[0]
}

func throughSource(t *testing.T, payload []byte, props map[string]string) apulsar.Message {
	t.Helper()
	client := startAndPublish(t, payload, props)
	dead := collect(t, client, frontsTopic+".dlq")
	src, err := connector.NewSource(client, connector.SourceOptions{
		Consumer:    apulsar.ConsumerOptions{Topic: frontsTopic, SubscriptionName: "s", Type: apulsar.Shared},
		MaxAttempts: 1, Envelopes: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = src.Close(ctx)
	})
	ms := &manualSubscriber{}
	src.Subscribe(ms)
	ms.request(10)
	go func() {
		// The stage fails whatever it is given, as the Consumer's handler does.
		for {
			select {
			case <-t.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, m := range ms.received() {
				_ = m.Nack(context.Background(), errBoom)
			}
		}
	}()
	return dead.wait(t, 1)[0]
}
