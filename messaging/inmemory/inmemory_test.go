package inmemory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventuallyWithin bounds every testwait.Eventually of these tests: delivery and settlement
// are asynchronous (one goroutine per subscription and per sink).
const eventuallyWithin = 10 * time.Second

func cfg(c *inmemory.Connector, ch string, d messaging.Direction, attrs map[string]string) messaging.ChannelConfig {
	return messaging.NewChannelConfig(ch, inmemory.Name, d, attrs, c.Attributes())
}

// recorder is a subscriber recording what it receives; it requests n at
// OnSubscribe and never settles.
type recorder struct {
	n    int64
	mu   sync.Mutex
	sub  reactive.Subscription
	msgs []messaging.Message[[]byte]
	err  error
	done bool
}

func (r *recorder) OnSubscribe(s reactive.Subscription) {
	r.mu.Lock()
	r.sub = s
	r.mu.Unlock()
	if r.n > 0 {
		s.Request(r.n)
	}
}

func (r *recorder) OnNext(m messaging.Message[[]byte]) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *recorder) OnError(err error) { r.mu.Lock(); r.err = err; r.mu.Unlock() }
func (r *recorder) OnComplete()       { r.mu.Lock(); r.done = true; r.mu.Unlock() }

func (r *recorder) received() []messaging.Message[[]byte] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]messaging.Message[[]byte](nil), r.msgs...)
}

func (r *recorder) terminal() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done, r.err
}

func TestAttributes(t *testing.T) {
	c := inmemory.New()
	assert.Equal(t, "in-memory", c.Name())
	got := map[string]string{}
	for _, a := range c.Attributes() {
		got[a.Name] = a.Default
	}
	assert.Equal(t, map[string]string{"max-inflight": "256", "auto-ack": "true", "window": "16"}, got)

	_, err := c.NewSource(ctx(t), cfg(c, "zero", messaging.Incoming, map[string]string{"max-inflight": "0"}))
	require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
	_, err = c.NewSource(ctx(t), cfg(c, "nan", messaging.Incoming, map[string]string{"max-inflight": "many"}))
	require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
	_, err = c.NewSink(ctx(t), cfg(c, "w0", messaging.Outgoing, map[string]string{"window": "0"}))
	require.ErrorIs(t, err, messaging.ErrInvalidAttribute)
	_, err = c.NewSink(ctx(t), cfg(c, "ab", messaging.Outgoing, map[string]string{"auto-ack": "maybe"}))
	require.ErrorIs(t, err, messaging.ErrInvalidAttribute)

	_, err = c.NewSource(ctx(t), cfg(c, "in", messaging.Incoming, nil))
	require.NoError(t, err)
	_, err = c.NewSource(ctx(t), cfg(c, "in", messaging.Incoming, nil))
	require.ErrorIs(t, err, inmemory.ErrInUse)
	_, err = c.NewSink(ctx(t), cfg(c, "out", messaging.Outgoing, nil))
	require.NoError(t, err)
	_, err = c.NewSink(ctx(t), cfg(c, "out", messaging.Outgoing, nil))
	require.ErrorIs(t, err, inmemory.ErrInUse)

	// 1 is the smallest max-inflight and window.
	_, err = c.NewSource(ctx(t), cfg(c, "one", messaging.Incoming, map[string]string{"max-inflight": "1"}))
	require.NoError(t, err)
	_, err = c.NewSink(ctx(t), cfg(c, "one", messaging.Outgoing, map[string]string{"window": "1"}))
	require.NoError(t, err)

	// A handle subscribed to directly made its channel end, with the default attributes: the
	// runtime can no longer create it with its own.
	c.Source("direct").Subscribe(&recorder{})
	_, err = c.NewSource(ctx(t), cfg(c, "direct", messaging.Incoming, nil))
	require.ErrorIs(t, err, inmemory.ErrInUse)
	(&requestLog{}).Subscribe(c.Sink("direct"))
	_, err = c.NewSink(ctx(t), cfg(c, "direct", messaging.Outgoing, nil))
	require.ErrorIs(t, err, inmemory.ErrInUse)
	require.NoError(t, c.Source("direct").Close(ctx(t)))
	require.NoError(t, c.Sink("direct").Close(ctx(t)))
	assert.Len(t, c.Configs(), 8, "configs of the accepted and the in-use calls")
}

// Backpressure: with unbounded demand and a stalled subscriber, never more
// than max-inflight messages are unsettled; each settlement lets one more in.
func TestSource_MaxInflight(t *testing.T) {
	c := inmemory.New()
	src, err := c.NewSource(ctx(t), cfg(c, "in", messaging.Incoming, map[string]string{"max-inflight": "3"}))
	require.NoError(t, err)
	h := c.Source("in")
	rec := &recorder{n: reactive.Unbounded}
	for i := range 10 {
		h.SendString(string(rune('a' + i)))
	}
	src.Subscribe(rec)
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) == 3 }, "3 delivered")
	time.Sleep(10 * time.Millisecond) // a fourth would arrive now if the bound leaked
	assert.Len(t, rec.received(), 3)
	assert.Equal(t, 3, h.InFlight())
	for i := range 7 {
		require.NoError(t, rec.received()[i].Ack(t.Context()))
		testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) == 4+i }, "one more per settlement")
		assert.LessOrEqual(t, h.InFlight(), 3)
	}
	require.NoError(t, rec.received()[7].Nack(t.Context(), errors.New("x"), messaging.RedeliverAfter(time.Second)))
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) == 10 }, "all delivered")
	a, n := h.Counts()
	assert.Equal(t, 7, a)
	assert.Equal(t, 1, n)
	st := h.Settlements()
	assert.Equal(t, time.Second, st[len(st)-1].Options.Delay)
	h.Complete()
	testwait.Eventually(t, eventuallyWithin, func() bool { done, _ := rec.terminal(); return done }, "completed")
	assert.False(t, src.Health().Live, "a completed source is not live")
}

// Without demand nothing is delivered; demand is honoured exactly.
func TestSource_DemandAndTerminals(t *testing.T) {
	c := inmemory.New()
	src, err := c.NewSource(ctx(t), cfg(c, "in", messaging.Incoming, nil))
	require.NoError(t, err)
	h := c.Source("in")
	h.Send([]byte("x"), struct{ K string }{"k"})
	h.SendString("y")
	rec := &recorder{}
	src.Subscribe(rec)
	assert.Empty(t, rec.received(), "no demand, no delivery")
	assert.True(t, src.Health().Started)
	rec.sub.Request(1)
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) == 1 }, "1 delivered")
	md, ok := messaging.MetadataOf[struct{ K string }](rec.received()[0].Metadata())
	assert.True(t, ok)
	assert.Equal(t, "k", md.K)

	second := &recorder{n: 1}
	src.Subscribe(second)
	_, err = second.terminal()
	require.ErrorIs(t, err, reactive.ErrAlreadySubscribed, "unicast")

	h.Fail(errors.New("broken")) // without outstanding demand
	_, err = rec.terminal()
	require.EqualError(t, err, "broken", "signalled at once")
	hl := src.Health()
	assert.False(t, hl.Live)
	assert.False(t, hl.Ready)
	assert.Equal(t, "broken", hl.Reason)
}

// Close stops delivering and waits for in-flight settlements until ctx;
// subscribing to a closed source gives OnError(ErrClosed).
func TestSource_Close(t *testing.T) {
	c := inmemory.New()
	src, err := c.NewSource(ctx(t), cfg(c, "in", messaging.Incoming, nil))
	require.NoError(t, err)
	h := c.Source("in")
	rec := &recorder{n: 10}
	src.Subscribe(rec)
	h.SendString("a")
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) == 1 }, "1 delivered")
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, src.Close(short), context.DeadlineExceeded, "one unsettled")
	h.SendString("b")
	testwait.Eventually(t, eventuallyWithin, func() bool { done, _ := rec.terminal(); return done }, "Close completes the stream")
	assert.Len(t, rec.received(), 1, "closed: nothing more delivered")
	require.NoError(t, rec.received()[0].Ack(t.Context()))
	require.NoError(t, src.Close(ctx(t)))

	c2 := inmemory.New()
	closed, err := c2.NewSource(ctx(t), cfg(c2, "in", messaging.Incoming, nil))
	require.NoError(t, err)
	require.NoError(t, closed.Close(ctx(t)))
	late := &recorder{n: 1}
	closed.Subscribe(late)
	_, err = late.terminal()
	require.ErrorIs(t, err, messaging.ErrClosed)
}

// requestLog is a publisher recording the subscriber's requests and emitting
// one element per requested unit when told to.
type requestLog struct {
	mu       sync.Mutex
	requests []int64
	s        reactive.Subscriber[messaging.Message[[]byte]]
	acks     int
	nacks    []error
}

func (p *requestLog) Subscribe(s reactive.Subscriber[messaging.Message[[]byte]]) {
	p.s = s
	s.OnSubscribe(p)
}

func (p *requestLog) Request(n int64) { p.mu.Lock(); p.requests = append(p.requests, n); p.mu.Unlock() }
func (*requestLog) Cancel()           {}

func (p *requestLog) outstanding(delivered int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sum int64
	for _, n := range p.requests {
		sum += n
	}
	return sum - int64(delivered)
}

func (p *requestLog) msg(v string) messaging.Message[[]byte] {
	return messaging.NewMessage([]byte(v),
		messaging.WithAckFunc(func(context.Context) error { p.mu.Lock(); p.acks++; p.mu.Unlock(); return nil }),
		messaging.WithNackFunc(func(_ context.Context, r error, _ messaging.NackOptions) error {
			p.mu.Lock()
			p.nacks = append(p.nacks, r)
			p.mu.Unlock()
			return nil
		}))
}

// The sink requests its window upstream and never has more than window
// outstanding; auto-ack acks on receipt.
func TestSink_WindowAndAutoAck(t *testing.T) {
	c := inmemory.New()
	sink, err := c.NewSink(ctx(t), cfg(c, "out", messaging.Outgoing, map[string]string{"window": "4"}))
	require.NoError(t, err)
	up := &requestLog{}
	up.Subscribe(sink)
	assert.Equal(t, []int64{4}, up.requests, "the first request is the window")
	assert.True(t, sink.Health().Started)
	for i := range 20 {
		testwait.Eventually(t, eventuallyWithin, func() bool { return up.outstanding(i) > 0 }, "demand for the next message")
		up.s.OnNext(up.msg("m"))
		assert.LessOrEqual(t, up.outstanding(i+1), int64(4), "more than the window outstanding")
	}
	assert.Greater(t, len(up.requests), 1, "topped up")
	testwait.Eventually(t, eventuallyWithin, func() bool { up.mu.Lock(); defer up.mu.Unlock(); return up.acks == 20 }, "auto-ack")
	assert.Len(t, c.Sink("out").Payloads(), 20)
	up.s.OnComplete()
	done, ferr := c.Sink("out").Terminal()
	assert.True(t, done)
	require.NoError(t, ferr)
	require.NoError(t, sink.Close(ctx(t)))
}

// Without auto-ack the test settles; Close nacks the unsettled with ErrClosed.
func TestSink_ManualSettlementAndClose(t *testing.T) {
	c := inmemory.New()
	sink, err := c.NewSink(ctx(t), cfg(c, "out", messaging.Outgoing, map[string]string{"auto-ack": "false"}))
	require.NoError(t, err)
	up := &requestLog{}
	up.Subscribe(sink)
	up.s.OnNext(up.msg("a"))
	up.s.OnNext(up.msg("b"))
	require.NoError(t, c.Sink("out").Wait(ctx(t), 2))
	assert.Zero(t, up.acks, "nothing settled on receipt")
	require.NoError(t, c.Sink("out").Messages()[0].Ack(t.Context()))
	require.NoError(t, sink.Close(ctx(t)))
	assert.Equal(t, 1, up.acks)
	require.Len(t, up.nacks, 1)
	require.ErrorIs(t, up.nacks[0], messaging.ErrClosed)
	assert.False(t, sink.Health().Ready, "closed")
	up.s.OnError(errors.New("late"))
	done, cancel := context.WithCancel(ctx(t))
	cancel() // the stream's end answers before ctx does
	require.ErrorContains(t, c.Sink("out").Wait(done, 3), "ended after 2 of 3 messages")
}

// A handle used before the runtime creates its channel end (a health check, a Wait begun
// early) leaves the channel's attributes to that creation.
func TestHandlesUsedBeforeTheChannelTakeItsAttributes(t *testing.T) {
	c := inmemory.New()
	for _, h := range []messaging.ChannelHealth{c.Source("in").Health(), c.Sink("out").Health()} {
		assert.False(t, h.Started, "not subscribed yet")
	}
	assert.Zero(t, c.Source("in").InFlight())
	early, cancel := context.WithCancel(ctx(t))
	cancel()
	require.ErrorIs(t, c.Sink("out").Wait(early, 1), context.Canceled)

	src, err := c.NewSource(ctx(t), cfg(c, "in", messaging.Incoming, map[string]string{"max-inflight": "2"}))
	require.NoError(t, err)
	sink, err := c.NewSink(ctx(t), cfg(c, "out", messaging.Outgoing, map[string]string{"auto-ack": "false", "window": "3"}))
	require.NoError(t, err)

	h := c.Source("in")
	for range 5 {
		h.SendString("m")
	}
	rec := &recorder{n: reactive.Unbounded}
	src.Subscribe(rec)
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) == 2 }, "2 delivered")
	time.Sleep(10 * time.Millisecond) // a third would arrive now if max-inflight were not 2
	assert.Len(t, rec.received(), 2)

	up := &requestLog{}
	up.Subscribe(sink)
	assert.Equal(t, []int64{3}, up.requests, "the window")
	up.s.OnNext(up.msg("a"))
	require.NoError(t, c.Sink("out").Wait(ctx(t), 1))
	up.mu.Lock()
	assert.Zero(t, up.acks, "auto-ack=false: nothing settled on receipt")
	up.mu.Unlock()
	require.NoError(t, sink.Close(ctx(t)))
	for i := range 5 { // each ack lets one more in
		testwait.Eventually(t, eventuallyWithin, func() bool { return len(rec.received()) > i }, "the next delivery")
		require.NoError(t, rec.received()[i].Ack(t.Context()))
	}
	require.NoError(t, src.Close(ctx(t)))

	// A Close before the channel exists closes it when it is created.
	require.NoError(t, c.Source("closed").Close(ctx(t)))
	require.NoError(t, c.Sink("closed").Close(ctx(t)))
	closedSrc, err := c.NewSource(ctx(t), cfg(c, "closed", messaging.Incoming, nil))
	require.NoError(t, err)
	closedSink, err := c.NewSink(ctx(t), cfg(c, "closed", messaging.Outgoing, nil))
	require.NoError(t, err)
	late := &recorder{n: 1}
	closedSrc.Subscribe(late)
	_, err = late.terminal()
	require.ErrorIs(t, err, messaging.ErrClosed, "the source was created closed")
	up = &requestLog{}
	up.Subscribe(closedSink)
	assert.Empty(t, up.requests, "the sink was created closed: it requests nothing")

	boom := errors.New("boom")
	c.Source("failed").Fail(boom)
	assert.False(t, c.Source("failed").Health().Live, "failed before the channel exists")
	failed, err := c.NewSource(ctx(t), cfg(c, "failed", messaging.Incoming, nil))
	require.NoError(t, err)
	rec = &recorder{n: 1}
	failed.Subscribe(rec)
	testwait.Eventually(t, eventuallyWithin, func() bool { _, err := rec.terminal(); return err != nil }, "the failure reaches the subscriber")
	_, err = rec.terminal()
	require.ErrorIs(t, err, boom)
}
