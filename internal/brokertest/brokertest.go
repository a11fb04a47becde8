// Package brokertest is the module's test support for code that talks to a broker: unique
// topic names, a client closed at cleanup, a collector that records every message of a
// topic, and [WaitLong], the bound of a wait for the broker (the wait itself is
// internal/testwait's). The pulsar, pulsar/connector, dlq, cmd/bq, interop and pulsartest
// tests share it; it is imported by _test.go files only.
//
// Dual-target tests run the same body against the embedded broker (pulsartest) and, when
// PULSAR_URL is set, against a real Apache Pulsar: Each runs the two as parallel subtests
// "embedded" and "real", and Unavailable is the one rule for a real half that cannot run
// (skip, or fail under REAL_PULSAR_REQUIRED=1). They drive both brokers through the same
// admin REST calls: ForceTrim (unload, then trim), Stats, Subscriptions, Topics and StateOf
// for checking that an operation changed nothing.
package brokertest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// WaitLong bounds what a test waits for the broker.
const WaitLong = 15 * time.Second

// IdleTimeout is the idle timeout the tests give dlq's Redrive and Purge: how long they wait
// for a next message before they call a topic drained. On a real broker a fresh consumer's
// first message, or one redelivered after another consumer closed, can take longer than a
// few hundred milliseconds on a loaded machine, and a shorter idle timeout then reads as an
// empty topic (TestPurge/real and TestDeadLetterSurvivesATrimThroughItsRetentionSubscription/real
// failed so, with 300 and 500 ms, in a CI run beside three others; fixed for that cause).
const IdleTimeout = 2 * time.Second

var topicSeq atomic.Int64

// UniqueTopic returns a fresh fully qualified topic name for the test.
func UniqueTopic(tb testing.TB, base string) string {
	tb.Helper()
	name := strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(strings.ToLower(tb.Name()))
	return fmt.Sprintf("persistent://public/default/%s-%s-%d", base, name, topicSeq.Add(1))
}

// NewClient returns a client for serviceURL (an embedded broker's URL, say) with 5 s
// timeouts and no logs, closed when the test ends.
func NewClient(tb testing.TB, serviceURL string) apulsar.Client {
	tb.Helper()
	return newClient(tb, serviceURL, false)
}

// NewTxnClient is NewClient with transactions enabled (ClientOptions.EnableTransaction): the
// broker must run its transaction coordinator.
func NewTxnClient(tb testing.TB, serviceURL string) apulsar.Client {
	tb.Helper()
	return newClient(tb, serviceURL, true)
}

func newClient(tb testing.TB, serviceURL string, txn bool) apulsar.Client {
	tb.Helper()
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               serviceURL,
		OperationTimeout:  5 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            bqpulsar.NewClientLogger(zap.NewNop()),
		EnableTransaction: txn,
	})
	if err != nil {
		tb.Fatalf("brokertest: client for %s: %v", serviceURL, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Collector receives every message of a topic on its own Exclusive subscription
// ("collector", from the earliest message), acknowledging each one. It records each message
// of the topic once: a message the broker delivers to the collector again (its
// acknowledgement, grouped by the client, was lost when the collector's connection was
// reset) has the same message id and is not recorded twice, while a copy written to the
// topic again (a republish, a producer's resend) has an id of its own and is.
type Collector struct {
	mu   sync.Mutex
	msgs []apulsar.Message
	seen map[entryID]bool
	cond chan struct{}
}

// entryID is a message's place on its topic: what a redelivery of it shares.
type entryID struct {
	ledger, entry    int64
	batch, partition int32
}

func entryOf(id apulsar.MessageID) entryID {
	return entryID{ledger: id.LedgerID(), entry: id.EntryID(), batch: id.BatchIdx(), partition: id.PartitionIdx()}
}

// Collect starts a Collector on topic; it stops when the test ends.
func Collect(tb testing.TB, client apulsar.Client, topic string) *Collector {
	tb.Helper()
	pc, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "collector",
		Type:                        apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		tb.Fatalf("brokertest: collect %s: %v", topic, err)
	}
	col := &Collector{seen: map[entryID]bool{}, cond: make(chan struct{}, 1)}
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
			id := entryOf(m.ID())
			again := col.seen[id]
			if !again {
				col.seen[id] = true
				col.msgs = append(col.msgs, m)
			}
			col.mu.Unlock()
			if again {
				continue
			}
			select {
			case col.cond <- struct{}{}:
			default:
			}
		}
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		pc.Close()
	})
	return col
}

// Wait returns the first n messages, failing the test after timeout.
func (c *Collector) Wait(tb testing.TB, n int, timeout time.Duration) []apulsar.Message {
	tb.Helper()
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
			tb.Fatalf("collector: %d of %d messages after %s", got, n, timeout)
		}
	}
}

// Count returns how many messages arrived.
func (c *Collector) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// RefusedClient returns a client of a loopback port that refuses every connection for the
// whole test ([RefusedAddr]), with a 1 s connection and a 2 s operation timeout; it is closed
// when the test ends. Constructors given it must fail with the cause, within those timeouts.
func RefusedClient(tb testing.TB) apulsar.Client {
	tb.Helper()
	addr := RefusedAddr(tb)
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: "pulsar://" + addr, ConnectionTimeout: time.Second, OperationTimeout: 2 * time.Second,
		Logger: bqpulsar.NewClientLogger(zap.NewNop()),
	})
	if err != nil {
		tb.Fatalf("brokertest: client for %s: %v", addr, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// SilentListener accepts TCP connections on a loopback port and never answers, like a host
// whose broker hangs. It returns its address and a channel that gets a value per accepted
// connection (when there is room); it closes the listener and the connections when the test
// ends.
func SilentListener(tb testing.TB) (addr string, accepted <-chan struct{}) {
	tb.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("brokertest: listen: %v", err)
	}
	ch := make(chan struct{}, 100)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), ch
}
