package pulsar_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// TestPartitionedTopicRetriesAndDeadLettersGoToParent: a message received on a partition
// is retried on, and dead-lettered next to, the parent topic, never a single partition.
func TestPartitionedTopicRetriesAndDeadLettersGoToParent(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	parent := uniqueTopic(t, "parts")
	require.NoError(t, b.CreatePartitionedTopic(parent, 3))
	dead := collect(t, client, parent+".dlq")

	var mu sync.Mutex
	topicsSeen := map[string]int{}
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(parent),
		bqpulsar.WithSubscription("app", apulsar.Shared),
		bqpulsar.WithConsumerOptions(earliest),
		bqpulsar.WithConcurrency(4),
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: 3}),
		bqpulsar.Handle(failURN, func(_ context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
			mu.Lock()
			topicsSeen[msg.Topic()]++
			mu.Unlock()
			return errors.New("nope")
		}))
	require.NoError(t, err)
	runConsumer(t, c)

	pub, err := bqpulsar.NewPublisher(client, parent)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	const n = 12
	for i := range n {
		_, err := pub.Publish(t.Context(), failURN, map[string]any{"i": i}, bqpulsar.WithKey(string(rune('a'+i))))
		require.NoError(t, err)
	}
	msgs := dead.wait(t, n, waitLong)
	for _, m := range msgs {
		env, err := envelope.Decode(m.Payload())
		require.NoError(t, err)
		assert.Equal(t, "parts-"+strings.SplitN(parent, "parts-", 2)[1], env.DeadLetter.OriginalQueue)
		assert.Equal(t, 3, env.DeadLetter.Attempts)
	}
	mu.Lock()
	for topic, calls := range topicsSeen {
		p, err := dlq.ParentTopic(topic)
		require.NoError(t, err)
		assert.Equal(t, parent, p, "handled on a partition of the parent")
		assert.Positive(t, calls)
	}
	mu.Unlock()
	for _, topic := range b.Topics() {
		assert.NotContains(t, topic, "-partition-0.dlq")
		assert.NotContains(t, topic, "-partition-1.dlq")
		assert.NotContains(t, topic, "-partition-2.dlq")
		assert.NotContains(t, topic, "-partition-0-partition", "no retry to a partition's own partitions")
	}
	assert.Contains(t, b.Topics(), parent+".dlq")
	for i := range 3 {
		testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(parent+"-partition-"+string(rune('0'+i)), "app") == 0 },
			"partition %d not drained", i)
	}
}

// TestDeadLetterWriteFailureIsNotAcked: while the dead-letter topic refuses writes the
// message is never acknowledged; once the topic recovers it is dead-lettered.
func TestDeadLetterWriteFailureIsNotAcked(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "dlqfail")
	dlqTopic := topic + ".dlq"
	// The dead-letter topic exists before the faults are armed.
	require.NoError(t, b.CreateTopic(dlqTopic))
	dead := collect(t, client, dlqTopic)
	// NotAllowedError makes the client give up the producer without dropping the
	// connection (a transient error would drop it and resend): the send times out, and the
	// consumer replaces the producer on the next attempt.
	b.FailNextSends(dlqTopic, 2, pulsartest.NotAllowedError)

	var writeFailures atomic.Int32
	var deadLettered atomic.Int32
	var firstMu sync.Mutex
	var deadLetteredAtFirstFailure int32
	backlogAtFirstFailure := -1
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", apulsar.Shared),
		bqpulsar.WithConsumerOptions(earliest),
		bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond),
		bqpulsar.WithMaxAttempts(1),
		bqpulsar.WithSenderOptions(func(o *apulsar.ProducerOptions) { o.SendTimeout = 300 * time.Millisecond }),
		bqpulsar.Handle(failURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			return errors.New("nope")
		}),
		onFailure(func(err error, _ *envelope.Envelope, _ apulsar.Message) {
			if errors.Is(err, bqpulsar.ErrDeadLetterWrite) && writeFailures.Add(1) == 1 {
				firstMu.Lock()
				deadLetteredAtFirstFailure = deadLettered.Load()
				backlogAtFirstFailure = b.Backlog(topic, "app")
				firstMu.Unlock()
			}
		}),
		onDeadLettered(func() { deadLettered.Add(1) }))
	require.NoError(t, err)
	runConsumer(t, c)

	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	id, err := pub.Publish(t.Context(), failURN, nil)
	require.NoError(t, err)

	testwait.Eventually(t, brokertest.WaitLong, func() bool { return writeFailures.Load() > 0 }, "no dead-letter write failure reported")
	firstMu.Lock()
	assert.Zero(t, deadLetteredAtFirstFailure, "nothing dead-lettered while the topic fails")
	assert.Equal(t, 1, backlogAtFirstFailure, "the message is not acknowledged while the write fails")
	firstMu.Unlock()

	msgs := dead.wait(t, 1, waitLong)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "acknowledged once dead-lettered")
	require.Len(t, msgs, 1)
	for _, m := range msgs {
		env, err := envelope.Decode(m.Payload())
		require.NoError(t, err)
		assert.Equal(t, id, env.Meta.ID)
		require.NotNil(t, env.DeadLetter)
		assert.Equal(t, envelope.ReasonFailed, env.DeadLetter.Reason)
	}
	assert.Equal(t, int32(2), writeFailures.Load(), "one failed write per injected fault")
	assert.Equal(t, int32(1), deadLettered.Load())
	assert.Equal(t, 1, dead.count(), "dead-lettered exactly once")
}

// TestWrapConsumerLeavesTheCallersConsumerOpen checks WrapConsumer's declared type and
// ownership: Close closes the producers it created, never the wrapped consumer.
func TestWrapConsumerLeavesTheCallersConsumerOpen(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "wrap")
	pc, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "app", Type: apulsar.Shared,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         100 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(pc.Close)

	nack := bqpulsar.WithRetry(retry.Policy{Strategy: retry.Nack})
	_, err = bqpulsar.WrapConsumer(client, pc, bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }), nack)
	require.ErrorIs(t, err, bqpulsar.ErrInvalidOption, "undeclared type counts as Exclusive: nack refused")

	var calls atomic.Int32
	c, err := bqpulsar.WrapConsumer(client, pc, nack, bqpulsar.WithSubscription("wrapped", apulsar.Shared),
		bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			if calls.Add(1) == 1 {
				return errors.New("first delivery fails")
			}
			return nil
		}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	_, err = pub.Publish(t.Context(), okURN, nil)
	require.NoError(t, err)
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return calls.Load() == 2 }, "redelivered after the nack")
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "acked")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, c.Close())

	// The wrapped consumer still works.
	_, err = pub.Publish(t.Context(), okURN, nil)
	require.NoError(t, err)
	rctx, rcancel := context.WithTimeout(t.Context(), waitLong)
	defer rcancel()
	m, err := pc.Receive(rctx)
	require.NoError(t, err)
	require.NoError(t, pc.Ack(m))
}

func TestPublishAsyncWithRealClient(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "async")
	pub, err := bqpulsar.NewPublisher(client, topic, bqpulsar.WithMaxPending(8))
	require.NoError(t, err)
	const n = 200
	var wg sync.WaitGroup
	var failed atomic.Int32
	ids := make(chan string, n)
	for range n {
		wg.Add(1)
		require.NoError(t, pub.PublishAsync(t.Context(), okURN, nil, func(id string, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
			}
			ids <- id
		}, bqpulsar.WithKey("k")))
	}
	require.NoError(t, pub.Close(), "Close flushes and waits for the callbacks")
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	assert.Len(t, seen, n)
	assert.Zero(t, failed.Load())
	assert.Equal(t, n, b.Stats(topic).Messages)
}
