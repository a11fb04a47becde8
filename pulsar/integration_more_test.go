package pulsar_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
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
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// TestRetryBackoffIsDelayedByTheBrokerOnShared: the republished retry carries
// DeliverAfter, so a message published after the failure is handled before the retry.
func TestRetryBackoffIsDelayedByTheBrokerOnShared(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "backoff")
	var mu sync.Mutex
	var order []string
	var retryDelay string
	var failedOnce atomic.Bool
	failed := make(chan struct{})
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", apulsar.Shared),
		bqpulsar.WithConsumerOptions(earliest),
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Initial: 500 * time.Millisecond}}),
		bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			var d struct{ Name string }
			if err := env.Bind(&d); err != nil {
				return err
			}
			if d.Name == "first" && failedOnce.CompareAndSwap(false, true) {
				close(failed)
				return errors.New("first delivery fails")
			}
			mu.Lock()
			defer mu.Unlock()
			order = append(order, d.Name+"@"+strconv.Itoa(env.Attempts))
			if d.Name == "first" {
				retryDelay = msg.Properties()[bqpulsar.PropDelay]
			}
			return nil
		}))
	require.NoError(t, err)
	runConsumer(t, c)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	_, err = pub.Publish(t.Context(), okURN, map[string]any{"name": "first"})
	require.NoError(t, err)
	<-failed
	_, err = pub.Publish(t.Context(), okURN, map[string]any{"name": "second"})
	require.NoError(t, err)
	testwait.Eventually(t, brokertest.WaitLong, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2
	}, "both handled")
	assert.Equal(t, []string{"second@0", "first@1"}, order)
	assert.Equal(t, "500", retryDelay)
}

// TestNackRetryBackoffIsTheNackBackoffPolicy: under retry.Nack the policy's backoff is the
// consumer's NackBackoffPolicy, which the client's negative-ack tracker uses in place of the
// nack redelivery delay: with a backoff of 50 ms the retry comes back long before the hour
// of that delay.
func TestNackRetryBackoffIsTheNackBackoffPolicy(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "nack-backoff")
	attempts := make(chan int, 2)
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", apulsar.Shared),
		bqpulsar.WithNackRedeliveryDelay(time.Hour),
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: 2, Strategy: retry.Nack, Backoff: retry.Backoff{Initial: 50 * time.Millisecond}}),
		bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
			attempts <- env.Attempts
			if env.Attempts == 0 {
				return errors.New("first delivery fails")
			}
			return nil
		}))
	require.NoError(t, err)
	runConsumer(t, c)
	publishJobs(t, client, topic, 1)
	for want := range 2 {
		select {
		case got := <-attempts:
			require.Equal(t, want, got)
		case <-time.After(waitLong):
			require.FailNow(t, "no delivery", "delivery %d not handled: the nack waited for the redelivery delay", want+1)
		}
	}
}

// TestKeySharedConcurrencyKeepsKeyOrder: two Key_Shared consumers with four workers each;
// every key is handled in publish order.
func TestKeySharedConcurrencyKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "keyshared")
	const keys, perKey = 16, 30
	var mu sync.Mutex
	seen := map[string][]int{}
	var total atomic.Int32
	handler := func(_ context.Context, env *envelope.Envelope, msg apulsar.Message) error {
		var d struct{ Seq int }
		if err := env.Bind(&d); err != nil {
			return err
		}
		mu.Lock()
		seen[msg.Key()] = append(seen[msg.Key()], d.Seq)
		mu.Unlock()
		total.Add(1)
		return nil
	}
	for range 2 {
		c, err := bqpulsar.NewConsumer(client,
			bqpulsar.WithTopic(topic),
			bqpulsar.WithSubscription("app", apulsar.KeyShared),
			bqpulsar.WithConsumerOptions(earliest),
			bqpulsar.WithConcurrency(4),
			bqpulsar.Handle(okURN, handler))
		require.NoError(t, err)
		runConsumer(t, c)
	}
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	var wg sync.WaitGroup
	for i := range perKey {
		for k := range keys {
			wg.Add(1)
			require.NoError(t, pub.PublishAsync(t.Context(), okURN, map[string]any{"seq": i}, func(_ string, err error) {
				assert.NoError(t, err)
				wg.Done()
			}, bqpulsar.WithKey("key-"+strconv.Itoa(k))))
		}
		wg.Wait() // one round at a time, so that publish order is per-key order
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool { return total.Load() == keys*perKey }, "all handled")
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		got := seen["key-"+strconv.Itoa(k)]
		require.Len(t, got, perKey)
		for i, s := range got {
			assert.Equal(t, i, s, "key %d out of order", k)
		}
	}
}
