package messaging_test

import (
	"context"
	"io"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// closedSource is the failed state of every building-block source: a
// subscriber after Close gets OnSubscribe then OnError(ErrClosed).
func closedSource(t *testing.T, s *messaging.PullSource[int]) reactive.Publisher[messaging.Message[int]] {
	t.Helper()
	require.NoError(t, s.Close(t.Context()))
	return s
}

func blockOptions() tck.Options {
	o := tckOptions
	o.MaxSubscribers = 1
	return o
}

func TestTCK_PullSource(t *testing.T) {
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			var i int64
			return messaging.NewPullSource("tck", func(context.Context) (messaging.Message[int], error) {
				if n != reactive.Unbounded && i >= n {
					return nil, io.EOF
				}
				i++
				return element(int(i % (1 << 30))), nil
			})
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[messaging.Message[int]] {
			t.Helper()
			return closedSource(t, messaging.NewPullSource("tck", func(context.Context) (messaging.Message[int], error) { return nil, io.EOF }))
		},
	}, blockOptions())
}

// TestTCK_ChanSource feeds the channel from a goroutine that stops at the
// end of the test, so the math.MaxInt32 of required_spec317 costs only what
// is read.
func TestTCK_ChanSource(t *testing.T) {
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(t *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			t.Helper()
			ch := make(chan messaging.Message[int])
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := int64(0); n == reactive.Unbounded || i < n; i++ {
					select {
					case ch <- element(int(i % (1 << 30))):
					case <-stop:
						return
					}
				}
				close(ch)
			})
			t.Cleanup(func() { close(stop); wg.Wait() })
			return messaging.NewChanSource("tck", ch)
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[messaging.Message[int]] {
			t.Helper()
			return closedSource(t, messaging.NewChanSource("tck", make(chan messaging.Message[int])))
		},
	}, blockOptions())
}

func counted(n int64) iter.Seq2[messaging.Message[int], error] {
	return func(yield func(messaging.Message[int], error) bool) {
		for i := int64(0); n == reactive.Unbounded || i < n; i++ {
			if !yield(element(int(i%(1<<30))), nil) {
				return
			}
		}
	}
}

func TestTCK_SeqSource(t *testing.T) {
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			return messaging.NewSeqSource("tck", counted(n))
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[messaging.Message[int]] {
			t.Helper()
			return closedSource(t, messaging.NewSeqSource("tck", counted(0)))
		},
	}, blockOptions())
}

func TestTCK_FuncSinkBlackbox(t *testing.T) {
	for _, conc := range []int{1, 3} {
		t.Run("concurrency "+string(rune('0'+conc)), func(t *testing.T) {
			tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[messaging.Message[int]]{
				Create: func(*testing.T) reactive.Subscriber[messaging.Message[int]] {
					return messaging.NewFuncSink("tck", func(context.Context, messaging.Message[int]) error { return nil },
						messaging.WithSendConcurrency(conc))
				},
				Element: element,
			}, tckOptions)
		})
	}
}

// subscriberOf requests n at OnSubscribe and records what it receives.
type subscriberOf[T any] struct {
	n    int64
	mu   sync.Mutex
	sub  reactive.Subscription
	got  []messaging.Message[T]
	err  error
	done bool
}

func (s *subscriberOf[T]) OnSubscribe(sub reactive.Subscription) {
	s.mu.Lock()
	s.sub = sub
	s.mu.Unlock()
	sub.Request(s.n)
}

func (s *subscriberOf[T]) OnNext(m messaging.Message[T]) {
	s.mu.Lock()
	s.got = append(s.got, m)
	s.mu.Unlock()
}

func (s *subscriberOf[T]) OnError(err error) { s.mu.Lock(); s.err = err; s.mu.Unlock() }
func (s *subscriberOf[T]) OnComplete()       { s.mu.Lock(); s.done = true; s.mu.Unlock() }

func (s *subscriberOf[T]) received() []messaging.Message[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]messaging.Message[T](nil), s.got...)
}

func (s *subscriberOf[T]) terminal() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done, s.err
}

// The pull source never has more than WithMaxInflight unsettled; a
// settlement reaches the original message and frees a slot.
func TestPullSource_MaxInflightAndSettlement(t *testing.T) {
	c := newCounter()
	var pulled atomic.Int64
	src := messaging.NewPullSource("in", func(context.Context) (messaging.Message[string], error) {
		pulled.Add(1)
		return c.msg("m"), nil
	}, messaging.WithMaxInflight(3))
	sub := &subscriberOf[string]{n: reactive.Unbounded}
	src.Subscribe(sub)
	testwait.Eventually(t, waitTimeout, func() bool { return len(sub.received()) == 3 }, "3 delivered")
	time.Sleep(20 * time.Millisecond) // a fourth would come now if the bound leaked
	assert.Len(t, sub.received(), 3)
	assert.Equal(t, 3, src.InFlight())
	require.NoError(t, sub.received()[0].Ack(t.Context()))
	require.NoError(t, sub.received()[1].Nack(t.Context(), errBoom, messaging.ToDeadLetter()))
	testwait.Eventually(t, waitTimeout, func() bool { return len(sub.received()) == 5 }, "two more after two settlements")
	acks, nacks := c.counts()
	assert.Equal(t, 1, acks)
	assert.Equal(t, 1, nacks)
	sub.sub.Cancel()
	for _, m := range sub.received()[2:] {
		require.NoError(t, m.Ack(t.Context()))
	}
	require.NoError(t, src.Close(testCtx(t)))
}

// io.EOF completes the stream and ends liveness; another error fails it.
func TestPullSource_TerminalsAndHealth(t *testing.T) {
	eof := messaging.NewPullSource("a", func(context.Context) (messaging.Message[int], error) { return nil, io.EOF })
	assert.False(t, eof.Health().Started)
	s1 := &subscriberOf[int]{n: 1}
	eof.Subscribe(s1)
	testwait.Eventually(t, waitTimeout, func() bool { done, _ := s1.terminal(); return done }, "completed")
	h := eof.Health()
	assert.True(t, h.Started)
	assert.False(t, h.Live, "a completed source is not live")
	assert.True(t, h.Completed)

	failing := messaging.NewPullSource("b", func(context.Context) (messaging.Message[int], error) { return nil, errBoom })
	s2 := &subscriberOf[int]{n: 1}
	failing.Subscribe(s2)
	testwait.Eventually(t, waitTimeout, func() bool { _, err := s2.terminal(); return err != nil }, "failed")
	_, err := s2.terminal()
	require.ErrorIs(t, err, errBoom)
	assert.False(t, failing.Health().Live)
	assert.Contains(t, failing.Health().Reason, errBoom.Error())

	panicking := messaging.NewPullSource("c", func(context.Context) (messaging.Message[int], error) { panic("pull") })
	s3 := &subscriberOf[int]{n: 1}
	panicking.Subscribe(s3)
	testwait.Eventually(t, waitTimeout, func() bool { _, err := s3.terminal(); return err != nil }, "failed")
	_, err = s3.terminal()
	require.ErrorIs(t, err, reactive.ErrPanic)

	nilMsg := messaging.NewPullSource("d", func(context.Context) (messaging.Message[int], error) {
		return nil, nil //nolint:nilnil // the faulty pull function under test
	})
	s4 := &subscriberOf[int]{n: 1}
	nilMsg.Subscribe(s4)
	testwait.Eventually(t, waitTimeout, func() bool { _, err := s4.terminal(); return err != nil }, "failed")
	_, err = s4.terminal()
	require.ErrorIs(t, err, messaging.ErrNilMessage)
}

// Close cancels a blocked pull, completes the stream (an orderly end: still
// live) and waits for the unsettled messages until its ctx.
func TestPullSource_Close(t *testing.T) {
	ch := make(chan messaging.Message[string], 1)
	c := newCounter()
	ch <- c.msg("a")
	src := messaging.NewChanSource("in", ch)
	sub := &subscriberOf[string]{n: 10}
	src.Subscribe(sub)
	testwait.Eventually(t, waitTimeout, func() bool { return len(sub.received()) == 1 }, "delivered")
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, src.Close(short), context.DeadlineExceeded, "one unsettled")
	testwait.Eventually(t, waitTimeout, func() bool { done, _ := sub.terminal(); return done }, "Close completes the stream")
	h := src.Health()
	assert.True(t, h.Live, "completion by Close is the orderly end")
	assert.False(t, h.Ready)
	require.NoError(t, sub.received()[0].Ack(t.Context()))
	require.NoError(t, src.Close(testCtx(t)))

	late := &subscriberOf[string]{n: 1}
	src.Subscribe(late)
	_, err := late.terminal()
	require.ErrorIs(t, err, messaging.ErrClosed)
}

func TestSeqSource_ErrorFails(t *testing.T) {
	src := messaging.NewSeqSource("in", func(yield func(messaging.Message[int], error) bool) {
		if yield(messaging.NewMessage(1), nil) {
			yield(nil, errBoom)
		}
	})
	sub := &subscriberOf[int]{n: 5}
	src.Subscribe(sub)
	testwait.Eventually(t, waitTimeout, func() bool { _, err := sub.terminal(); return err != nil }, "failed")
	assert.Len(t, sub.received(), 1)
	assert.False(t, src.Health().Live)
}

// The func sink acks what send accepted and nacks what it refused, runs at
// most WithSendConcurrency sends at once and never has more than its window
// requested.
func TestFuncSink_ConcurrencyAndSettlement(t *testing.T) {
	var running, peak atomic.Int32
	release := make(chan struct{})
	sink := messaging.NewFuncSink("out", func(_ context.Context, m messaging.Message[string]) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		if m.Payload() == "bad" {
			return messaging.NackWith(errBoom, messaging.ToDeadLetter())
		}
		return nil
	}, messaging.WithSendConcurrency(2), messaging.WithSinkWindow(4))
	up := &demandLog{}
	up.Subscribe(sink)
	assert.Equal(t, int64(4), up.outstanding(0), "the window")
	assert.True(t, sink.Health().Started)
	c := newCounter()
	for _, v := range []string{"a", "bad", "c", "d"} {
		up.s.OnNext(c.msg(v))
	}
	testwait.Eventually(t, waitTimeout, func() bool { return running.Load() == 2 }, "two sends at once")
	close(release)
	c.wait(t, 4)
	acks, nacks := c.counts()
	assert.Equal(t, 3, acks)
	assert.Equal(t, 1, nacks)
	assert.Equal(t, int32(2), peak.Load())
	testwait.Eventually(t, waitTimeout, func() bool { return up.outstanding(4) > 0 }, "topped up after the sends")
	assert.LessOrEqual(t, up.outstanding(4), int64(4))
	up.s.OnComplete()
	assert.False(t, sink.Health().Live, "a completed sink is not live")
	require.NoError(t, sink.Close(testCtx(t)))
}

// Close nacks the queued messages with ErrClosed and, at its deadline,
// cancels the running send.
func TestFuncSink_Close(t *testing.T) {
	started := make(chan struct{}, 1)
	sink := messaging.NewFuncSink("out", func(ctx context.Context, _ messaging.Message[string]) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, messaging.WithSinkWindow(3))
	up := &demandLog{}
	up.Subscribe(sink)
	c := newCounter()
	up.s.OnNext(c.msg("running"))
	up.s.OnNext(c.msg("queued"))
	<-started
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, sink.Close(short), context.DeadlineExceeded)
	c.wait(t, 2)
	_, nacks := c.counts()
	assert.Equal(t, 2, nacks)
	for _, r := range c.reasons {
		require.ErrorIs(t, r, messaging.ErrClosed)
	}
	assert.True(t, up.cancelled.Load(), "Close cancels the upstream")
	assert.False(t, sink.Health().Ready)
	up.s.OnNext(c.msg("late"))
	c.wait(t, 3)
}

func TestFuncSink_PanicNacks(t *testing.T) {
	sink := messaging.NewFuncSink("out", func(context.Context, messaging.Message[string]) error { panic("send") })
	up := &demandLog{}
	up.Subscribe(sink)
	c := newCounter()
	up.s.OnNext(c.msg("x"))
	c.wait(t, 1)
	require.Len(t, c.reasons, 1)
	require.ErrorIs(t, c.reasons[0], reactive.ErrPanic)
	up.s.OnError(errBoom)
	assert.False(t, sink.Health().Live)
	require.NoError(t, sink.Close(testCtx(t)))
}

// demandLog is an upstream recording the sink's requests.
type demandLog struct {
	mu        sync.Mutex
	requested int64
	cancelled atomic.Bool
	s         reactive.Subscriber[messaging.Message[string]]
}

func (p *demandLog) Subscribe(s reactive.Subscriber[messaging.Message[string]]) {
	p.s = s
	s.OnSubscribe(p)
}

func (p *demandLog) Request(n int64) { p.mu.Lock(); p.requested += n; p.mu.Unlock() }
func (p *demandLog) Cancel()         { p.cancelled.Store(true) }

func (p *demandLog) outstanding(delivered int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requested - int64(delivered)
}

type countingSettler struct{ acks, nacks atomic.Int32 }

func (c *countingSettler) Ack(context.Context) error { c.acks.Add(1); return nil }
func (c *countingSettler) Nack(_ context.Context, _ error, o messaging.NackOptions) error {
	if o.Disposition == messaging.DeadLetter {
		c.nacks.Add(1)
	}
	return nil
}

// A message settled through a Settler settles once, also through a derived
// message, and passes the nack options.
func TestNewSettledMessage(t *testing.T) {
	s := &countingSettler{}
	m := messaging.NewSettledMessage([]byte("x"), messaging.NewMetadata(tag("md")), s)
	tg, ok := messaging.MetadataOf[tag](m.Metadata())
	assert.True(t, ok)
	assert.Equal(t, tag("md"), tg)
	d := messaging.WithPayload(m, "derived")
	require.NoError(t, d.Nack(t.Context(), errBoom, messaging.ToDeadLetter()))
	require.ErrorIs(t, m.Ack(t.Context()), messaging.ErrAlreadySettled)
	assert.Equal(t, int32(0), s.acks.Load())
	assert.Equal(t, int32(1), s.nacks.Load())
	assert.Panics(t, func() { messaging.NewSettledMessage(1, messaging.Metadata{}, nil) })
}
