package pulsar_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

var topicSeq atomic.Int64

// uniqueTopic returns a fresh fully qualified topic name for the test.
func uniqueTopic(t *testing.T, base string) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("persistent://public/default/%s-%s-%d", base, name, topicSeq.Add(1))
}

func newClient(tb testing.TB, b *pulsartest.Broker) apulsar.Client {
	tb.Helper()
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               b.URL(),
		OperationTimeout:  5 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	return c
}

// earliest makes a subscription start at the beginning of the topic, so that messages
// published before the consumer subscribed are received.
func earliest(o *apulsar.ConsumerOptions) {
	o.SubscriptionInitialPosition = apulsar.SubscriptionPositionEarliest
}

// collector receives every message of a topic on its own subscription.
type collector struct {
	mu   sync.Mutex
	msgs []apulsar.Message
	cond chan struct{}
}

func collect(t *testing.T, client apulsar.Client, topic string) *collector {
	t.Helper()
	pc, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "collector",
		Type:                        apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	require.NoError(t, err)
	col := &collector{cond: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := pc.Receive(ctx)
			if err != nil {
				return
			}
			_ = pc.Ack(m) // the collector only observes; an unacked message is simply seen again
			col.mu.Lock()
			col.msgs = append(col.msgs, m)
			col.mu.Unlock()
			select {
			case col.cond <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		pc.Close()
	})
	return col
}

// wait returns the first n messages, failing the test after timeout.
func (c *collector) wait(t *testing.T, n int, timeout time.Duration) []apulsar.Message {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		if len(c.msgs) >= n {
			out := append([]apulsar.Message(nil), c.msgs...)
			c.mu.Unlock()
			return out
		}
		got := len(c.msgs)
		c.mu.Unlock()
		select {
		case <-c.cond:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("collector: %d of %d messages after %s", got, n, timeout)
		}
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// eventually polls cond until it holds or waitLong passes.
func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("eventually: "+msg, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runConsumer runs c until the test ends, then closes it and checks Run's result.
func runConsumer(t *testing.T, c *bqpulsar.Consumer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.NoError(t, c.Close())
	})
}
