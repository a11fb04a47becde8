package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
)

// syncBuffer is a bytes.Buffer safe for a writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// brokerCommand is a `bq broker` running in the test: what it writes, and stop, which
// cancels it and checks that it exits with exitOK within 10 s.
type brokerCommand struct {
	stdout, stderr syncBuffer
	stop           func()
}

// startBrokerCommand runs runBroker with args until stop (or the end of the test).
func startBrokerCommand(t *testing.T, args ...string) *brokerCommand {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	b := &brokerCommand{}
	done := make(chan int, 1)
	go func() { done <- runBroker(ctx, args, &b.stdout, &b.stderr) }()
	b.stop = func() {
		t.Helper()
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, exitOK, code, b.stderr.String())
		case <-time.After(10 * time.Second):
			t.Fatal("bq broker did not exit after cancellation")
		}
	}
	return b
}

// url waits until the broker has printed a URL starting with prefix, and returns it.
func (b *brokerCommand) url(t *testing.T, prefix string) string {
	t.Helper()
	var url string
	testwait.Eventually(t, 10*time.Second, func() bool {
		for _, l := range strings.Fields(b.stdout.String()) {
			if strings.HasPrefix(l, prefix) {
				url = l
			}
		}
		return url != ""
	}, "%s URL on stdout; stderr: %s", prefix, b.stderr.String())
	return url
}

func TestBrokerCommandServesARealClient(t *testing.T) {
	b := startBrokerCommand(t, "-addr", "127.0.0.1:0", "-partitioned", "orders=2", "-admin-addr", "127.0.0.1:0")
	url := b.url(t, "pulsar://")
	require.True(t, strings.HasPrefix(url, "pulsar://127.0.0.1:"), url)

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	require.NoError(t, err)
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{Topic: "orders", SubscriptionName: "s"})
	require.NoError(t, err)
	producer, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders"})
	require.NoError(t, err)
	_, err = producer.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("hello")})
	require.NoError(t, err)
	rctx, rcancel := context.WithTimeout(t.Context(), 10*time.Second)
	m, err := consumer.Receive(rctx)
	rcancel()
	require.NoError(t, err)
	assert.Equal(t, "hello", string(m.Payload()))
	producer.Close()
	consumer.Close()
	client.Close()

	b.stop()
	assert.Contains(t, b.stderr.String(), "connection opened")
	assert.Contains(t, b.stderr.String(), "admin REST subset")
}

// TestBrokerCommandTransactions: with --transactions a client created with EnableTransaction
// opens and commits a transaction (without it, NewClient fails with
// ErrTransactionCoordinatorNotEnabled, which pulsartest's tests pin).
func TestBrokerCommandTransactions(t *testing.T) {
	b := startBrokerCommand(t, "-addr", "127.0.0.1:0", "--transactions")
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: b.url(t, "pulsar://"), Logger: plog.DefaultNopLogger(), EnableTransaction: true})
	require.NoError(t, err)
	txn, err := client.NewTransaction(time.Minute)
	require.NoError(t, err)
	require.NoError(t, txn.Commit(t.Context()))
	client.Close()
	b.stop()
}

func TestBrokerCommandFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, exitUsage, runBroker(t.Context(), []string{"-addr", "10.1.2.3:6650"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-allow-remote")

	errOut.Reset()
	assert.Equal(t, exitUsage, runBroker(t.Context(), []string{"-partitioned", "orders"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "name=N")

	errOut.Reset()
	assert.Equal(t, exitUsage, runBroker(t.Context(), []string{"-trim-interval", "-1s"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-trim-interval -1s")

	errOut.Reset()
	assert.Equal(t, exitOK, runBroker(t.Context(), []string{"-h"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-partitioned")
}

func TestBrokerCommandTrims(t *testing.T) {
	b := startBrokerCommand(t, "-addr", "127.0.0.1:0", "-trim-interval", "20ms")
	url := b.url(t, "pulsar://")
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: plog.DefaultNopLogger()})
	require.NoError(t, err)
	producer, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "unsubscribed"})
	require.NoError(t, err)
	_, err = producer.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("nobody needs me")})
	require.NoError(t, err)
	producer.Close()

	// No durable subscription holds the entry, so a trim drops it, as Pulsar drops the
	// ledgers of a topic without subscriptions; a reader from the earliest position then
	// receives nothing (HasNext would still say yes: the last message id stays).
	testwait.Eventually(t, 10*time.Second, func() bool {
		r, err := client.CreateReader(apulsar.ReaderOptions{Topic: "unsubscribed", StartMessageID: apulsar.EarliestMessageID()})
		if err != nil {
			return false
		}
		defer r.Close()
		rctx, rcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer rcancel()
		_, err = r.Next(rctx)
		return errors.Is(err, context.DeadlineExceeded)
	}, "the entry was never trimmed")
	client.Close()
	b.stop()
}
