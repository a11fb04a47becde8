package messaging_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

func TestMPRM_EmitterOfPayloadAcknowledgementTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Process(rt, "in", "out", func(_ context.Context, p string) (string, error) { return "p" + p, nil }) // ConnectedToProcessor
	messaging.Consume(rt, "out", func(_ context.Context, p string) error {
		if p == "pbad" {
			return errBoom
		}
		return nil
	})
	start(t, rt)
	ctx := testCtx(t)
	require.NoError(t, em.Send(ctx, "ok"), "Send returns nil on ack")
	err := em.Send(ctx, "bad")
	require.ErrorIs(t, err, messaging.ErrNacked, "Send returns the reason on nack")
	require.ErrorIs(t, err, errBoom)
	ch, err := em.Emit("ok2")
	require.NoError(t, err)
	require.NoError(t, <-ch)
}

func TestMPRM_EmitterOfMessageAcknowledgementTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	var mu sync.Mutex
	var got []string
	messaging.Consume(rt, "in", func(_ context.Context, p string) error {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
		return nil
	})
	start(t, rt)
	c := newCounter()
	sendAll(t, em, c, []string{"a", "b", "c"})
	c.wait(t, 3)
	a, _ := c.counts()
	assert.Equal(t, 3, a, "SendMessage callbacks fire")
	mu.Lock()
	assert.Equal(t, []string{"a", "b", "c"}, got)
	mu.Unlock()
}

func TestMPRM_EmitterInjectionEmittingNullTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[*string](rt, "in")
	got := make(chan string, 4)
	messaging.Consume(rt, "in", func(_ context.Context, p *string) error { got <- *p; return nil })
	start(t, rt)
	ctx := testCtx(t)
	require.ErrorIs(t, em.Send(ctx, nil), messaging.ErrNilPayload)
	require.ErrorIs(t, em.SendMessage(nil), messaging.ErrNilPayload)
	require.ErrorIs(t, em.SendMessage(messaging.NewMessage[*string](nil)), messaging.ErrNilPayload)
	v := "still delivered"
	require.NoError(t, em.Send(ctx, &v))
	assert.Equal(t, v, <-got)
}

func TestMPRM_EmitterInjectionEmittingDataAfterTerminationTest(t *testing.T) {
	for _, withError := range []bool{false, true} {
		t.Run("withError="+strconv.FormatBool(withError), func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			em := messaging.NewEmitter[string](rt, "in")
			messaging.Consume(rt, "in", func(context.Context, string) error { return nil })
			start(t, rt)
			require.NoError(t, em.Send(testCtx(t), "a"))
			if withError {
				em.Fail(errBoom)
			} else {
				em.Complete()
			}
			require.ErrorIs(t, em.Send(testCtx(t), "b"), messaging.ErrEmitterTerminated)
			_, err := em.Emit("c")
			require.ErrorIs(t, err, messaging.ErrEmitterTerminated)
		})
	}
}

func TestMPRM_EmitterInjectionMissingChannelTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.NewEmitter[string](rt, "nowhere")
	err := rt.Start(testCtx(t))
	require.ErrorIs(t, err, messaging.ErrNoDownstream)
}

func TestMPRM_EmitterSendAfterShutdown(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Consume(rt, "in", func(context.Context, string) error { return nil })
	start(t, rt)
	require.NoError(t, rt.Shutdown(testCtx(t)))
	require.ErrorIs(t, em.Send(testCtx(t), "x"), messaging.ErrEmitterTerminated)
}

// freeConsumer is blockingConsumer already released: it takes every value at once.
func freeConsumer(rt *messaging.Runtime, got *syncList) {
	release := make(chan struct{})
	close(release)
	blockingConsumer(rt, release, got)
}

// blockingConsumer consumes "in" one at a time until release is closed.
func blockingConsumer(rt *messaging.Runtime, release <-chan struct{}, got *syncList) {
	messaging.Consume(rt, "in", func(ctx context.Context, p string) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		got.add(p)
		return nil
	})
}

type syncList struct {
	mu sync.Mutex
	vs []string
}

func (l *syncList) add(v string) { l.mu.Lock(); l.vs = append(l.vs, v); l.mu.Unlock() }
func (l *syncList) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.vs...)
}

// burst emits 0..n-1 and returns the values accepted and the errors.
func burst(em *messaging.Emitter[string], n int) (accepted []string, errs []error) {
	for i := range n {
		v := strconv.Itoa(i)
		if _, err := em.Emit(v); err != nil {
			errs = append(errs, err)
		} else {
			accepted = append(accepted, v)
		}
	}
	return accepted, errs
}

func TestMPRM_OverflowBuffer(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowBuffer, 300))
	var got syncList
	freeConsumer(rt, &got)
	accepted, errs := burst(em, 1000) // before Start: no demand
	assert.Len(t, accepted, 300)
	assert.Len(t, errs, 700)
	for _, err := range errs {
		require.ErrorIs(t, err, messaging.ErrOverflow)
	}
	start(t, rt)
	testwait.Eventually(t, waitTimeout, func() bool { return len(got.get()) == 300 }, "accepted ones delivered")
	assert.Equal(t, accepted, got.get(), "in order")
}

func TestMPRM_OverflowDefault(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	var got syncList
	release := make(chan struct{})
	blockingConsumer(rt, release, &got)
	start(t, rt)
	accepted, errs := burst(em, 1000)
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], messaging.ErrOverflow)
	close(release)
	testwait.Eventually(t, waitTimeout, func() bool { return len(got.get()) == len(accepted) }, "accepted ones delivered")
	assert.LessOrEqual(t, len(got.get()), messaging.DefaultEmitterBufferSize+1, "at most 128 plus in flight")
}

// Without OnOverflow's size or mp.messaging.emitter.default-buffer-size, an emitter buffers
// exactly 128 values while there is no demand and refuses every further one with
// ErrOverflow.
func TestMPRM_OverflowDefaultBufferHoldsExactly128(t *testing.T) {
	require.Equal(t, 128, messaging.DefaultEmitterBufferSize)
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Consume(rt, "in", func(context.Context, string) error { return nil })
	accepted, errs := burst(em, 200) // before Start: no demand
	assert.Equal(t, payloads(128), accepted, "the first 128 are buffered")
	assert.Len(t, errs, 200-128)
	for _, err := range errs {
		require.ErrorIs(t, err, messaging.ErrOverflow)
	}
}

func TestMPRM_OverflowBufferSizeFromConfig(t *testing.T) {
	rt, _ := newRuntime(t, map[string]string{messaging.KeyEmitterBufferSize: "5"})
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Consume(rt, "in", func(context.Context, string) error { return nil })
	accepted, errs := burst(em, 10)
	assert.Len(t, accepted, 5)
	assert.Len(t, errs, 5)
}

// TestMPRM_OverflowDrop flaked under load (fixed for that cause): it sent one more value
// right after the last accepted one was handled, before the handler's request for more had
// reached the emitter, and an OverflowDrop emitter drops exactly then. It now sends until a
// value is accepted, every refusal being ErrDropped.
func TestMPRM_OverflowDrop(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowDrop, 0))
	var got syncList
	release := make(chan struct{})
	blockingConsumer(rt, release, &got)
	start(t, rt)
	accepted, errs := burst(em, 1000)
	require.NotEmpty(t, errs)
	for _, err := range errs {
		require.ErrorIs(t, err, messaging.ErrDropped)
	}
	close(release)
	testwait.Eventually(t, waitTimeout, func() bool { return len(got.get()) == len(accepted) }, "accepted ones delivered")
	assert.Less(t, len(got.get()), 999)
	assert.False(t, em.Cancelled(), "no stream failure")
	// The last handler has returned, but its request for more may not have
	// reached the emitter yet; until it does, Drop drops. The stream goes on
	// once demand is back: a later Send is accepted and delivered.
	testwait.Eventually(t, waitTimeout, func() bool {
		err := em.Send(testCtx(t), "after")
		if err != nil {
			require.ErrorIs(t, err, messaging.ErrDropped)
		}
		return err == nil
	}, "the stream goes on")
	testwait.Eventually(t, waitTimeout, func() bool { vs := got.get(); return len(vs) > 0 && vs[len(vs)-1] == "after" }, `"after" delivered`)
}

func TestMPRM_OverflowLatest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowLatest, 0))
	var got syncList
	release := make(chan struct{})
	blockingConsumer(rt, release, &got)
	start(t, rt)
	var results []<-chan error
	for i := range 1000 {
		ch, err := em.Emit(strconv.Itoa(i))
		require.NoError(t, err)
		results = append(results, ch)
	}
	close(release)
	testwait.Eventually(t, waitTimeout, func() bool { vs := got.get(); return len(vs) > 0 && vs[len(vs)-1] == "999" }, `"999" always arrives`)
	dropped := 0
	for _, ch := range results[:999] {
		if err := <-ch; err != nil {
			require.ErrorIs(t, err, messaging.ErrDropped)
			dropped++
		}
	}
	assert.Equal(t, 1000-len(got.get()), dropped, "replaced values report ErrDropped")
	assert.Positive(t, dropped, "values sent without demand replace each other")
}

// Before Start an emitter has no demand: OverflowLatest keeps the newest value.
func TestMPRM_OverflowLatestBeforeStart(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowLatest, 0))
	var got syncList
	freeConsumer(rt, &got)
	var results []<-chan error
	for _, v := range []string{"a", "b", "c"} {
		ch, err := em.Emit(v)
		require.NoError(t, err)
		results = append(results, ch)
	}
	start(t, rt)
	require.NoError(t, <-results[2])
	require.ErrorIs(t, <-results[0], messaging.ErrDropped)
	require.ErrorIs(t, <-results[1], messaging.ErrDropped)
	assert.Equal(t, []string{"c"}, got.get())
}

func TestMPRM_OverflowFail(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowFail, 0))
	sub := &terminalRecorder{done: make(chan error, 1)}
	messaging.Subscribe[string](rt, "in", sub)
	start(t, rt)
	_, errs := burst(em, 10) // the subscriber requested 1
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], messaging.ErrOverflow)
	require.ErrorIs(t, <-sub.done, messaging.ErrOverflow, "downstream error")
	require.ErrorIs(t, em.Send(testCtx(t), "later"), messaging.ErrEmitterTerminated)
}

func TestMPRM_OverflowThrowException(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowThrowException, 0))
	var got syncList
	release := make(chan struct{})
	blockingConsumer(rt, release, &got)
	start(t, rt)
	accepted, errs := burst(em, 100)
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], messaging.ErrNoDemand)
	close(release)
	testwait.Eventually(t, waitTimeout, func() bool { return len(got.get()) == len(accepted) }, "accepted ones delivered")
	testwait.Eventually(t, waitTimeout, em.HasDemand, "demand again")
	require.NoError(t, em.Send(testCtx(t), "second burst"), "a second burst still flows")
}

func TestMPRM_OverflowNone(t *testing.T) {
	t.Run("unbounded downstream", func(t *testing.T) {
		rt, _ := newRuntime(t, nil)
		em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowNone, 0))
		out, errc := reactive.ToChan(t.Context(), reactive.Map(messaging.Channel[string](rt, "in"),
			func(m messaging.Message[string]) (string, error) { return m.Payload(), m.Ack(context.Background()) }), 2000)
		start(t, rt)
		_, errs := burst(em, 1000)
		require.Empty(t, errs)
		em.Complete()
		n := 0
		for range out {
			n++
		}
		require.NoError(t, <-errc)
		assert.Equal(t, 1000, n)
	})
	t.Run("bounded downstream fails", func(t *testing.T) {
		rt, _ := newRuntime(t, nil)
		em := messaging.NewEmitter[string](rt, "in", messaging.OnOverflow(messaging.OverflowNone, 0))
		sub := &terminalRecorder{done: make(chan error, 1)}
		messaging.Subscribe[string](rt, "in", sub)
		start(t, rt)
		_, _ = burst(em, 10)
		require.ErrorIs(t, <-sub.done, reactive.ErrMissingDemand)
	})
}

// terminalRecorder requests one element and records the terminal signal.
type terminalRecorder struct {
	done chan error
}

func (*terminalRecorder) OnSubscribe(s reactive.Subscription) { s.Request(1) }
func (*terminalRecorder) OnNext(m messaging.Message[string])  { _ = m.Ack(context.Background()) }
func (r *terminalRecorder) OnError(err error)                 { r.done <- err }
func (r *terminalRecorder) OnComplete()                       { r.done <- errors.New("completed") }

// Fail ends the stream at once and nacks the values still queued with its error: each of
// their Emit channels reports it (wrapping ErrNacked), and the subscriber gets OnError with
// it. A value already delivered is the subscriber's to settle.
func TestEmitter_FailNacksTheQueuedValuesWithItsError(t *testing.T) {
	em := messaging.NewTestEmitter[string](messaging.OverflowBuffer)
	sub := &subscriberOf[string]{n: 1}
	em.Subscribe(sub)
	delivered, err := em.Emit("delivered")
	require.NoError(t, err)
	testwait.Eventually(t, waitTimeout, func() bool { return len(sub.received()) == 1 }, "the first value was not delivered")
	var queued []<-chan error
	for _, v := range []string{"q1", "q2", "q3"} {
		ch, err := em.Emit(v) // no demand left: queued
		require.NoError(t, err)
		queued = append(queued, ch)
	}
	em.Fail(errBoom)
	ctx := testCtx(t)
	for i, ch := range queued {
		select {
		case err := <-ch:
			require.ErrorIs(t, err, messaging.ErrNacked, "queued value %d", i)
			require.ErrorIs(t, err, errBoom, "queued value %d is nacked with Fail's error", i)
		case <-ctx.Done():
			t.Fatalf("queued value %d was not settled", i)
		}
	}
	testwait.Eventually(t, waitTimeout, func() bool { done, err := sub.terminal(); return done || err != nil }, "no terminal signal")
	_, err = sub.terminal()
	require.ErrorIs(t, err, errBoom)
	assert.Len(t, sub.received(), 1)
	select {
	case err := <-delivered:
		t.Fatalf("the delivered value was settled by Fail: %v", err)
	default:
	}
}

// Send returns ctx's error when ctx ends before the value was settled; the value is not
// taken back, and is delivered once there is demand.
func TestEmitter_SendReturnsTheContextErrorWhenItEnds(t *testing.T) {
	em := messaging.NewTestEmitter[string](messaging.OverflowBuffer)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, em.Send(ctx, "late"), context.Canceled)
	sub := &subscriberOf[string]{n: 1}
	em.Subscribe(sub)
	testwait.Eventually(t, waitTimeout, func() bool { return len(sub.received()) == 1 }, "the value was not delivered")
	assert.Equal(t, "late", sub.received()[0].Payload())
}
