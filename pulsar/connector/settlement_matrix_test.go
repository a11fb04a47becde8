package connector_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// The settlement matrix: every outcome a handler can have, on every subscription type, with
// both retry strategies where the type allows them, through the three fronts of the one
// engine (Consumer.Run, Consumer.Next and the connector's Source). Every front must give
// the same observed answer, and the expected one: the attempts the handler saw, the
// bq-attempts of every copy on the topic (the original and the republished retries), and
// the dead letters (reason and attempts); the subscription's backlog ends empty, so the
// last delivery was acknowledged. It runs on the embedded broker and, with PULSAR_URL
// set, on a real one.
func TestSettlementMatrix(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		t.Helper()
		for _, sub := range matrixSubscriptions {
			for _, oc := range matrixOutcomes {
				t.Run(sub.name+"/"+oc.name, func(t *testing.T) {
					t.Parallel()
					want := oc.want(sub.strategy)
					for _, fr := range matrixFronts {
						t.Run(fr.name, func(t *testing.T) {
							t.Parallel()
							got := runMatrixCell(t, tg, sub, oc, fr, want)
							assert.Equal(t, want, got, "%s on %s through %s", oc.name, sub.name, fr.name)
						})
					}
				})
			}
		}
	})
}

const (
	matrixURN         = "urn:babel:matrix:job"
	matrixMaxAttempts = 3
	matrixNackDelay   = 100 * time.Millisecond
	matrixRetryAfter  = 100 * time.Millisecond
)

var errMatrix = errors.New("matrix failure")

type matrixSubscription struct {
	name     string
	subType  apulsar.SubscriptionType
	strategy retry.Strategy
}

// Retry by nack is refused on Exclusive and Failover (the broker does not count their
// redeliveries), so those two types have the republish column only.
var matrixSubscriptions = []matrixSubscription{
	{"exclusive-republish", apulsar.Exclusive, retry.Republish},
	{"failover-republish", apulsar.Failover, retry.Republish},
	{"shared-republish", apulsar.Shared, retry.Republish},
	{"shared-nack", apulsar.Shared, retry.Nack},
	{"key_shared-republish", apulsar.KeyShared, retry.Republish},
	{"key_shared-nack", apulsar.KeyShared, retry.Nack},
}

// matrixOutcome is what the handler does on each attempt: return an error (nil to
// acknowledge), or panic.
type matrixOutcome struct {
	name   string
	handle func(attempt int) error
	// handled is the number of deliveries the handler sees; deadLetter the reason of the
	// dead letter ("" for none).
	handled    int
	deadLetter envelope.Reason
}

var matrixOutcomes = []matrixOutcome{
	{name: "ack", handle: func(int) error { return nil }, handled: 1},
	{name: "retryable", handle: failFirst(errMatrix), handled: 2},
	{name: "retry-after", handle: failFirst(bqpulsar.RetryAfter(matrixRetryAfter, errMatrix)), handled: 2},
	{name: "dead-letter", handle: func(int) error { return bqpulsar.DeadLetter(errMatrix) }, handled: 1, deadLetter: envelope.ReasonFailed},
	{name: "panic", handle: func(attempt int) error {
		if attempt == 1 {
			panic("matrix panic")
		}
		return nil
	}, handled: 2},
	{name: "exhausted", handle: func(int) error { return errMatrix }, handled: matrixMaxAttempts, deadLetter: envelope.ReasonFailed},
}

func failFirst(err error) func(int) error {
	return func(attempt int) error {
		if attempt == 1 {
			return err
		}
		return nil
	}
}

// matrixAnswer is what a cell observes.
type matrixAnswer struct {
	// Handled are the attempts the handler saw, in order.
	Handled []int
	// Copies are the bq-attempts of the messages on the topic: the original, then each
	// republished retry.
	Copies []string
	// DeadLetters are the dead letters, as "reason/attempts".
	DeadLetters []string
}

// want is the expected answer of the outcome under strategy.
func (oc matrixOutcome) want(strategy retry.Strategy) matrixAnswer {
	a := matrixAnswer{Copies: []string{"0"}}
	for i := 1; i <= oc.handled; i++ {
		a.Handled = append(a.Handled, i)
	}
	if strategy == retry.Republish {
		for i := 1; i < oc.handled; i++ {
			a.Copies = append(a.Copies, fmt.Sprint(i)) // each retry is republished with the attempts so far
		}
	}
	if oc.deadLetter != "" {
		a.DeadLetters = []string{fmt.Sprintf("%s/%d", oc.deadLetter, oc.handled)}
	}
	return a
}

// matrixFront runs handle on every delivery of a subscription and settles its outcome,
// until the test ends.
type matrixFront struct {
	name  string
	start func(t *testing.T, client apulsar.Client, topic string, sub matrixSubscription, handle func(attempt int) error)
}

var matrixFronts = []matrixFront{
	{"run", startRun},
	{"next", startNext},
	{"source", startSource},
}

// consumerOptions are the options of the Consumer fronts.
func matrixConsumerOptions(topic string, sub matrixSubscription) []bqpulsar.ConsumerOption {
	return []bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", sub.subType),
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: matrixMaxAttempts, Strategy: sub.strategy}),
		bqpulsar.WithNackRedeliveryDelay(matrixNackDelay),
	}
}

func startRun(t *testing.T, client apulsar.Client, topic string, sub matrixSubscription, handle func(int) error) {
	t.Helper()
	c, err := bqpulsar.NewConsumer(client, append(matrixConsumerOptions(topic, sub),
		bqpulsar.Handle(matrixURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
			return handle(env.Attempts + 1)
		}))...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.NoError(t, c.Close())
	})
}

// startNext is the loop a user of the pull style writes: Next, the handler (a panic
// recovered as a failure), and the settlement method its outcome names.
func startNext(t *testing.T, client apulsar.Client, topic string, sub matrixSubscription, handle func(int) error) {
	t.Helper()
	c, err := bqpulsar.NewConsumer(client, matrixConsumerOptions(topic, sub)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for {
			d, err := c.Next(ctx)
			if err != nil {
				done <- err
				return
			}
			var settleErr error
			switch err := callRecovered(handle, d.Attempt()); {
			case err == nil:
				settleErr = d.Ack()
			case errors.As(err, new(*bqpulsar.DeadLetterError)):
				settleErr = d.DeadLetter(errors.Unwrap(err))
			case errors.As(err, new(*bqpulsar.RetryAfterError)):
				var ra *bqpulsar.RetryAfterError
				errors.As(err, &ra)
				settleErr = d.RetryAfter(ra.Delay, ra.Err)
			default:
				settleErr = d.Fail(err)
			}
			if settleErr != nil {
				done <- settleErr
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.NoError(t, c.Close())
	})
}

func callRecovered(handle func(int) error, attempt int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &bqpulsar.PanicError{Where: "handler", Value: r}
		}
	}()
	return handle(attempt)
}

// startSource is a stage on the connector's Source: ack on success, nack with the outcome
// as the reason otherwise (failure-strategy babelqueue, envelope payloads).
func startSource(t *testing.T, client apulsar.Client, topic string, sub matrixSubscription, handle func(int) error) {
	t.Helper()
	src, err := connector.NewSource(client, connector.SourceOptions{
		Consumer: apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "app", Type: sub.subType, NackRedeliveryDelay: matrixNackDelay,
		},
		MaxAttempts: matrixMaxAttempts, RetryStrategy: sub.strategy, Envelopes: true,
	})
	require.NoError(t, err)
	runStage(t, src, func(m bytesMsg) {
		md, ok := messaging.MetadataOf[connector.IncomingMetadata](m.Metadata())
		if !assert.True(t, ok, "incoming metadata") {
			return
		}
		if err := callRecovered(handle, md.Attempts+1); err != nil {
			assert.NoError(t, m.Nack(context.Background(), err))
		} else {
			assert.NoError(t, m.Ack(context.Background()))
		}
	})
}

// runStage subscribes a stage to src that settles each message it delivers with settle,
// on a goroutine of its own, until the test ends; then it closes src.
func runStage(t *testing.T, src *connector.Source, settle func(bytesMsg)) {
	t.Helper()
	stage := &chanSubscriber{msgs: make(chan bytesMsg, 16)}
	src.Subscribe(stage)
	stage.sub.Request(reactive.Unbounded)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case m := <-stage.msgs:
				settle(m)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		assert.NoError(t, src.Close(ctx))
	})
}

// chanSubscriber hands what a Source delivers to a channel.
type chanSubscriber struct {
	sub  reactive.Subscription
	msgs chan bytesMsg
}

func (c *chanSubscriber) OnSubscribe(s reactive.Subscription) { c.sub = s }
func (c *chanSubscriber) OnNext(m bytesMsg)                   { c.msgs <- m }
func (*chanSubscriber) OnError(error)                         {}
func (*chanSubscriber) OnComplete()                           {}

// runMatrixCell publishes one job, runs the front until the expected number of deliveries
// was handled, the dead letters arrived and the subscription's backlog is empty, and
// returns what it observed.
func runMatrixCell(t *testing.T, tg *brokertest.Target, sub matrixSubscription, oc matrixOutcome, fr matrixFront, want matrixAnswer) matrixAnswer {
	t.Helper()
	client := tg.Client(t)
	topic := tg.Topic(t, "matrix")
	copies := brokertest.Collect(t, client, topic)
	dead := brokertest.Collect(t, client, topic+".dlq")

	var mu sync.Mutex
	var handled []int
	fr.start(t, client, topic, sub, func(attempt int) error {
		mu.Lock()
		handled = append(handled, attempt)
		mu.Unlock()
		return oc.handle(attempt)
	})

	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pub.Close()) })
	_, err = pub.Publish(t.Context(), matrixURN, map[string]any{"cell": t.Name()}, bqpulsar.WithKey("k"))
	require.NoError(t, err)

	admin := tg.Admin(t)
	got := matrixAnswer{}
	for _, m := range copies.Wait(t, len(want.Copies), waitLong) {
		got.Copies = append(got.Copies, m.Properties()[bqpulsar.PropAttempts])
	}
	if len(want.DeadLetters) > 0 {
		for _, m := range dead.Wait(t, len(want.DeadLetters), waitLong) {
			env, err := envelope.Decode(m.Payload())
			require.NoError(t, err)
			require.NotNil(t, env.DeadLetter)
			got.DeadLetters = append(got.DeadLetters, fmt.Sprintf("%s/%d", env.DeadLetter.Reason, env.DeadLetter.Attempts))
		}
	}
	testwait.Eventually(t, brokertest.WaitLong, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) >= len(want.Handled) && brokertest.Backlog(t, admin, topic, "app") == 0
	}, "%s: not every delivery handled, or a backlog left", t.Name())
	mu.Lock()
	got.Handled = append([]int(nil), handled...)
	mu.Unlock()
	return got
}
