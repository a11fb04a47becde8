package messaging_test

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// In-flight messages settle before sinks close: the sink (manual acks) holds
// messages; Shutdown waits until the test acks them.
func TestShutdown_DrainsInFlightBeforeClosing(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.incoming.in.connector":  "in-memory",
		"mp.messaging.outgoing.out.connector": "in-memory",
		"mp.messaging.outgoing.out.auto-ack":  "false",
	})
	messaging.Process(rt, "in", "out", id[[]byte])
	start(t, rt)
	src, sink := conn.Source("in"), conn.Sink("out")
	for i := range 5 {
		src.SendString(strconv.Itoa(i))
	}
	require.NoError(t, sink.Wait(testCtx(t), 5))
	src.SendString("late") // may or may not enter before intake stops
	done := make(chan error, 1)
	go func() { done <- rt.Shutdown(testCtx(t)) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned before the in-flight messages settled: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	for _, m := range sink.Messages()[:5] {
		require.NoError(t, m.Ack(t.Context()))
	}
	// "late" may have entered; ack whatever else arrived.
	testwait.Eventually(t, waitTimeout, func() bool {
		for _, m := range sink.Messages() {
			_ = m.Ack(t.Context())
		}
		return src.InFlight() == 0
	}, "drained")
	require.NoError(t, <-done)
	a, n := src.Counts()
	assert.GreaterOrEqual(t, a, 5)
	// "late" may have been pulled but not delivered when intake stopped: it
	// is then nacked with ErrClosed (redelivered by a broker), never lost.
	for _, st := range src.Settlements() {
		if !st.Acked {
			assert.Equal(t, "late", string(st.Payload))
			require.ErrorIs(t, st.Reason, messaging.ErrClosed)
		}
	}
	assert.LessOrEqual(t, n, 1)
}

func TestShutdown_DeadlineNacksTheRest(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	stuck := make(chan struct{})
	messaging.Consume(rt, "in", func(ctx context.Context, _ []byte) error {
		close(stuck)
		<-ctx.Done() // cancelled at the deadline
		return ctx.Err()
	})
	start(t, rt)
	conn.Source("in").SendString("x")
	<-stuck
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := rt.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "1 message(s) unsettled")
	st := conn.Source("in").Settlements()
	require.Len(t, st, 1)
	require.ErrorIs(t, st[0].Reason, messaging.ErrShutdown)
	require.ErrorIs(t, rt.Shutdown(t.Context()), context.DeadlineExceeded, "idempotent: same result")
}

func TestShutdown_BeforeStart(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "a")
	messaging.Consume(rt, "a", nop[string])
	require.NoError(t, rt.Shutdown(t.Context()))
	_, err := em.Emit("x")
	require.ErrorIs(t, err, messaging.ErrEmitterTerminated)
	require.ErrorIs(t, rt.Start(t.Context()), messaging.ErrClosed)
}

func TestRegistrationPanics(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	assert.Panics(t, func() { messaging.Consume[string](nil, "a", nop[string]) })
	assert.Panics(t, func() { messaging.Consume[string](rt, "a", nil) })
	assert.Panics(t, func() { messaging.Subscribe[string](rt, "a", nil) })
	assert.Panics(t, func() { messaging.Produce[string](rt, "a", nil) })
	em := messaging.NewEmitter[string](rt, "a")
	messaging.Consume(rt, "a", nop[string])
	start(t, rt)
	_ = em
	assert.Panics(t, func() { messaging.Consume(rt, "b", nop[string]) }, "after Start")
}

// TestMPRM_ShapeTests: values flow from Produce through every processor shape
// to Consume, in order (SimpleIncomingTest, ProcessorChainTest,
// {Subscriber,Processor,Publisher}ShapeTest).
func TestMPRM_ShapeTests(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	msgs := make([]messaging.Message[int], 5)
	for i := range msgs {
		msgs[i] = messaging.NewMessage(i)
	}
	messaging.Produce(rt, "p", reactive.FromSlice(msgs...))
	messaging.Process(rt, "p", "a", func(_ context.Context, v int) (int, error) { return v * 10, nil })
	messaging.ProcessMessage(rt, "a", "b", func(_ context.Context, m messaging.Message[int]) (messaging.Message[string], error) {
		return messaging.WithPayload(m, strconv.Itoa(m.Payload())), nil
	})
	messaging.FlatMap(rt, "b", "c", func(_ context.Context, s string) reactive.Publisher[string] {
		return reactive.FromSlice(s, s+"!")
	})
	messaging.Transform(rt, "c", "d", func(up reactive.Publisher[messaging.Message[string]]) reactive.Publisher[messaging.Message[string]] {
		return reactive.Filter(up, func(m messaging.Message[string]) bool { return len(m.Payload()) < 3 })
	})
	got := make(chan string, 20)
	messaging.Consume(rt, "d", func(_ context.Context, s string) error { got <- s; return nil })
	n := 0
	messaging.Generate(rt, "g", func(context.Context) (int, error) {
		n++
		if n > 3 {
			return 0, io.EOF
		}
		return n, nil
	})
	gen := make(chan int, 4)
	sub := &intCollector{ch: gen}
	messaging.Subscribe[int](rt, "g", sub)
	start(t, rt)
	var vs []string
	for range 6 { // 0,0!,10,20,30,40: the filter drops 10!,20!,30!,40! (three characters)
		vs = append(vs, <-got)
	}
	assert.Equal(t, []string{"0", "0!", "10", "20", "30", "40"}, vs)
	assert.Equal(t, 1, <-gen)
	assert.Equal(t, 2, <-gen)
	assert.Equal(t, 3, <-gen)
	testwait.Eventually(t, waitTimeout, sub.completed.Load, "Generate completes on io.EOF")
}

type intCollector struct {
	ch        chan int
	sub       reactive.Subscription
	completed atomicBool
}

func (c *intCollector) OnSubscribe(s reactive.Subscription) { c.sub = s; s.Request(1) }
func (c *intCollector) OnNext(m messaging.Message[int])     { c.ch <- m.Payload(); c.sub.Request(1) }
func (*intCollector) OnError(error)                         {}
func (c *intCollector) OnComplete()                         { c.completed.Store(true) }

func TestMessage_SettleOnceAndMetadata(t *testing.T) {
	c := newCounter()
	m := c.msg("a")
	d := messaging.WithMetadataItems(messaging.WithPayload(m, 42), metaA{1})
	require.NoError(t, d.Ack(t.Context()))
	require.ErrorIs(t, m.Ack(t.Context()), messaging.ErrAlreadySettled, "one shared guard")
	require.ErrorIs(t, m.Nack(t.Context(), errBoom), messaging.ErrAlreadySettled)
	a, _ := c.counts()
	assert.Equal(t, 1, a)
	v, ok := messaging.MetadataOf[metaA](d.Metadata())
	assert.True(t, ok)
	assert.Equal(t, metaA{1}, v)
	_, ok = messaging.MetadataOf[metaA](m.Metadata())
	assert.False(t, ok, "metadata is immutable")
	md := messaging.NewMetadata(metaA{1}, metaB{"x"}, metaA{2})
	assert.Equal(t, 2, md.Len())
	v, _ = messaging.MetadataOf[metaA](md)
	assert.Equal(t, metaA{2}, v, "the later item of a type wins")
	assert.Equal(t, 1, md.Without(metaB{}).Len())
	plain := messaging.NewMessage("p")
	require.NoError(t, plain.Ack(t.Context()))
	require.NoError(t, plain.Ack(t.Context()), "no settlement functions: nothing to settle")
	assert.Panics(t, func() { _ = c.msg("b").Nack(t.Context(), nil) })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	slow := messaging.NewMessage("s", messaging.WithAckFunc(func(ctx context.Context) error { return ctx.Err() }))
	require.ErrorIs(t, slow.Ack(ctx), context.Canceled)
	require.ErrorIs(t, slow.Ack(t.Context()), messaging.ErrAlreadySettled, "stays settled")
	done := messaging.NewMessage("d", messaging.WithAckFunc(func(context.Context) error { return nil }))
	require.NoError(t, done.Ack(ctx), "settled although ctx had ended: nothing to report")
	failed := messaging.NewMessage("f", messaging.WithAckFunc(func(context.Context) error { return errBoom }))
	err := failed.Ack(ctx)
	require.ErrorIs(t, err, context.Canceled, "a failure after ctx ended is reported as ctx's end")
	require.NotErrorIs(t, err, errBoom)
	require.ErrorIs(t, messaging.NackWith(errBoom), errBoom)
}

type (
	metaA struct{ N int }
	metaB struct{ S string }
)

// A stage function that ignores its ctx cannot hold Shutdown beyond its
// deadline: Shutdown nacks the unsettled with ErrShutdown and returns; the
// function's goroutine ends when the function returns, its result discarded
// (no ack, nothing reaches the sink), and then Done closes.
func TestShutdown_StuckStageFunctionDoesNotHoldTheDeadline(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.incoming.in.connector":  "in-memory",
		"mp.messaging.outgoing.out.connector": "in-memory",
	})
	entered, release := make(chan struct{}), make(chan struct{})
	messaging.Process(rt, "in", "out", func(_ context.Context, p []byte) ([]byte, error) {
		close(entered)
		<-release // ignores ctx
		return p, nil
	})
	start(t, rt)
	conn.Source("in").SendString("x")
	<-entered
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rt.Shutdown(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(waitTimeout):
		close(release)
		t.Fatal("Shutdown did not return at its deadline while a stage function was stuck")
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "1 message(s) unsettled")
	assert.Contains(t, err.Error(), "1 stage invocation(s) still running")
	st := conn.Source("in").Settlements()
	require.Len(t, st, 1)
	require.ErrorIs(t, st[0].Reason, messaging.ErrShutdown)
	select {
	case <-rt.Done():
		t.Fatal("Done closed while a stage function still runs")
	default:
	}
	close(release)
	select {
	case <-rt.Done():
	case <-time.After(waitTimeout):
		t.Fatal("Done not closed after the stuck function returned")
	}
	assert.Len(t, conn.Source("in").Settlements(), 1, "the late result settles nothing")
	assert.Empty(t, conn.Sink("out").Messages(), "the late output is discarded")
	goleak.VerifyNone(t, ignore)
}

func TestShutdown_DoneAfterCleanShutdown(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	messaging.Consume(rt, "in", nop[[]byte])
	start(t, rt)
	conn.Source("in").SendString("x")
	require.NoError(t, conn.Source("in").WaitSettled(testCtx(t), 1))
	require.NoError(t, rt.Shutdown(testCtx(t)))
	select {
	case <-rt.Done():
	default:
		t.Fatal("Done not closed after a clean Shutdown")
	}
}
