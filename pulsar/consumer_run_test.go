package pulsar

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/mocks"
)

// feed makes a mock receiver hand out msgs in order, then block until ctx ends, the way
// apulsar.Consumer.Receive does.
func feed(recv *mocks.MockReceiver, msgs ...apulsar.Message) {
	var mu sync.Mutex
	next := 0
	recv.EXPECT().Receive(gomock.Any()).DoAndReturn(func(ctx context.Context) (apulsar.Message, error) {
		mu.Lock()
		if next < len(msgs) {
			m := msgs[next]
			next++
			mu.Unlock()
			return m, nil
		}
		mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}).AnyTimes()
}

func TestRunReportsTransientReceiveErrorsAndGoesOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)))
	recv := h.mockReceiver()
	msg, _ := newMessage(t, testURN, 0, 0)
	transient := errors.New("connection reset")
	acked := make(chan struct{})
	gomock.InOrder(
		recv.EXPECT().Receive(gomock.Any()).Return(nil, transient),
		recv.EXPECT().Receive(gomock.Any()).Return(msg, nil),
		recv.EXPECT().Receive(gomock.Any()).DoAndReturn(func(ctx context.Context) (apulsar.Message, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}).AnyTimes(),
	)
	h.settler.EXPECT().Ack(msg).DoAndReturn(func(apulsar.Message) error { close(acked); return nil })
	h.runUntil(acked)

	errs := h.errors()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrReceive)
	require.ErrorIs(t, errs[0], transient)
	assert.Nil(t, h.errEnvs[0])
	assert.Nil(t, h.errMsgs[0])
}

func TestRunStopsOnFatalReceiveError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)))
	recv := h.mockReceiver()
	closedErr := fmt.Errorf("receive: %w", ErrClosed)
	recv.EXPECT().Receive(gomock.Any()).Return(nil, closedErr)
	err := h.c.Run(t.Context())
	require.ErrorIs(t, err, ErrReceive)
	require.ErrorIs(t, err, ErrClosed)
}

func TestCloseStopsRunAndIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)))
	recv := h.mockReceiver()
	started := make(chan struct{})
	recv.EXPECT().Receive(gomock.Any()).DoAndReturn(func(ctx context.Context) (apulsar.Message, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- h.c.Run(t.Context()) }()
	<-started
	require.ErrorIs(t, h.c.Run(t.Context()), ErrRunning)
	require.NoError(t, h.c.Close())
	require.ErrorIs(t, <-done, ErrClosed)
	require.NoError(t, h.c.Close())
	require.ErrorIs(t, h.c.Run(t.Context()), ErrClosed)
}

// Run may be called again after it returned: the second run receives and handles as the
// first did.
func TestRunMayBeCalledAgainAfterItReturned(t *testing.T) {
	t.Parallel()
	h := newHarness(t, WithConcurrency(2), Handle(testURN, handlerReturning(nil)))
	recv := h.mockReceiver()
	first, _ := newMessage(t, testURN, 0, 0)
	second, _ := newMessage(t, testURN, 0, 0)
	block := func(ctx context.Context) (apulsar.Message, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	gomock.InOrder(
		recv.EXPECT().Receive(gomock.Any()).Return(first, nil),
		recv.EXPECT().Receive(gomock.Any()).DoAndReturn(block), // until the first run ends
		recv.EXPECT().Receive(gomock.Any()).Return(second, nil),
		recv.EXPECT().Receive(gomock.Any()).DoAndReturn(block).AnyTimes(),
	)
	firstAcked, secondAcked := make(chan struct{}), make(chan struct{})
	h.settler.EXPECT().Ack(first).DoAndReturn(func(apulsar.Message) error { close(firstAcked); return nil })
	h.settler.EXPECT().Ack(second).DoAndReturn(func(apulsar.Message) error { close(secondAcked); return nil })
	h.runUntil(firstAcked)
	h.runUntil(secondAcked)
}

// InFlight counts, under Run, the messages in a handler or its settlement.
func TestInFlightCountsRunsHandlersAndSettlements(t *testing.T) {
	t.Parallel()
	var h *harness
	var inHandler, inSettlement atomic.Int64
	h = newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		inHandler.Store(int64(h.c.InFlight()))
		return nil
	}))
	recv := h.mockReceiver()
	msg, _ := newMessage(t, testURN, 0, 0)
	feed(recv, msg)
	acked := make(chan struct{})
	h.settler.EXPECT().Ack(msg).DoAndReturn(func(apulsar.Message) error {
		inSettlement.Store(int64(h.c.InFlight()))
		close(acked)
		return nil
	})
	h.runUntil(acked)
	assert.Equal(t, int64(1), inHandler.Load(), "in the handler")
	assert.Equal(t, int64(1), inSettlement.Load(), "in the settlement")
	assert.Zero(t, h.c.InFlight(), "after Run returned")
}

func TestConcurrencyKeepsPerKeyOrder(t *testing.T) {
	t.Parallel()
	const keys, perKey = 8, 25
	var (
		mu       sync.Mutex
		seen     = map[string][]int{}
		inflight atomic.Int32
		peak     atomic.Int32
	)
	h := newHarness(t, WithConcurrency(4), Handle(testURN, func(_ context.Context, env *envelope.Envelope, msg apulsar.Message) error {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(100 * time.Microsecond)
		seq, err := strconv.Atoi(msg.Properties()["seq"])
		if err != nil {
			return err
		}
		mu.Lock()
		seen[msg.Key()] = append(seen[msg.Key()], seq)
		mu.Unlock()
		return nil
	}))
	recv := h.mockReceiver()
	var msgs []apulsar.Message
	for i := range perKey {
		for k := range keys {
			m, _ := newMessage(t, testURN, 0, 0)
			m.key = "key-" + strconv.Itoa(k)
			m.props["seq"] = strconv.Itoa(i)
			msgs = append(msgs, m)
		}
	}
	feed(recv, msgs...)
	var acked atomic.Int32
	all := make(chan struct{})
	h.settler.EXPECT().Ack(gomock.Any()).DoAndReturn(func(apulsar.Message) error {
		if acked.Add(1) == int32(len(msgs)) {
			close(all)
		}
		return nil
	}).Times(len(msgs))
	h.runUntil(all)

	for k := range keys {
		got := seen["key-"+strconv.Itoa(k)]
		require.Len(t, got, perKey)
		for i := range got {
			assert.Equal(t, i, got[i], "key %d handled out of order", k)
		}
	}
	assert.LessOrEqual(t, peak.Load(), int32(4), "in-flight bounded by the concurrency")
	assert.Greater(t, peak.Load(), int32(1), "handlers ran concurrently")
}

// Only messages of one ordering key (or, without one, one key) wait for each other: two
// messages without a key, or with one key but two ordering keys, are handled at once.
func TestMessagesOfDifferentOrderingKeysDoNotWait(t *testing.T) {
	t.Parallel()
	for name, keys := range map[string][2][2]string{ // {key, ordering key} of each message
		"no key":                 {{"", ""}, {"", ""}},
		"one key, two orderings": {{"k", "a"}, {"k", "b"}},
	} {
		secondStarted, over := make(chan struct{}), make(chan struct{})
		var waited atomic.Bool
		var once sync.Once
		end := func() { once.Do(func() { close(over) }) }
		h := newHarness(t, WithConcurrency(2), Handle(testURN, func(_ context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
			if msg.Properties()["seq"] == "1" {
				close(secondStarted)
				return nil
			}
			select {
			case <-secondStarted:
			case <-time.After(5 * time.Second): // a bound for the failing case, not a timing
				waited.Store(true)
				end()
			}
			return nil
		}))
		recv := h.mockReceiver()
		var msgs []apulsar.Message
		for i, k := range keys {
			m, _ := newMessage(t, testURN, 0, 0)
			m.key, m.orderingKey, m.props["seq"] = k[0], k[1], strconv.Itoa(i)
			msgs = append(msgs, m)
		}
		feed(recv, msgs...)
		var acked atomic.Int32
		h.settler.EXPECT().Ack(gomock.Any()).DoAndReturn(func(apulsar.Message) error {
			if acked.Add(1) == 2 {
				end()
			}
			return nil
		}).MaxTimes(2)
		h.settler.EXPECT().Nack(gomock.Any()).AnyTimes() // the second, still queued when the first waited in vain
		h.runUntil(over)
		assert.False(t, waited.Load(), "%s: the second message waited for the first", name)
	}
}

// When Run's ctx ends, a message in flight finishes within the close timeout with its ctx
// still live, and is settled as its handler says.
func TestRunLetsInFlightFinishWithinTheCloseTimeout(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	stopped := make(chan struct{})
	var cancelled atomic.Bool
	h := newHarness(t, WithCloseTimeout(time.Minute),
		Handle(testURN, func(ctx context.Context, _ *envelope.Envelope, _ apulsar.Message) error {
			close(started)
			<-stopped
			select {
			case <-ctx.Done():
				cancelled.Store(true)
			case <-time.After(200 * time.Millisecond): // the drain's minute is far off
			}
			return nil
		}))
	recv := h.mockReceiver()
	msg, _ := newMessage(t, testURN, 0, 0)
	feed(recv, msg)
	h.settler.EXPECT().Ack(msg).Return(nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	<-started
	cancel()
	close(stopped)
	require.ErrorIs(t, <-done, context.Canceled)
	assert.False(t, cancelled.Load(), "the handler's ctx ended before the close timeout")
}

// A message the receive returns as Run's ctx ends is negatively acknowledged, not left
// unsettled: the broker delivers it again.
func TestRunNacksAMessageReceivedAsItStops(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)))
	recv := h.mockReceiver()
	msg, _ := newMessage(t, testURN, 0, 0)
	receiving := make(chan struct{})
	recv.EXPECT().Receive(gomock.Any()).DoAndReturn(func(ctx context.Context) (apulsar.Message, error) {
		close(receiving)
		<-ctx.Done()
		return msg, nil
	})
	h.settler.EXPECT().Nack(msg)
	h.runUntil(receiving)
}

func TestRunDrainsInFlightThenCancelsAfterDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var sawCancel atomic.Bool
	h := newHarness(t, WithConcurrency(2), WithCloseTimeout(50*time.Millisecond),
		Handle(testURN, func(ctx context.Context, _ *envelope.Envelope, _ apulsar.Message) error {
			close(release)
			<-ctx.Done() // stuck handler: only the drain deadline frees it
			sawCancel.Store(true)
			return ctx.Err()
		}))
	recv := h.mockReceiver()
	msg, _ := newMessage(t, testURN, 0, 0)
	feed(recv, msg)
	// The handler fails with ctx.Err(); the retry's send is refused by the cancelled ctx.
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(
		func(ctx context.Context, _ *apulsar.ProducerMessage) (apulsar.MessageID, error) {
			return nil, ctx.Err()
		}).AnyTimes()
	h.settler.EXPECT().Nack(msg)
	h.runUntil(release)
	assert.True(t, sawCancel.Load())
}

func TestRunInlineDrainDeadlineCancelsAStuckHandler(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := newHarness(t, WithCloseTimeout(50*time.Millisecond), WithDeadLetter(dlq.Off()), WithMaxAttempts(1),
		Handle(testURN, func(ctx context.Context, _ *envelope.Envelope, _ apulsar.Message) error {
			close(release)
			<-ctx.Done()
			return ctx.Err()
		}))
	recv := h.mockReceiver()
	msg, _ := newMessage(t, testURN, 0, 0)
	feed(recv, msg)
	h.settler.EXPECT().Ack(msg).Return(nil) // exhausted, dead-lettering off: acked and reported
	go func() {
		<-release
		assert.NoError(t, h.c.Close())
	}()
	require.ErrorIs(t, h.c.Run(t.Context()), ErrClosed)
	assert.NotEmpty(t, h.logs.FilterMessage("drain deadline passed; cancelling in-flight handlers").All())
}
