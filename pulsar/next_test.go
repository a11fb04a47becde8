package pulsar_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// pullConsumer returns a consumer without handlers (the pull style) on a fresh topic.
func pullConsumer(t *testing.T, client apulsar.Client, topic string, opts ...bqpulsar.ConsumerOption) *bqpulsar.Consumer {
	t.Helper()
	c, err := bqpulsar.NewConsumer(client, append([]bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("app", apulsar.Shared),
	}, opts...)...)
	require.NoError(t, err)
	return c
}

// pullConsumerUntilEnd is pullConsumer, closed when the test ends, whose Close must succeed.
func pullConsumerUntilEnd(t *testing.T, client apulsar.Client, topic string, opts ...bqpulsar.ConsumerOption) *bqpulsar.Consumer {
	t.Helper()
	c := pullConsumer(t, client, topic, opts...)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// A rejected bq-schema-version and a poison body are settled by the engine (dead-lettered,
// and reported) and never returned by Next, as under Run; the envelope comes with its
// attempts and routing URN, and needs no handler.
func TestNextNeverReturnsGateRejectionsOrPoison(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-admission")
	dead := collect(t, client, topic+".dlq")
	var mu sync.Mutex
	var reported []error
	c := pullConsumer(t, client, topic, onFailure(func(err error, _ *envelope.Envelope, _ apulsar.Message) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}))

	raw, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	_, err = raw.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte(`{"job":"urn:x","data":[]}`)})
	require.NoError(t, err)
	env, err := envelope.Make(okURN, nil)
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	gate := bqpulsar.ProjectProperties(env)
	gate[bqpulsar.PropSchemaVersion] = "2"
	_, err = raw.Send(t.Context(), &apulsar.ProducerMessage{Payload: payload, Properties: gate})
	require.NoError(t, err)
	props := bqpulsar.ProjectProperties(env)
	props[bqpulsar.PropJob] = "urn:babel:it:routed"
	props[bqpulsar.PropAttempts] = "1"
	_, err = raw.Send(t.Context(), &apulsar.ProducerMessage{Payload: payload, Properties: props})
	require.NoError(t, err)

	d, err := c.Next(t.Context())
	require.NoError(t, err)
	assert.Equal(t, env.Meta.ID, d.Envelope().Meta.ID, "the first two were settled at admission")
	assert.Equal(t, 2, d.Attempt(), "bq-attempts 1: the second delivery")
	assert.Equal(t, 1, d.Envelope().Attempts)
	assert.Equal(t, "urn:babel:it:routed", d.URN(), "a usable bq-job wins")
	assert.Equal(t, payload, d.Message().Payload())
	assert.NotNil(t, d.Context())
	require.NoError(t, d.Ack())
	assert.Len(t, dead.wait(t, 2, waitLong), 2, "the poison copy and the gate rejection")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "backlog of %s not drained", topic)
	require.NoError(t, c.Close())

	mu.Lock()
	defer mu.Unlock()
	var sawGate, sawPoison bool
	for _, e := range reported {
		sawGate = sawGate || errors.Is(e, bqpulsar.ErrSchemaVersion)
		sawPoison = sawPoison || errors.Is(e, envelope.ErrPoison)
	}
	assert.True(t, sawGate, "the gate rejection is reported")
	assert.True(t, sawPoison, "the poison is reported")
}

// A delivery is settled once: every later settlement returns ErrSettled and changes nothing.
func TestNextDeliverySettlesOnce(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-once")
	c := pullConsumerUntilEnd(t, client, topic)
	publishJobs(t, client, topic, 1)

	d, err := c.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, d.Ack())
	require.ErrorIs(t, d.Ack(), bqpulsar.ErrSettled)
	require.ErrorIs(t, d.Fail(errors.New("late")), bqpulsar.ErrSettled)
	require.ErrorIs(t, d.RetryAfter(time.Second, nil), bqpulsar.ErrSettled)
	require.ErrorIs(t, d.DeadLetter(nil), bqpulsar.ErrSettled)
	require.ErrorIs(t, d.Nack(nil), bqpulsar.ErrSettled)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "the ack counted once")
}

// Fail(nil) counts as a failure too: with no delivery left, the delivery is dead-lettered
// with reason failed, not acknowledged.
func TestNextFailWithoutAnErrorIsAFailure(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-fail-nil")
	dead := collect(t, client, topic+".dlq")
	c := pullConsumerUntilEnd(t, client, topic, bqpulsar.WithMaxAttempts(1))
	ids := publishJobs(t, client, topic, 1)

	d, err := c.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, d.Fail(nil))
	msgs := dead.wait(t, 1, waitLong)
	env, err := envelope.Decode(msgs[0].Payload())
	require.NoError(t, err)
	assert.Equal(t, ids[0], env.Meta.ID)
	require.NotNil(t, env.DeadLetter, "dead-lettered, not acknowledged")
	assert.Equal(t, envelope.ReasonFailed, env.DeadLetter.Reason)
}

// Fail returns the settlement's failure: a dead-letter write that failed, after which the
// message was negatively acknowledged, not acknowledged.
func TestNextFailReturnsAFailedDeadLetterWrite(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-fail-write")
	require.NoError(t, b.CreateTopic(topic+".dlq"))
	// NotAllowedError: the client gives the producer up and the send times out.
	b.FailNextSends(topic+".dlq", 1, pulsartest.NotAllowedError)
	c := pullConsumerUntilEnd(t, client, topic, bqpulsar.WithMaxAttempts(1),
		bqpulsar.WithSenderOptions(func(o *apulsar.ProducerOptions) { o.SendTimeout = 300 * time.Millisecond }))
	publishJobs(t, client, topic, 1)

	d, err := c.Next(t.Context())
	require.NoError(t, err)
	cause := errors.New("refused")
	err = d.Fail(cause)
	require.ErrorIs(t, err, bqpulsar.ErrDeadLetterWrite)
	require.ErrorIs(t, err, cause)
	assert.Equal(t, 1, b.Backlog(topic, "app"), "not acknowledged")
}

// Run and Next are two styles of one consumer, never mixed.
func TestRunAndNextAreNotMixed(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)

	pulled := pullConsumer(t, client, uniqueTopic(t, "next-style"), bqpulsar.Handle(okURN, noop))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := pulled.Next(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, pulled.Run(t.Context()), bqpulsar.ErrStyle, "Next was called: Run is refused")
	require.NoError(t, pulled.Close())
	_, err = pulled.Next(t.Context())
	require.ErrorIs(t, err, bqpulsar.ErrClosed)

	topic := uniqueTopic(t, "run-style")
	running := make(chan struct{}, 1)
	routed := pullConsumer(t, client, topic, bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		running <- struct{}{}
		return nil
	}))
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- routed.Run(runCtx) }()
	publishJobs(t, client, topic, 1)
	<-running // Run handles a message: it runs
	_, err = routed.Next(t.Context())
	require.ErrorIs(t, err, bqpulsar.ErrStyle, "Next while Run runs")
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	_, err = routed.Next(t.Context())
	require.ErrorIs(t, err, bqpulsar.ErrStyle, "after Run, still the router's")
	require.NoError(t, routed.Close())
}

// At most WithMaxInflight deliveries are unsettled: Next waits for a settlement, or ctx.
func TestNextWaitsAtTheInflightBound(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-bound")
	c := pullConsumerUntilEnd(t, client, topic, bqpulsar.WithMaxInflight(2))
	publishJobs(t, client, topic, 3)

	first, err := c.Next(t.Context())
	require.NoError(t, err)
	second, err := c.Next(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, c.InFlight())
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "two unsettled: the third waits")

	require.NoError(t, first.Ack())
	third, err := c.Next(t.Context())
	require.NoError(t, err, "a settlement frees a slot")
	require.NoError(t, second.Ack())
	require.NoError(t, third.Ack())
	assert.Zero(t, c.InFlight())
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "backlog of %s not drained", topic)
}

// Without WithMaxInflight the bound is 4 × the concurrency: with WithConcurrency(2), eight
// deliveries are unsettled at most and the ninth waits.
func TestNextDefaultInflightBoundIsFourPerWorker(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-default-bound")
	c := pullConsumerUntilEnd(t, client, topic, bqpulsar.WithConcurrency(2))
	publishJobs(t, client, topic, 9)

	held := make([]*bqpulsar.Delivery, 0, 9)
	bounded, stop := context.WithTimeout(t.Context(), waitLong) // a smaller bound fails, not hangs
	defer stop()
	for range 8 {
		d, err := c.Next(bounded)
		require.NoError(t, err)
		held = append(held, d)
	}
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "eight unsettled: the ninth waits")

	require.NoError(t, held[0].Ack())
	d, err := c.Next(bounded)
	require.NoError(t, err, "a settlement frees a slot")
	for _, d := range append(held[1:], d) {
		require.NoError(t, d.Ack())
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "backlog of %s not drained", topic)
}

// Close negatively acknowledges the deliveries nobody settled, says so in its error and to
// the error hook, and the broker delivers them again.
func TestCloseNacksWhatNextLeftUnsettled(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "next-close")
	var hooked []error
	var mu sync.Mutex
	c := pullConsumer(t, client, topic, onFailure(func(err error, _ *envelope.Envelope, _ apulsar.Message) {
		mu.Lock()
		hooked = append(hooked, err)
		mu.Unlock()
	}))
	ids := publishJobs(t, client, topic, 1)

	d, err := c.Next(t.Context())
	require.NoError(t, err)
	err = c.Close()
	require.ErrorIs(t, err, bqpulsar.ErrUnsettled)
	assert.Contains(t, err.Error(), "1 negatively acknowledged")
	require.ErrorIs(t, d.Ack(), bqpulsar.ErrSettled, "Close settled it")
	mu.Lock()
	require.Len(t, hooked, 1)
	require.ErrorIs(t, hooked[0], bqpulsar.ErrUnsettled)
	mu.Unlock()

	again := pullConsumerUntilEnd(t, client, topic, bqpulsar.WithNackRedeliveryDelay(50*time.Millisecond))
	d, err = again.Next(t.Context())
	require.NoError(t, err)
	assert.Equal(t, ids[0], d.Envelope().Meta.ID, "redelivered, nothing lost")
	require.NoError(t, d.Ack())
}

// publishJobs publishes n jobs of okURN to topic and returns their ids.
func publishJobs(t *testing.T, client apulsar.Client, topic string, n int) []string {
	t.Helper()
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	defer func() { require.NoError(t, pub.Close()) }()
	ids := make([]string, n)
	for i := range n {
		ids[i], err = pub.Publish(t.Context(), okURN, map[string]any{"i": i})
		require.NoError(t, err)
	}
	return ids
}
