package pulsar_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

func noop(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }

func TestConstructorsRefuseBadOptions(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := bqpulsar.WithTopic("orders")
	sub := bqpulsar.WithSubscription("s", apulsar.Shared)
	h := bqpulsar.Handle(okURN, noop)
	cases := map[string][]bqpulsar.ConsumerOption{
		"no topic":           {sub, h},
		"no subscription":    {topic, h},
		"blank subscription": {topic, bqpulsar.WithSubscription(" ", apulsar.Shared), h},
		"bad type":           {topic, bqpulsar.WithSubscription("s", apulsar.SubscriptionType(42)), h},
		"bad topic":          {bqpulsar.WithTopic("a/b"), sub, h},
		"max attempts 0":     {topic, sub, h, bqpulsar.WithMaxAttempts(0)},
		"negative policy":    {topic, sub, h, bqpulsar.WithRetry(retry.Policy{MaxAttempts: -1})},
		"duplicate handler":  {topic, sub, h, bqpulsar.Handle(okURN, noop)},
		"blank urn":          {topic, sub, bqpulsar.Handle("", noop)},
		"nil handler":        {topic, sub, bqpulsar.Handle(okURN, nil)},
		"concurrency 0":      {topic, sub, h, bqpulsar.WithConcurrency(0)},
		"nil logger":         {topic, sub, h, bqpulsar.WithLogger(nil)},
		"bad dead letter":    {topic, sub, h, bqpulsar.WithDeadLetter(dlq.Config{Topic: "x/y"})},
		"nack on exclusive":  {topic, bqpulsar.WithSubscription("s", apulsar.Exclusive), h, bqpulsar.WithRetry(retry.Policy{Strategy: retry.Nack})},
		"nack on failover":   {topic, bqpulsar.WithSubscription("s", apulsar.Failover), h, bqpulsar.WithRetry(retry.Policy{Strategy: retry.Nack})},
		"zero close timeout": {topic, sub, h, bqpulsar.WithCloseTimeout(0)},
		"zero nack delay":    {topic, sub, h, bqpulsar.WithNackRedeliveryDelay(0)},
		"nil unknown":        {topic, sub, bqpulsar.HandleUnknown(nil)},
		"small max size":     {topic, sub, h, bqpulsar.WithMaxMessageSize(64<<10 - 1)},
		"unknown position":   {topic, sub, h, bqpulsar.WithInitialPosition(apulsar.SubscriptionInitialPosition(7))},
	}
	for name, opts := range cases {
		_, err := bqpulsar.NewConsumer(client, opts...)
		require.ErrorIs(t, err, bqpulsar.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), "pulsar: invalid option", name)
	}
	// A consumer without a handler is for Next; Run refuses it.
	bare, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(uniqueTopic(t, "no-handler")), sub)
	require.NoError(t, err)
	err = bare.Run(t.Context())
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption, "no handler")
	assert.Contains(t, err.Error(), "pulsar: invalid option", "no handler")
	require.NoError(t, bare.Close())
	// Run needs an envelope: a consumer that delivers poison is for Next.
	poisonDelivered, ok := seam.FrontOption(seam.Front{PoisonDelivered: true}).(bqpulsar.ConsumerOption)
	require.True(t, ok)
	raw, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(uniqueTopic(t, "raw-payloads")), sub, h, poisonDelivered)
	require.NoError(t, err)
	require.ErrorIs(t, raw.Run(t.Context()), bqpulsar.ErrInvalidOption, "poison delivered")
	require.NoError(t, raw.Close())

	_, err = bqpulsar.NewConsumer(nil, topic, sub, h)
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
	_, err = bqpulsar.WrapConsumer(client, nil, h)
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
	// Without a client, a wrapped consumer can neither republish nor write dead letters.
	pc, err := client.Subscribe(apulsar.ConsumerOptions{Topic: uniqueTopic(t, "wrapped"), SubscriptionName: "s", Type: apulsar.Shared})
	require.NoError(t, err)
	defer pc.Close()
	nack, off := bqpulsar.WithRetry(retry.Policy{Strategy: retry.Nack}), bqpulsar.WithDeadLetter(dlq.Off())
	for name, opts := range map[string][]bqpulsar.ConsumerOption{
		"republish and dead letters": {sub, h},
		"dead letters":               {sub, h, nack},
		"republish":                  {sub, h, off},
	} {
		_, err = bqpulsar.WrapConsumer(nil, pc, opts...)
		require.ErrorIs(t, err, bqpulsar.ErrInvalidOption, "nil client, %s", name)
	}
	wrapped, err := bqpulsar.WrapConsumer(nil, pc, sub, h, nack, off)
	require.NoError(t, err, "nil client, nothing to write")
	require.NoError(t, wrapped.Close())

	_, err = bqpulsar.NewPublisher(nil, "orders")
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
	_, err = bqpulsar.NewPublisher(client, "a/b")
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
	_, err = bqpulsar.NewPublisher(client, "orders", bqpulsar.WithLogger(nil))
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
	_, err = bqpulsar.NewPublisher(client, "orders", bqpulsar.WithCloseTimeout(-1))
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
	_, err = bqpulsar.WrapProducer(nil)
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
}

func TestNewConsumerDefaultsAndClose(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(uniqueTopic(t, "defaults")),
		bqpulsar.WithSubscription("s", apulsar.Shared), bqpulsar.Handle(okURN, noop))
	require.NoError(t, err)
	assert.Equal(t, retry.DefaultMaxAttempts, c.MaxAttempts())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Run(t.Context()), bqpulsar.ErrClosed)

	c, err = bqpulsar.NewConsumer(client, bqpulsar.WithTopic(uniqueTopic(t, "defaults")),
		bqpulsar.WithSubscription("s", apulsar.Shared), bqpulsar.Handle(okURN, noop),
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: 7}), bqpulsar.WithMaxAttempts(2))
	require.NoError(t, err)
	assert.Equal(t, 2, c.MaxAttempts(), "WithMaxAttempts wins over the policy")
	require.NoError(t, c.Close())

	c, err = bqpulsar.NewConsumer(client, bqpulsar.WithTopic(uniqueTopic(t, "defaults")),
		bqpulsar.WithSubscription("s", apulsar.Shared), bqpulsar.Handle(okURN, noop),
		bqpulsar.WithMaxAttempts(2), bqpulsar.WithRetry(retry.Policy{MaxAttempts: 7}))
	require.NoError(t, err)
	assert.Equal(t, 2, c.MaxAttempts(), "WithMaxAttempts wins over a policy given after it")
	require.NoError(t, c.Close())

	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: uniqueTopic(t, "wrapped")})
	require.NoError(t, err)
	defer p.Close()
	pub, err := bqpulsar.WrapProducer(p)
	require.NoError(t, err)
	_, err = pub.Publish(t.Context(), okURN, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	_, err = p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("{}")})
	require.NoError(t, err, "Close leaves a wrapped producer open")
}

// The escape hatches adjust the client's options but cannot move what the binding owns:
// the topic of NewPublisher's producer, the topics, subscription name and type NewConsumer
// subscribes with, and the topic of a dead-letter write are set again after f runs. Close
// closes the producer and the subscription's consumer that NewPublisher and NewConsumer
// created.
func TestEscapeHatchesKeepTheTopicsAndTheSubscription(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "hatch")
	elsewhere := uniqueTopic(t, "elsewhere")
	dead := collect(t, client, topic+".dlq")

	pub, err := bqpulsar.NewPublisher(client, topic,
		bqpulsar.WithProducerOptions(func(o *apulsar.ProducerOptions) { o.Topic = elsewhere }))
	require.NoError(t, err)
	assert.Equal(t, 1, b.Stats(topic).Producers)
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			return bqpulsar.DeadLetter(errors.New("refused"))
		}),
		bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) {
			o.Topics, o.Topic, o.SubscriptionName, o.Type = []string{elsewhere}, elsewhere, "other", apulsar.Failover
		}),
		bqpulsar.WithSenderOptions(func(o *apulsar.ProducerOptions) { o.Topic = elsewhere }))
	require.NoError(t, err)
	sub := b.Stats(topic).Subscriptions["s"]
	assert.Equal(t, "Shared", sub.Type)
	assert.Equal(t, 1, sub.Consumers)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	_, err = pub.Publish(t.Context(), okURN, nil)
	require.NoError(t, err)
	assert.Len(t, dead.wait(t, 1, waitLong), 1, "the dead letter went to the queue's dead-letter topic")
	assert.Empty(t, b.Subscriptions(elsewhere))
	assert.Zero(t, b.Stats(elsewhere).Entries)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, c.Close())
	require.NoError(t, pub.Close())
	stats := b.Stats(topic)
	assert.Zero(t, stats.Producers, "Close closed the publisher's producer")
	assert.Zero(t, stats.Subscriptions["s"].Consumers, "Close closed the subscription's consumer")
}

// The producers that write retries and dead letters batch with batches of one message, as
// WithSenderOptions says, and f is given that default. Each write is sent on its own and
// synchronously, so even an hour's batching delay, which f may set, holds no dead letter
// back.
func TestSettlementProducersSendBatchesOfOne(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "batch-of-one")
	dead := collect(t, client, topic+".dlq")
	var (
		mu   sync.Mutex
		seen []apulsar.ProducerOptions
	)
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			return bqpulsar.DeadLetter(errors.New("refused"))
		}),
		bqpulsar.WithSenderOptions(func(o *apulsar.ProducerOptions) {
			mu.Lock()
			seen = append(seen, *o)
			mu.Unlock()
			o.BatchingMaxPublishDelay = time.Hour
		}))
	require.NoError(t, err)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	defer func() { require.NoError(t, pub.Close()) }()
	runConsumer(t, c)
	for range 3 {
		_, err = pub.Publish(t.Context(), okURN, nil)
		require.NoError(t, err)
	}
	assert.Len(t, dead.wait(t, 3, waitLong), 3, "each dead letter is written at once, whatever the batching delay")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen, "f adjusted the dead-letter producer")
	for _, o := range seen {
		assert.Equal(t, uint(1), o.BatchingMaxMessages, "batches of one message")
		assert.False(t, o.DisableBatching, "batching is not disabled outright")
	}
}

// The options that only NewConsumer or NewPublisher read, to create what they own, are
// ignored by WrapConsumer and WrapProducer, as their docs say: the escape hatches' f is never
// called, another topic gets no subscription, and a publish makes no initial subscription.
func TestWrapIgnoresTheOptionsOfWhatItDoesNotCreate(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic, elsewhere := uniqueTopic(t, "wrapped"), uniqueTopic(t, "elsewhere")
	var called atomic.Int32
	pp, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	t.Cleanup(pp.Close)
	pub, err := bqpulsar.WrapProducer(pp,
		bqpulsar.WithProducerOptions(func(*apulsar.ProducerOptions) { called.Add(1) }),
		bqpulsar.WithInitialSubscription("initial"))
	require.NoError(t, err)
	defer func() { require.NoError(t, pub.Close()) }()

	pc, err := client.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
	require.NoError(t, err)
	t.Cleanup(pc.Close) // after runConsumer's cleanup, which closes c first
	handled := make(chan struct{}, 1)
	c, err := bqpulsar.WrapConsumer(client, pc, bqpulsar.WithSubscription("s", apulsar.Shared),
		bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			handled <- struct{}{}
			return nil
		}),
		bqpulsar.WithTopic(elsewhere),
		bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionLatest),
		bqpulsar.WithNackRedeliveryDelay(time.Millisecond),
		bqpulsar.WithConsumerOptions(func(*apulsar.ConsumerOptions) { called.Add(1) }))
	require.NoError(t, err)
	runConsumer(t, c)

	_, err = pub.Publish(t.Context(), okURN, nil)
	require.NoError(t, err)
	select {
	case <-handled:
	case <-time.After(waitLong):
		t.Fatal("the wrapped consumer did not handle the message")
	}
	assert.Zero(t, called.Load(), "no escape hatch ran")
	assert.Equal(t, []string{"s"}, b.Subscriptions(topic), "no initial subscription was made")
	assert.Empty(t, b.Subscriptions(elsewhere), "WithTopic subscribed to nothing")
}

func TestClientLoggerAdapter(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	l := bqpulsar.NewClientLogger(zap.New(core))
	l.Debug("hidden")
	l.Info("plain ", 1)
	l.SubLogger(map[string]any{"topic": "t"}).WithField("k", "v").Warnf("formatted %d", 2)
	l.WithError(errors.New("boom")).Error("failed")
	l.WithFields(map[string]any{"a": 1}).Errorf("e %s", "x")
	all := logs.All()
	require.Len(t, all, 4, "debug is off at info level")
	assert.Equal(t, "plain 1", all[0].Message)
	assert.Equal(t, "formatted 2", all[1].Message)
	assert.Equal(t, zapcore.WarnLevel, all[1].Level)
	assert.Equal(t, map[string]any{"topic": "t", "k": "v"}, all[1].ContextMap())
	assert.Equal(t, "boom", all[2].ContextMap()["error"])
	assert.Equal(t, "e x", all[3].Message)
	assert.NotNil(t, bqpulsar.NewClientLogger(nil))
}

func TestEventKindString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "dead_lettered", bqpulsar.EventDeadLettered.String())
	assert.Equal(t, "gate_rejected", bqpulsar.EventGateRejected.String())
	assert.Equal(t, "unknown", bqpulsar.EventKind(99).String())
}
