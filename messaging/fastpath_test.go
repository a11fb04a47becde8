package messaging_test

import (
	"context"
	"io"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// TestTCK_PullSourceTryPull: the elements come from the try function while
// it has them and from pull otherwise; the race detector checks that the two
// never overlap (the counter is a plain int64).
func TestTCK_PullSourceTryPull(t *testing.T) {
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			var i int64
			next := func() messaging.Message[int] { i++; return element(int(i % (1 << 30))) }
			return messaging.NewPullSource("tck", func(context.Context) (messaging.Message[int], error) {
				if n != reactive.Unbounded && i >= n {
					return nil, io.EOF
				}
				return next(), nil
			}, messaging.WithTryPull(func() (messaging.Message[int], bool) {
				if (n != reactive.Unbounded && i >= n) || i%3 == 2 { // every third from pull
					return nil, false
				}
				return next(), true
			}))
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[messaging.Message[int]] {
			t.Helper()
			return closedSource(t, messaging.NewPullSource("tck", func(context.Context) (messaging.Message[int], error) { return nil, io.EOF },
				messaging.WithTryPull(func() (messaging.Message[int], bool) { return nil, false })))
		},
	}, blockOptions())
}

func TestTCK_FuncSinkInlineBlackbox(t *testing.T) {
	tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[messaging.Message[int]]{
		Create: func(*testing.T) reactive.Subscriber[messaging.Message[int]] {
			return messaging.NewFuncSink("tck", func(context.Context, messaging.Message[int]) error { return nil },
				messaging.WithInlineSend())
		},
		Element: element,
	}, tckOptions)
}

// A message the try function has at once is delivered on the requesting
// goroutine, in order, within the in-flight bound; pull serves the rest.
func TestPullSource_TryPullDeliversOnTheRequester(t *testing.T) {
	c := newCounter()
	var seq, tried, pulled atomic.Int64
	src := messaging.NewPullSource("in", func(context.Context) (messaging.Message[string], error) {
		pulled.Add(1)
		return c.msg(strconv.Itoa(int(seq.Add(1)))), nil
	}, messaging.WithTryPull(func() (messaging.Message[string], bool) {
		if tried.Load() == 4 {
			return nil, false
		}
		tried.Add(1)
		return c.msg(strconv.Itoa(int(seq.Add(1)))), true
	}), messaging.WithMaxInflight(3))
	sub := &subscriberOf[string]{n: 2}
	src.Subscribe(sub)
	require.Len(t, sub.received(), 2, "delivered within Subscribe, on this goroutine")
	sub.sub.Request(10)
	require.Len(t, sub.received(), 3, "the in-flight bound holds for try")
	for _, m := range sub.received() {
		require.NoError(t, m.Ack(t.Context()))
	}
	testwait.Eventually(t, waitTimeout, func() bool { return len(sub.received()) == 6 }, "three more after three settlements")
	var got []string
	for _, m := range sub.received() {
		got = append(got, m.Payload())
	}
	assert.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, got)
	assert.Equal(t, int64(4), tried.Load())
	assert.Equal(t, int64(2), pulled.Load())
	sub.sub.Cancel()
	for _, m := range sub.received()[3:] {
		require.NoError(t, m.Ack(t.Context()))
	}
	require.NoError(t, src.Close(testCtx(t)))
}

// A panic in the try function fails the stream like one in pull, and the
// source's goroutine ends (goleak checks it at the end of the package).
func TestPullSource_TryPullPanicFails(t *testing.T) {
	src := messaging.NewPullSource("in", func(ctx context.Context) (messaging.Message[int], error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, messaging.WithTryPull(func() (messaging.Message[int], bool) { panic("try") }))
	sub := &subscriberOf[int]{n: 1}
	src.Subscribe(sub)
	_, err := sub.terminal()
	require.ErrorIs(t, err, reactive.ErrPanic)
	assert.False(t, src.Health().Live)
	require.NoError(t, src.Close(testCtx(t)))
}

func TestPullSource_TryPullOfAnotherType(t *testing.T) {
	assert.Panics(t, func() {
		messaging.NewPullSource("in", func(context.Context) (messaging.Message[int], error) { return nil, io.EOF },
			messaging.WithTryPull(func() (messaging.Message[string], bool) { return nil, false }))
	})
}

// With WithInlineSend the send runs, and the message is settled, before
// OnNext returns; a failed send nacks.
func TestFuncSink_InlineSend(t *testing.T) {
	var sent []string
	sink := messaging.NewFuncSink("out", func(_ context.Context, m messaging.Message[string]) error {
		sent = append(sent, m.Payload()) // no lock: every send runs on this test's goroutine
		if m.Payload() == "bad" {
			return errBoom
		}
		return nil
	}, messaging.WithInlineSend(), messaging.WithSinkWindow(2))
	up := &demandLog{}
	up.Subscribe(sink)
	c := newCounter()
	for i, v := range []string{"a", "bad", "c"} {
		up.s.OnNext(c.msg(v))
		acks, nacks := c.counts()
		require.Equal(t, i+1, acks+nacks, "settled within OnNext")
	}
	assert.Equal(t, []string{"a", "bad", "c"}, sent)
	acks, nacks := c.counts()
	assert.Equal(t, 2, acks)
	assert.Equal(t, 1, nacks)
	assert.Positive(t, up.outstanding(3), "topped up within OnNext")
	up.s.OnComplete()
	<-sink.Drained()
	require.NoError(t, sink.Close(testCtx(t)))
	up.s.OnNext(c.msg("late"))
	_, nacks = c.counts()
	assert.Equal(t, 2, nacks, "after Close a message is nacked")
}
