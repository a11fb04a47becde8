package pulsar_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The trim tests below are dual-target (brokertest.Each): the same body runs against the
// embedded broker and, with PULSAR_URL and PULSAR_ADMIN_URL, against a real Apache Pulsar,
// and both are trimmed the same way, through the admin API (brokertest.ForceTrim).

// exhaustThenTrim publishes one job, lets a failing consumer dead-letter it (maxAttempts 1),
// trims the dead-letter topic as Pulsar does with no retention policy, and redrives it to a
// consumer that succeeds. It returns how many times the job was handled after the trim and
// the redrive report.
func exhaustThenTrim(t *testing.T, tg *brokertest.Target, retention bool) (int32, dlq.RedriveReport) {
	t.Helper()
	ctx := t.Context()
	admin := tg.Admin(t)
	client := tg.Client(t)
	topic := tg.Topic(t, "jobs")
	dlt := topic + ".dlq"

	failed := make(chan struct{}, 1)
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.WithMaxAttempts(1),
		bqpulsar.WithRetentionSubscription(retention),
		bqpulsar.Handle("urn:babel:jobs:run", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			return errors.New("downstream is down")
		}),
		onDeadLettered(func() { failed <- struct{}{} }),
	)
	require.NoError(t, err)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	_, err = pub.Publish(ctx, "urn:babel:jobs:run", map[string]any{"n": 1})
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	runUntil(t, c, func() {
		select {
		case <-failed:
		case <-time.After(waitLong):
			t.Fatal("the job was not dead-lettered")
		}
	})

	// What the broker's trimming does to storage nobody needs. Only the dead-letter topic: on
	// Pulsar an unload of the job topic right after the failing consumer closed can lose that
	// consumer's last acknowledgement while the broker is still persisting it (seen on 4.0.7:
	// "Failed to update cursor metadata"), and the job would come back as a second delivery.
	brokertest.ForceTrim(t, admin, dlt)

	var handled atomic.Int32
	ok, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.Handle("urn:babel:jobs:run", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			handled.Add(1)
			return nil
		}),
	)
	require.NoError(t, err)
	runConsumer(t, ok)
	rep, err := dlq.Redrive(ctx, client, dlq.RedriveOptions{Topic: dlt, IdleTimeout: brokertest.IdleTimeout})
	if !retention {
		return handled.Load(), rep // the subscription may not exist at all: err is what Redrive says
	}
	require.NoError(t, err)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return handled.Load() >= 1 }, "the redriven job was not handled")
	return handled.Load(), rep
}

func TestDeadLetterSurvivesATrimThroughItsRetentionSubscription(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		handled, rep := exhaustThenTrim(t, tg, true)
		assert.Equal(t, int32(1), handled)
		assert.Len(t, rep.Moved, 1)
	})
}

// TestWithoutTheRetentionSubscriptionATrimLosesTheDeadLetter shows what the retention
// subscription prevents, and that the test above can fail: on Pulsar with no retention
// policy, a dead letter on a topic nobody subscribes to is deleted by the next trim.
func TestWithoutTheRetentionSubscriptionATrimLosesTheDeadLetter(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		handled, rep := exhaustThenTrim(t, tg, false)
		assert.Zero(t, handled, "nothing left to redrive")
		assert.Empty(t, rep.Moved)
	})
}

// refusingClient is a client whose broker refuses to create subscriptions on dead-letter
// topics, as one with allowAutoSubscriptionCreation=false would.
type refusingClient struct{ apulsar.Client }

func (c refusingClient) Subscribe(o apulsar.ConsumerOptions) (apulsar.Consumer, error) {
	if strings.HasSuffix(o.Topic, ".dlq") {
		return nil, errors.New("SubscriptionNotFound: subscription does not exist")
	}
	return c.Client.Subscribe(o)
}

func TestRetentionSubscriptionThatCannotBeMadeNacksAndLosesNothing(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, retentionSubscriptionThatCannotBeMade)
}

func retentionSubscriptionThatCannotBeMade(t *testing.T, tg *brokertest.Target) {
	ctx := t.Context()
	admin := tg.Admin(t)
	client := tg.Client(t)
	topic := tg.Topic(t, "jobs")
	var reported atomic.Value
	var attempts atomic.Int32
	c, err := bqpulsar.NewConsumer(refusingClient{client},
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.WithMaxAttempts(1),
		bqpulsar.WithNackRedeliveryDelay(50*time.Millisecond),
		bqpulsar.Handle("urn:babel:jobs:run", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			attempts.Add(1)
			return errors.New("no")
		}),
		onFailure(func(err error, _ *envelope.Envelope, _ apulsar.Message) {
			if errors.Is(err, bqpulsar.ErrDeadLetterWrite) {
				reported.Store(err)
			}
		}),
	)
	require.NoError(t, err)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	_, err = pub.Publish(ctx, "urn:babel:jobs:run", map[string]any{})
	require.NoError(t, err)
	require.NoError(t, pub.Close())
	runUntil(t, c, func() {
		testwait.Eventually(t, brokertest.WaitLong, func() bool { return attempts.Load() >= 2 }, "the message was not negatively acknowledged and redelivered")
		assert.False(t, c.Health().Ready, "failing dead-letter writes make the consumer not ready")
	})

	err, _ = reported.Load().(error)
	var se *dlq.SubscriptionError
	require.ErrorAs(t, err, &se, "the error says which subscription of which topic")
	assert.Contains(t, err.Error(), topic+".dlq")
	assert.Contains(t, err.Error(), dlq.DefaultSubscription)
	assert.Contains(t, err.Error(), "allowAutoSubscriptionCreation", "and the fix")
	assert.Empty(t, brokertest.Subscriptions(t, admin, topic+".dlq"), "no subscription was made")

	// Nothing was acked: a consumer that can dead-letter gets the message again.
	var handled atomic.Int32
	again, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.Handle("urn:babel:jobs:run", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			handled.Add(1)
			return nil
		}))
	require.NoError(t, err)
	runConsumer(t, again)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return handled.Load() == 1 }, "the message was lost")
}

// TestRoutingDecisionSurvivesTheDeadLetterTopic: a message routed by its bq-job property,
// which differs from its body's URN, is dead-lettered with that property and redriven to
// the handler of the property's URN, the one that failed.
func TestRoutingDecisionSurvivesTheDeadLetterTopic(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, routingDecisionSurvivesTheDeadLetterTopic)
}

func routingDecisionSurvivesTheDeadLetterTopic(t *testing.T, tg *brokertest.Target) {
	ctx := t.Context()
	client := tg.Client(t)
	topic := tg.Topic(t, "jobs")
	const bodyURN, routedURN = "urn:babel:jobs:v1", "urn:babel:jobs:v2"

	env, err := envelope.Make(bodyURN, map[string]any{"n": 7}, envelope.WithQueue("jobs"))
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	props := bqpulsar.ProjectProperties(env)
	props[bqpulsar.PropJob] = routedURN
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(t, err)
	_, err = p.Send(ctx, &apulsar.ProducerMessage{Payload: payload, Properties: props})
	require.NoError(t, err)
	p.Close()

	dead := make(chan struct{}, 1)
	failing, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("workers", apulsar.Shared), bqpulsar.WithMaxAttempts(1),
		bqpulsar.Handle(routedURN, func(context.Context, *envelope.Envelope, apulsar.Message) error { return errors.New("v2 down") }),
		bqpulsar.Handle(bodyURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			t.Error("routed by the body's URN")
			return nil
		}),
		onDeadLettered(func() { dead <- struct{}{} }),
	)
	require.NoError(t, err)
	runUntil(t, failing, func() {
		select {
		case <-dead:
		case <-time.After(waitLong):
			t.Fatal("not dead-lettered")
		}
	})

	var got atomic.Value
	ok, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.Handle(routedURN, func(_ context.Context, e *envelope.Envelope, m apulsar.Message) error {
			got.Store(m.Properties()[bqpulsar.PropJob] + " " + e.URN())
			return nil
		}),
		bqpulsar.Handle(bodyURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			t.Error("the redriven message went to the body URN's handler")
			return nil
		}),
	)
	require.NoError(t, err)
	runConsumer(t, ok)
	rep, err := dlq.Redrive(ctx, client, dlq.RedriveOptions{Topic: topic + ".dlq", URN: routedURN, IdleTimeout: brokertest.IdleTimeout})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1, "the redrive filter matches the routing URN")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return got.Load() != nil }, "the redriven message was not handled")
	assert.Equal(t, routedURN+" "+bodyURN, got.Load())
}

// publishTrimSubscribe publishes 3 jobs to a topic nobody has subscribed to, trims, then
// subscribes and counts what arrives: it waits for want jobs, then a little longer for any
// more.
func publishTrimSubscribe(t *testing.T, tg *brokertest.Target, want int32, opts ...bqpulsar.PublisherOption) int32 {
	t.Helper()
	ctx := t.Context()
	admin := tg.Admin(t)
	client := tg.Client(t)
	topic := tg.Topic(t, "jobs")
	pub, err := bqpulsar.NewPublisher(client, topic, opts...)
	require.NoError(t, err)
	for i := range 3 {
		_, err = pub.Publish(ctx, "urn:babel:jobs:run", map[string]any{"n": i})
		require.NoError(t, err)
	}
	require.NoError(t, pub.Close())
	brokertest.ForceTrim(t, admin, topic)
	var handled atomic.Int32
	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("billing", apulsar.Shared),
		bqpulsar.Handle("urn:babel:jobs:run", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			handled.Add(1)
			return nil
		}))
	require.NoError(t, err)
	runConsumer(t, c)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return handled.Load() >= want }, "%d of %d jobs handled", handled.Load(), want)
	time.Sleep(time.Second) // whatever else is still stored arrives by then
	return handled.Load()
}

func TestInitialSubscriptionKeepsJobsPublishedBeforeTheFirstConsumer(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		assert.Equal(t, int32(3), publishTrimSubscribe(t, tg, 3, bqpulsar.WithInitialSubscription("billing")))
	})
}

// TestWithoutAnInitialSubscriptionATrimLosesTheJobs is what happens on Pulsar with default
// retention, and shows that the test above can fail.
func TestWithoutAnInitialSubscriptionATrimLosesTheJobs(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		assert.Zero(t, publishTrimSubscribe(t, tg, 0))
	})
}

func TestInitialSubscriptionNameIsValidated(t *testing.T) {
	t.Parallel()
	b, err := pulsartest.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err = bqpulsar.NewPublisher(newClient(t, b), uniqueTopic(t, "jobs"), bqpulsar.WithInitialSubscription(" "))
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption)
}

// runUntil runs c until wait returns, then stops and closes it, checking Run's result.
func runUntil(t *testing.T, c *bqpulsar.Consumer, wait func()) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	wait()
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, c.Close())
}

// countingClient counts the subscriptions made on dead-letter topics.
type countingClient struct {
	apulsar.Client
	dlqSubscribes *atomic.Int32
}

func (c countingClient) Subscribe(o apulsar.ConsumerOptions) (apulsar.Consumer, error) {
	if strings.HasSuffix(o.Topic, ".dlq") {
		c.dlqSubscribes.Add(1)
	}
	return c.Client.Subscribe(o)
}

// TestRetentionSubscriptionIsMadeOncePerDeadLetterTopic: the retention subscription is made
// before the first dead letter of a topic is written, and not again for the ones after it.
func TestRetentionSubscriptionIsMadeOncePerDeadLetterTopic(t *testing.T) {
	t.Parallel()
	tg := brokertest.Embedded(t)
	ctx := t.Context()
	client := tg.Client(t)
	topic := tg.Topic(t, "jobs")
	var subscribes atomic.Int32
	dead := make(chan struct{}, 3)
	c, err := bqpulsar.NewConsumer(countingClient{client, &subscribes},
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.Handle("urn:babel:jobs:run", func(context.Context, *envelope.Envelope, apulsar.Message) error {
			return bqpulsar.DeadLetter(errors.New("no"))
		}),
		onDeadLettered(func() { dead <- struct{}{} }),
	)
	require.NoError(t, err)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	for range 3 {
		_, err = pub.Publish(ctx, "urn:babel:jobs:run", map[string]any{})
		require.NoError(t, err)
	}
	require.NoError(t, pub.Close())
	runUntil(t, c, func() {
		for range 3 {
			select {
			case <-dead:
			case <-time.After(brokertest.WaitLong):
				t.Fatal("a message was not dead-lettered")
			}
		}
	})
	assert.Equal(t, int32(1), subscribes.Load(), "one retention subscription for three dead letters")
}

// A closed publisher refuses every publish with ErrClosed before anything else: it no longer
// makes the initial subscriptions its first send would have made.
func TestClosedPublisherMakesNoInitialSubscription(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "jobs")
	pub, err := bqpulsar.NewPublisher(client, topic, bqpulsar.WithInitialSubscription("billing"))
	require.NoError(t, err)
	require.NoError(t, pub.Close())

	_, err = pub.Publish(t.Context(), okURN, nil)
	require.ErrorIs(t, err, bqpulsar.ErrClosed)
	require.ErrorIs(t, pub.PublishAsync(t.Context(), okURN, nil, func(string, error) { t.Error("must not be called") }), bqpulsar.ErrClosed)
	require.ErrorIs(t, pub.TryPublishAsync(t.Context(), okURN, nil, func(string, error) { t.Error("must not be called") }), bqpulsar.ErrClosed)
	assert.Empty(t, b.Subscriptions(topic), "no subscription made after Close")
}
