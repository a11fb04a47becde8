package connector_test

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

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

type bytesMsg = messaging.Message[[]byte]

const (
	// waitLong bounds what a test waits for the broker.
	waitLong = 15 * time.Second
	// settleQuiet is how long a test waits to see that nothing more happens.
	settleQuiet = 200 * time.Millisecond
)

// tckBrokerOptions are the TCK timings for endpoints on the embedded broker: signals
// cross a network connection, so the defaults of in-process publishers are too short.
var tckBrokerOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 40 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	SkipStochastic:   true,
}

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

// newConnector returns a connector of opts, failing the test when New refuses them.
func newConnector(t *testing.T, opts ...connector.Option) *connector.Connector {
	t.Helper()
	c, err := connector.New(opts...)
	require.NoError(t, err)
	return c
}

// publishN publishes n small payloads ("m-0" …) to topic with batching, and waits for
// the receipts.
func publishN(tb testing.TB, client apulsar.Client, topic string, n int) {
	tb.Helper()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(tb, err)
	defer p.Close()
	errs := make(chan error, n)
	for i := range n {
		p.SendAsync(context.Background(), &apulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)},
			func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) { errs <- err })
	}
	require.NoError(tb, p.FlushWithCtx(context.Background()))
	for range n {
		require.NoError(tb, <-errs)
	}
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

// wait returns the first n messages, failing the test after waitLong.
func (c *collector) wait(t *testing.T, n int) []apulsar.Message {
	t.Helper()
	deadline := time.After(waitLong)
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
			t.Fatalf("collector: %d of %d messages after %s", got, n, waitLong)
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
