package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

func orderProvider(t *testing.T) *schema.MapProvider {
	t.Helper()
	p, err := schema.NewMapProvider(map[string][]byte{orderURN: []byte(orderSchema)})
	require.NoError(t, err)
	return p
}

func newClient(t *testing.T) apulsar.Client {
	t.Helper()
	b := pulsartest.NewBroker(t)
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               b.URL(),
		OperationTimeout:  10 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func topicFor(t *testing.T) string {
	t.Helper()
	return "persistent://public/default/schema-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
}

// received reads every message of topic from its start.
func received(t *testing.T, c apulsar.Client, topic string, want int) []*envelope.Envelope {
	t.Helper()
	r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	var out []*envelope.Envelope
	for len(out) < want {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m, err := r.Next(ctx)
		cancel()
		require.NoError(t, err)
		env, err := envelope.Decode(m.Payload())
		require.NoError(t, err)
		out = append(out, env)
	}
	return out
}

func TestPublisherRefusesInvalidData(t *testing.T) {
	c := newClient(t)
	topic := topicFor(t)
	inner, err := bqpulsar.NewPublisher(c, topic)
	require.NoError(t, err)
	pub, err := schema.NewPublisher(inner, orderProvider(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	assert.Same(t, inner, pub.Unwrap())
	assert.Equal(t, topic, pub.Topic())
	ctx := context.Background()

	type order struct {
		ID       int    `json:"order_id"`
		Currency string `json:"currency,omitempty"`
	}
	_, err = pub.Publish(ctx, orderURN, order{ID: 0, Currency: "GBP"})
	var ve *schema.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Violations, 2)
	assert.Equal(t, "/currency", ve.Violations[0].Pointer)
	assert.Equal(t, "/order_id", ve.Violations[1].Pointer)

	_, err = pub.Publish(ctx, orderURN, json.RawMessage(`{"amount":1}`))
	require.ErrorIs(t, err, schema.ErrInvalid)
	_, err = pub.Publish(ctx, orderURN, nil)
	require.ErrorIs(t, err, schema.ErrInvalid, "nil data is {} and misses order_id")
	bad, err := envelope.Make(orderURN, map[string]any{"order_id": "x"})
	require.NoError(t, err)
	_, err = pub.PublishEnvelope(ctx, bad)
	require.ErrorIs(t, err, schema.ErrInvalid)
	err = pub.PublishAsync(ctx, orderURN, map[string]int{"order_id": -1}, func(string, error) { t.Error("done called for refused data") })
	require.ErrorIs(t, err, schema.ErrInvalid)
	err = pub.TryPublishAsync(ctx, orderURN, []byte(`{"order_id":1,"x":1}`), func(string, error) { t.Error("done called for refused data") })
	require.ErrorIs(t, err, schema.ErrInvalid)

	// Valid data and URNs without a schema are sent.
	id1, err := pub.Publish(ctx, orderURN, order{ID: 1, Currency: "EUR"})
	require.NoError(t, err)
	good, err := envelope.Make(orderURN, map[string]any{"order_id": 2})
	require.NoError(t, err)
	_, err = pub.PublishEnvelope(ctx, good)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	require.NoError(t, pub.PublishAsync(ctx, orderURN, map[string]int{"order_id": 3}, func(_ string, err error) { assert.NoError(t, err); wg.Done() }))
	require.NoError(t, pub.TryPublishAsync(ctx, "urn:babel:users:registered", map[string]any{"anything": true}, func(_ string, err error) { assert.NoError(t, err); wg.Done() }))
	wg.Wait()

	got := received(t, c, topic, 4)
	assert.Equal(t, id1, got[0].Meta.ID)
	assert.JSONEq(t, `{"order_id":1,"currency":"EUR"}`, string(got[0].Data))
	assert.JSONEq(t, `{"order_id":2}`, string(got[1].Data))
	assert.JSONEq(t, `{"order_id":3}`, string(got[2].Data))
	assert.Equal(t, "urn:babel:users:registered", got[3].URN())

	_, err = schema.NewPublisher(nil, orderProvider(t))
	require.ErrorIs(t, err, schema.ErrInvalidOption)
	_, err = schema.NewPublisher(inner, nil)
	require.ErrorIs(t, err, schema.ErrInvalidOption)
}

// The wrapper checks the data the wrapped publisher sends: what pulsar.Publisher.Publish
// sends as {} (a nil map or pointer, an empty json.RawMessage or []byte) and an envelope
// without data, which PublishEnvelope sends with {}, are checked as {}, and sent.
func TestPublisherChecksTheDataItSends(t *testing.T) {
	c := newClient(t)
	topic := topicFor(t)
	const anyObject = "urn:babel:test:any-object"
	provider, err := schema.NewMapProvider(map[string][]byte{
		anyObject: []byte(`{"type":"object"}`),
		orderURN:  []byte(orderSchema),
	})
	require.NoError(t, err)
	inner, err := bqpulsar.NewPublisher(c, topic)
	require.NoError(t, err)
	pub, err := schema.NewPublisher(inner, provider)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	ctx := context.Background()

	type order struct {
		ID int `json:"order_id"`
	}
	empties := map[string]any{
		"nil map":               map[string]any(nil),
		"nil pointer":           (*order)(nil),
		"empty json.RawMessage": json.RawMessage(nil),
		"empty []byte":          []byte{},
	}
	for name, data := range empties {
		_, err := pub.Publish(ctx, anyObject, data)
		require.NoError(t, err, "%s: sent as {}, refused", name)
		_, err = pub.Publish(ctx, orderURN, data)
		var ve *schema.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.Len(t, ve.Violations, 1, name)
		assert.Contains(t, ve.Violations[0].Message, "order_id", "%s is checked as {}", name)
	}
	// An envelope without data is encoded with {}.
	for _, urn := range []string{anyObject, orderURN} {
		env, err := envelope.Make(urn, nil)
		require.NoError(t, err)
		env.Data = nil
		_, err = pub.PublishEnvelope(ctx, env)
		if urn == anyObject {
			require.NoError(t, err, "an envelope without data, sent as {}, refused")
			continue
		}
		var ve *schema.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Len(t, ve.Violations, 1)
		assert.Contains(t, ve.Violations[0].Message, "order_id", "an envelope without data is checked as {}")
	}
	// Data that is not an object is refused as the wrapped publisher refuses it, and the text
	// sent is the one envelope.Make writes (no HTML escaping).
	_, err = pub.Publish(ctx, anyObject, []int{1})
	require.ErrorIs(t, err, envelope.ErrInvalidData)
	_, err = pub.Publish(ctx, anyObject, map[string]any{"note": "<b>&"})
	require.NoError(t, err)
	got := received(t, c, topic, len(empties)+2)
	for _, m := range got[:len(got)-1] {
		assert.JSONEq(t, `{}`, string(m.Data))
	}
	assert.Contains(t, string(got[len(got)-1].Data), `"<b>&"`, "sent as Make writes it, without HTML escapes")
}

// Closing the wrapper closes the publisher it wraps.
func TestPublisherCloseClosesTheWrappedPublisher(t *testing.T) {
	c := newClient(t)
	inner, err := bqpulsar.NewPublisher(c, topicFor(t))
	require.NoError(t, err)
	pub, err := schema.NewPublisher(inner, orderProvider(t))
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	_, err = inner.Publish(context.Background(), "urn:babel:users:registered", nil)
	require.ErrorIs(t, err, bqpulsar.ErrClosed)
}

// TestMiddlewareDeadLettersInvalidData: an invalid payload is dead-lettered on its first
// delivery (reason failed, attempts 1, the violations in the error), the handler never sees
// it; valid data and URNs without a schema reach the handler.
func TestMiddlewareDeadLettersInvalidData(t *testing.T) {
	c := newClient(t)
	topic := topicFor(t)
	pub, err := bqpulsar.NewPublisher(c, topic)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })

	var mu sync.Mutex
	var handled []string
	h := func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		mu.Lock()
		handled = append(handled, string(env.Data))
		mu.Unlock()
		return nil
	}
	consumer, err := bqpulsar.NewConsumer(c,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("orders", apulsar.Shared),
		bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) {
			o.SubscriptionInitialPosition = apulsar.SubscriptionPositionEarliest
		}),
		bqpulsar.WithMaxAttempts(5),
		bqpulsar.WithHooks(bqpulsar.Hooks{Handler: schema.Middleware(orderProvider(t))}),
		bqpulsar.Handle(orderURN, h),
		bqpulsar.Handle("urn:babel:users:registered", h),
	)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("consumer: %v", err)
		}
		_ = consumer.Close()
	})

	bctx := context.Background()
	_, err = pub.Publish(bctx, orderURN, map[string]any{"order_id": 0, "extra": 1})
	require.NoError(t, err)
	_, err = pub.Publish(bctx, orderURN, map[string]any{"order_id": 9})
	require.NoError(t, err)
	_, err = pub.Publish(bctx, "urn:babel:users:registered", map[string]any{"free": "form"})
	require.NoError(t, err)

	dead := received(t, c, topic+".dlq", 1)[0]
	require.NotNil(t, dead.DeadLetter)
	assert.Equal(t, envelope.ReasonFailed, dead.DeadLetter.Reason)
	assert.Equal(t, 1, dead.DeadLetter.Attempts, "dead-lettered on the first delivery, no retries")
	require.NotNil(t, dead.DeadLetter.Error)
	assert.Contains(t, *dead.DeadLetter.Error, "/order_id: ")
	assert.Contains(t, *dead.DeadLetter.Error, "2 violations")
	assert.JSONEq(t, `{"order_id":0,"extra":1}`, string(dead.Data))

	testwait.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 2
	}, "the two valid orders handled")
	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []string{`{"order_id":9}`, `{"free":"form"}`}, handled)
}

func TestCheck(t *testing.T) {
	p := orderProvider(t)
	require.NoError(t, schema.Check(p, orderURN, []byte(`{"order_id":1}`)))
	require.ErrorIs(t, schema.Check(p, orderURN, []byte(`{}`)), schema.ErrInvalid)
	require.NoError(t, schema.Check(p, "urn:babel:other:thing", []byte(`{}`)), "no schema, no check")
	require.Error(t, schema.Check(failingProvider{}, orderURN, []byte(`{}`)))
}

// A provider that cannot answer fails the delivery as an ordinary failure (retried by the
// consumer's policy), not as a dead letter, and the handler is not run.
func TestMiddlewareProviderFailureIsAnOrdinaryFailure(t *testing.T) {
	env, err := envelope.Make(orderURN, map[string]int{"order_id": 1})
	require.NoError(t, err)
	err = schema.Middleware(failingProvider{})(func(context.Context, *envelope.Envelope, apulsar.Message) error {
		t.Error("the handler ran without a schema check")
		return nil
	})(context.Background(), env, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "provider down")
	var dl *bqpulsar.DeadLetterError
	assert.NotErrorAs(t, err, &dl, "a provider failure is no reason to dead-letter")
	assert.NotErrorIs(t, err, schema.ErrInvalid)
}

type failingProvider struct{}

func (failingProvider) Schema(string) (*schema.Schema, bool, error) {
	return nil, false, errors.New("provider down")
}
