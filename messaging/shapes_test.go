package messaging_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// collect returns a Consume function sending payloads to a channel.
func collect[T any](n int) (chan T, func(context.Context, T) error) {
	ch := make(chan T, n)
	return ch, func(_ context.Context, v T) error { ch <- v; return nil }
}

func receive[T any](t *testing.T, ch chan T, n int) []T {
	t.Helper()
	out := make([]T, 0, n)
	ctx := testCtx(t)
	for range n {
		select {
		case v := <-ch:
			out = append(out, v)
		case <-ctx.Done():
			t.Fatalf("received %d of %d: %v", len(out), n, out)
		}
	}
	return out
}

// Shape: @Outgoing Publisher<O> m().
func TestShape_ProducePayloads(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.ProducePayloads(rt, "a", reactive.FromSlice(1, 2, 3))
	got, f := collect[int](3)
	messaging.Consume(rt, "a", f)
	start(t, rt)
	assert.Equal(t, []int{1, 2, 3}, receive(t, got, 3))
}

// @Outgoing Message<O> m(): the generated messages keep their metadata and
// their own settlement.
func TestShape_GenerateMessage(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	c := newCounter()
	n := 0
	messaging.GenerateMessage(rt, "a", func(context.Context) (messaging.Message[string], error) {
		n++
		if n > 2 {
			return nil, io.EOF
		}
		m := c.msg(strings.Repeat("x", n))
		return messaging.WithMetadataItems(m, tag("gen")), nil
	})
	tags := make(chan string, 2)
	messaging.ConsumeMessage(rt, "a", func(ctx context.Context, m messaging.Message[string]) error {
		tg, _ := messaging.MetadataOf[tag](m.Metadata())
		tags <- string(tg) + ":" + m.Payload()
		return m.Ack(ctx)
	})
	start(t, rt)
	assert.Equal(t, []string{"gen:x", "gen:xx"}, receive(t, tags, 2))
	c.wait(t, 2)
	acks, nacks := c.counts()
	assert.Equal(t, 2, acks, "the generator's own Ack ran")
	assert.Zero(t, nacks)
}

func TestShape_GenerateMessageNilFailsTheStream(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.GenerateMessage(rt, "a", func(context.Context) (messaging.Message[string], error) {
		return nil, nil //nolint:nilnil // the faulty generator under test
	})
	failed := make(chan error, 1)
	messaging.Subscribe[string](rt, "a", &errSubscriber{err: failed})
	start(t, rt)
	assert.ErrorIs(t, <-failed, messaging.ErrNilMessage)
}

type tag string

type errSubscriber struct{ err chan error }

func (*errSubscriber) OnSubscribe(s reactive.Subscription) { s.Request(10) }
func (*errSubscriber) OnNext(messaging.Message[string])    {}
func (e *errSubscriber) OnError(err error)                 { e.err <- err }
func (*errSubscriber) OnComplete()                         {}

// payloadCollector is a Subscriber[string] requesting everything.
type payloadCollector struct {
	mu   sync.Mutex
	got  []string
	next chan string
}

func (*payloadCollector) OnSubscribe(s reactive.Subscription) { s.Request(reactive.Unbounded) }
func (p *payloadCollector) OnNext(v string) {
	p.mu.Lock()
	p.got = append(p.got, v)
	p.mu.Unlock()
	p.next <- v
}
func (*payloadCollector) OnError(error) {}
func (*payloadCollector) OnComplete()   {}

// @Incoming Subscriber<I> m(): default Post, None and Pre allowed.
func TestShape_SubscribePayloads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []messaging.StageOption
		acked int
	}{
		{"default Post", nil, 2},
		{"Pre", []messaging.StageOption{messaging.WithAck(messaging.AckPre)}, 2},
		{"None", []messaging.StageOption{messaging.WithAck(messaging.AckNone)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
			sub := &payloadCollector{next: make(chan string, 2)}
			messaging.SubscribePayloads[string](rt, "in", sub, tc.opts...)
			start(t, rt)
			src := conn.Source("in")
			src.SendString("a")
			src.SendString("b")
			assert.Equal(t, []string{"a", "b"}, receive(t, sub.next, 2))
			if tc.acked > 0 {
				require.NoError(t, src.WaitSettled(testCtx(t), tc.acked))
			}
			acked, nacked := src.Counts()
			assert.Equal(t, tc.acked, acked)
			assert.Zero(t, nacked)
			if tc.acked == 0 { // None: both messages stay in flight until the shutdown deadline
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				assert.ErrorContains(t, rt.Shutdown(ctx), "2 message(s) unsettled")
			}
		})
	}
}

// Post acks when OnNext returned, Pre before OnNext.
func TestShape_SubscribePayloadsAckOrder(t *testing.T) {
	for _, tc := range []struct {
		ack           messaging.AckStrategy
		settledInNext int
	}{{messaging.AckPost, 0}, {messaging.AckPre, 1}} {
		t.Run(tc.ack.String(), func(t *testing.T) {
			rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
			src := conn.Source("in")
			seen := make(chan int, 1)
			sub := &funcPayloadSubscriber{onNext: func(string) { a, _ := src.Counts(); seen <- a }}
			messaging.SubscribePayloads[string](rt, "in", sub, messaging.WithAck(tc.ack))
			start(t, rt)
			src.SendString("a")
			assert.Equal(t, tc.settledInNext, <-seen)
			require.NoError(t, src.WaitSettled(testCtx(t), 1))
		})
	}
}

type funcPayloadSubscriber struct{ onNext func(string) }

func (*funcPayloadSubscriber) OnSubscribe(s reactive.Subscription) { s.Request(reactive.Unbounded) }
func (f *funcPayloadSubscriber) OnNext(v string)                   { f.onNext(v) }
func (*funcPayloadSubscriber) OnError(error)                       {}
func (*funcPayloadSubscriber) OnComplete()                         {}

// Publisher<O> m(Publisher<I>) and Processor<I,O> m(): default Pre.
func TestShape_TransformPayloads(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	messaging.TransformPayloads(rt, "in", "lens", func(up reactive.Publisher[string]) reactive.Publisher[int] {
		return reactive.Map(up, func(s string) (int, error) { return len(s), nil })
	})
	got, f := collect[int](2)
	messaging.Consume(rt, "lens", f)
	start(t, rt)
	src := conn.Source("in")
	src.SendString("abc")
	src.SendString("de")
	assert.Equal(t, []int{3, 2}, receive(t, got, 2))
	require.NoError(t, src.WaitSettled(testCtx(t), 2))
	acked, _ := src.Counts()
	assert.Equal(t, 2, acked, "Pre acks every input")
}

// A reactive.Processor is registered through TransformPayloads.
func TestShape_TransformPayloadsWithAProcessor(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.ProducePayloads(rt, "a", reactive.FromSlice("x", "y"))
	proc := reactive.Processor[string, string](newUpperProcessor())
	messaging.TransformPayloads(rt, "a", "b", func(up reactive.Publisher[string]) reactive.Publisher[string] {
		up.Subscribe(proc)
		return proc
	})
	got, f := collect[string](2)
	messaging.Consume(rt, "b", f)
	start(t, rt)
	assert.Equal(t, []string{"X", "Y"}, receive(t, got, 2))
}

// upperProcessor is a Processor built from reactive operators: a gate fed
// by OnNext and mapped to upper case.
type upperProcessor struct {
	reactive.Subscriber[string]
	reactive.Publisher[string]
}

func newUpperProcessor() *upperProcessor {
	em := messaging.NewTestEmitter[string](messaging.OverflowUnboundedBuffer)
	return &upperProcessor{
		Subscriber: &emitterSubscriber{em: em},
		Publisher: reactive.Map[messaging.Message[string], string](em, func(m messaging.Message[string]) (string, error) {
			return strings.ToUpper(m.Payload()), nil
		}),
	}
}

type emitterSubscriber struct{ em *messaging.Emitter[string] }

func (*emitterSubscriber) OnSubscribe(s reactive.Subscription) { s.Request(reactive.Unbounded) }
func (e *emitterSubscriber) OnNext(v string)                   { _, _ = e.em.Emit(v) }
func (e *emitterSubscriber) OnError(err error)                 { e.em.Fail(err) }
func (e *emitterSubscriber) OnComplete()                       { e.em.Complete() }

// Publisher<Message<O>> m(Message<I>): default Manual; outputs derived with
// WithPayload settle the input once.
func TestShape_FlatMapMessage(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.incoming.in.connector":  "in-memory",
		"mp.messaging.outgoing.out.connector": "in-memory",
	})
	messaging.FlatMapMessage(rt, "in", "out", func(_ context.Context, m messaging.Message[string]) reactive.Publisher[messaging.Message[string]] {
		if m.Payload() == "nil" {
			return nil
		}
		return reactive.FromSlice(messaging.WithPayload(m, m.Payload()+"1"), messaging.WithPayload(m, m.Payload()+"2"))
	})
	start(t, rt)
	src := conn.Source("in")
	src.SendString("a")
	src.SendString("nil")
	src.SendString("b")
	sink := conn.Sink("out")
	require.NoError(t, sink.Wait(testCtx(t), 4))
	assert.Equal(t, []string{"a1", "a2", "b1", "b2"}, sink.Payloads())
	require.NoError(t, src.WaitSettled(testCtx(t), 3))
	acked, nacked := src.Counts()
	assert.Equal(t, 2, acked, "the sink's ack of the first output settles the input once")
	assert.Equal(t, 1, nacked, "a nil publisher nacks the unsettled input")
	for _, st := range src.Settlements() {
		if !st.Acked {
			assert.ErrorIs(t, st.Reason, messaging.ErrNilArgument)
		}
	}
}

func TestShape_FlatMapMessagePre(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	messaging.FlatMapMessage(rt, "in", "b", func(_ context.Context, m messaging.Message[string]) reactive.Publisher[messaging.Message[int]] {
		return reactive.FromSlice(messaging.NewMessage(len(m.Payload())))
	}, messaging.WithAck(messaging.AckPre))
	got, f := collect[int](1)
	messaging.Consume(rt, "b", f)
	start(t, rt)
	conn.Source("in").SendString("abcd")
	assert.Equal(t, []int{4}, receive(t, got, 1))
	require.NoError(t, conn.Source("in").WaitSettled(testCtx(t), 1))
}

// FlatMap (payloads): a panic or a nil publisher of f emits nothing for that input, and the
// stream goes on with the next one; with the default Pre ack every input is acked.
func TestShape_FlatMapPanicOrNilPublisherEmitsNothing(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.incoming.in.connector":  "in-memory",
		"mp.messaging.outgoing.out.connector": "in-memory",
	})
	messaging.FlatMap(rt, "in", "out", func(_ context.Context, p string) reactive.Publisher[string] {
		switch p {
		case "nil":
			return nil
		case "panic":
			panic("flatMap bug")
		}
		return reactive.FromSlice(p+"1", p+"2")
	})
	start(t, rt)
	src := conn.Source("in")
	for _, v := range []string{"a", "nil", "panic", "b"} {
		src.SendString(v)
	}
	sink := conn.Sink("out")
	require.NoError(t, sink.Wait(testCtx(t), 4))
	assert.Equal(t, []string{"a1", "a2", "b1", "b2"}, sink.Payloads())
	require.NoError(t, src.WaitSettled(testCtx(t), 4))
	acked, nacked := src.Counts()
	assert.Equal(t, 4, acked, "Pre acks every input, those that emit nothing too")
	assert.Zero(t, nacked)
	assert.True(t, channelHealth(t, rt, "out", messaging.Outgoing).Live, "the stream goes on")
}

// Each new shape refuses the strategies it does not allow, at Start.
func TestShape_InvalidAckStrategies(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	messaging.ProducePayloads(rt, "a", reactive.FromSlice("x"), messaging.WithAck(messaging.AckPre))
	messaging.GenerateMessage(rt, "b", func(context.Context) (messaging.Message[string], error) { return nil, io.EOF }, messaging.WithAck(messaging.AckPost))
	messaging.SubscribePayloads[string](rt, "a", &payloadCollector{}, messaging.WithAck(messaging.AckManual))
	messaging.TransformPayloads(rt, "b", "c", func(p reactive.Publisher[string]) reactive.Publisher[string] { return p },
		messaging.WithAck(messaging.AckPost))
	messaging.FlatMapMessage(rt, "c", "d", func(_ context.Context, m messaging.Message[string]) reactive.Publisher[messaging.Message[string]] {
		return reactive.FromSlice(m)
	}, messaging.WithAck(messaging.AckPost))
	messaging.Consume(rt, "d", nop[string])
	err := rt.Start(testCtx(t))
	var ae *messaging.AssemblyError
	require.ErrorAs(t, err, &ae)
	stages := map[string]bool{}
	for _, p := range ae.Problems {
		assert.Equal(t, messaging.InvalidAckStrategy, p.Kind, p.Error())
		kind, _, _ := strings.Cut(p.Stage, "(")
		stages[kind] = true
	}
	assert.Equal(t, map[string]bool{
		"ProducePayloads": true, "GenerateMessage": true, "SubscribePayloads": true,
		"TransformPayloads": true, "FlatMapMessage": true,
	}, stages)
	assert.ErrorIs(t, err, messaging.ErrInvalidAckStrategy)
}
