package messaging_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// sendAll emits counter messages for every payload.
func sendAll(t *testing.T, em *messaging.Emitter[string], c *counter, ps []string) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, em.SendMessage(c.msg(p)))
	}
}

func TestMPRM_PayloadSubscriberAckTest(t *testing.T) {
	for _, conc := range []int{1, 4} { // 4: AsynchronousPayloadSubscriberAckTest
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			em := messaging.NewEmitter[string](rt, "in")
			var calls atomic.Int32
			messaging.Consume(rt, "in", func(_ context.Context, p string) error {
				calls.Add(1)
				if p == "4" {
					return errBoom
				}
				return nil
			}, messaging.WithConcurrency(conc))
			start(t, rt)
			c := newCounter()
			sendAll(t, em, c, payloads(10))
			c.wait(t, 10)
			a, n := c.counts()
			assert.Equal(t, 9, a)
			assert.Equal(t, 1, n)
			require.ErrorIs(t, c.reasons[0], errBoom)
			assert.EqualValues(t, 10, calls.Load(), "the stream goes on after a failure")
		})
	}
}

func TestMPRM_PayloadSubscriberPanicNacks(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Consume(rt, "in", func(_ context.Context, p string) error {
		if p == "2" {
			panic("kaboom")
		}
		return nil
	})
	start(t, rt)
	c := newCounter()
	sendAll(t, em, c, payloads(5))
	c.wait(t, 5)
	a, n := c.counts()
	assert.Equal(t, 4, a)
	assert.Equal(t, 1, n)
	assert.ErrorIs(t, c.reasons[0], reactive.ErrPanic)
}

func TestMPRM_AsynchronousMessageSubscriberAckTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.ConsumeMessage(rt, "in", func(ctx context.Context, m messaging.Message[string]) error {
		if m.Payload() == "7" {
			return m.Nack(ctx, errBoom)
		}
		return m.Ack(ctx)
	}, messaging.WithConcurrency(3))
	start(t, rt)
	c := newCounter()
	sendAll(t, em, c, payloads(10))
	c.wait(t, 10)
	a, n := c.counts()
	assert.Equal(t, 9, a)
	assert.Equal(t, 1, n)
}

func TestMPRM_PayloadProcessorAckTest(t *testing.T) {
	for _, conc := range []int{1, 3} { // 3: AsynchronousPayloadProcessorAckTest
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			em := messaging.NewEmitter[string](rt, "in")
			messaging.Process(rt, "in", "out", func(_ context.Context, p string) (string, error) {
				if p == "5" {
					return "", errBoom
				}
				return "x" + p, nil
			}, messaging.WithConcurrency(conc))
			var mu sync.Mutex
			var held []messaging.Message[string]
			messaging.ConsumeMessage(rt, "out", func(_ context.Context, m messaging.Message[string]) error {
				mu.Lock()
				held = append(held, m)
				mu.Unlock()
				return nil
			}, messaging.WithPrefetch(10))
			start(t, rt)
			c := newCounter()
			sendAll(t, em, c, payloads(10))
			c.wait(t, 1) // the failure
			testwait.Eventually(t, waitTimeout, func() bool { mu.Lock(); defer mu.Unlock(); return len(held) == 9 }, "9 outputs")
			a, n := c.counts()
			assert.Equal(t, 0, a, "inputs are acked only after their outputs")
			assert.Equal(t, 1, n)
			require.ErrorIs(t, c.reasons[0], errBoom)
			mu.Lock()
			for _, m := range held {
				require.NoError(t, m.Ack(t.Context()))
			}
			mu.Unlock()
			c.wait(t, 10)
			a, n = c.counts()
			assert.Equal(t, 9, a)
			assert.Equal(t, 1, n)
		})
	}
}

func TestMPRM_PayloadProcessorOutputNackPropagates(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Process(rt, "in", "out", func(_ context.Context, p string) (string, error) { return p, nil })
	messaging.ConsumeMessage(rt, "out", func(ctx context.Context, m messaging.Message[string]) error {
		return m.Nack(ctx, errBoom, messaging.ToDeadLetter())
	})
	start(t, rt)
	var opts messaging.NackOptions
	done := make(chan struct{})
	m := messaging.NewMessage("a", messaging.WithNackFunc(func(_ context.Context, r error, o messaging.NackOptions) error {
		assert.True(t, errors.Is(r, errBoom)) //nolint:testifylint // require must not run in the callback goroutine
		opts = o
		close(done)
		return nil
	}))
	require.NoError(t, em.SendMessage(m))
	<-done
	assert.Equal(t, messaging.DeadLetter, opts.Disposition)
}

func TestMPRM_MessageProcessorAckTest(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.ProcessMessage(rt, "in", "out", func(_ context.Context, m messaging.Message[string]) (messaging.Message[string], error) {
		return messaging.WithPayload(m, "p"+m.Payload()), nil
	})
	messaging.ConsumeMessage(rt, "out", func(ctx context.Context, m messaging.Message[string]) error {
		if m.Payload() == "p3" {
			return m.Nack(ctx, errBoom)
		}
		return m.Ack(ctx)
	})
	start(t, rt)
	c := newCounter()
	sendAll(t, em, c, payloads(10))
	c.wait(t, 10)
	a, n := c.counts()
	assert.Equal(t, 9, a)
	assert.Equal(t, 1, n)
}

// The Go deviation of Manual acknowledgement: an error returned by a Manual Message function while its
// input is unsettled nacks the input; a settled input is left alone.
func TestMPRM_ManualErrorNacksUnsettledInput(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.ProcessMessage(rt, "in", "out", func(ctx context.Context, m messaging.Message[string]) (messaging.Message[string], error) {
		switch m.Payload() {
		case "0":
			return nil, errBoom // unsettled: nacked by the runtime
		case "1":
			_ = m.Ack(ctx)
			return nil, errBoom // settled: stays acked
		case "2":
			return nil, nil //nolint:nilnil // the nil message under test
		}
		return messaging.WithPayload(m, m.Payload()), nil
	})
	messaging.Consume(rt, "out", func(context.Context, string) error { return nil })
	start(t, rt)
	c := newCounter()
	sendAll(t, em, c, payloads(4))
	c.wait(t, 4)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.ElementsMatch(t, []string{"1", "3"}, c.acks)
	assert.ElementsMatch(t, []string{"0", "2"}, c.nacks)
	assert.True(t, errors.Is(c.reasons[0], errBoom) || errors.Is(c.reasons[0], messaging.ErrNilMessage))
	assert.True(t, errors.Is(c.reasons[1], errBoom) || errors.Is(c.reasons[1], messaging.ErrNilMessage))
}

func TestMPRM_NackWithOptions(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "in")
	messaging.Consume(rt, "in", func(context.Context, string) error {
		return messaging.NackWith(errBoom, messaging.ToDeadLetter(), messaging.WithNackProperties(map[string]string{"k": "v"}))
	})
	start(t, rt)
	got := make(chan messaging.NackOptions, 1)
	require.NoError(t, em.SendMessage(messaging.NewMessage("x", messaging.WithNackFunc(func(_ context.Context, r error, o messaging.NackOptions) error {
		assert.True(t, errors.Is(r, errBoom)) //nolint:testifylint // require must not run in the callback goroutine
		got <- o
		return nil
	}))))
	o := <-got
	assert.Equal(t, messaging.DeadLetter, o.Disposition)
	assert.Equal(t, "v", o.Properties["k"])
}

// ackProbe is a stage harness for the ack matrix: it records whether the
// input was already acked when the stage function ran.
type ackProbe struct {
	c          *counter
	ackedAtRun atomic.Bool
	ran        atomic.Int32
}

func (p *ackProbe) observe() {
	a, _ := p.c.counts()
	p.ackedAtRun.Store(a > 0)
	p.ran.Add(1)
}

// TestMPRM_AckMatrix checks every allowed strategy per shape.
func TestMPRM_AckMatrix(t *testing.T) {
	type outcome struct {
		preAcked bool // acked before the function ran
		acks     int
		nacks    int
	}
	type tc struct {
		shape string
		ack   messaging.AckStrategy
		fail  bool
		want  outcome
	}
	cases := []tc{
		{"Consume", messaging.AckNone, false, outcome{false, 0, 0}},
		{"Consume", messaging.AckNone, true, outcome{false, 0, 0}},
		{"Consume", messaging.AckPre, true, outcome{true, 1, 0}},
		{"Consume", messaging.AckPost, false, outcome{false, 1, 0}},
		{"Consume", messaging.AckPost, true, outcome{false, 0, 1}},
		{"Consume", 0, true, outcome{false, 0, 1}}, // default Post
		{"ConsumeMessage", messaging.AckNone, true, outcome{false, 0, 0}},
		{"ConsumeMessage", messaging.AckPre, true, outcome{true, 1, 0}},
		{"ConsumeMessage", messaging.AckPost, false, outcome{false, 1, 0}},
		{"ConsumeMessage", messaging.AckPost, true, outcome{false, 0, 1}},
		{"ConsumeMessage", messaging.AckManual, true, outcome{false, 0, 1}},
		{"ConsumeMessage", 0, false, outcome{false, 0, 0}}, // default Manual, user did not settle
		{"Subscribe", messaging.AckNone, false, outcome{false, 0, 0}},
		{"Subscribe", messaging.AckPre, false, outcome{true, 1, 0}},
		{"Subscribe", messaging.AckPost, false, outcome{false, 1, 0}},
		{"Subscribe", messaging.AckManual, false, outcome{false, 0, 0}},
		{"Process", messaging.AckNone, false, outcome{false, 0, 0}},
		{"Process", messaging.AckPre, true, outcome{true, 1, 0}},
		{"Process", messaging.AckPost, false, outcome{false, 1, 0}},
		{"Process", messaging.AckPost, true, outcome{false, 0, 1}},
		{"ProcessMessage", messaging.AckNone, true, outcome{false, 0, 0}},
		{"ProcessMessage", messaging.AckPre, true, outcome{true, 1, 0}},
		{"ProcessMessage", messaging.AckManual, true, outcome{false, 0, 1}},
		{"FlatMap", messaging.AckNone, false, outcome{false, 0, 0}},
		{"FlatMap", messaging.AckPre, false, outcome{true, 1, 0}},
		{"Transform", messaging.AckNone, false, outcome{false, 0, 0}},
		{"Transform", messaging.AckPre, false, outcome{true, 1, 0}},
		{"Transform", messaging.AckManual, false, outcome{false, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%v/fail=%v", tc.shape, tc.ack, tc.fail), func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			em := messaging.NewEmitter[string](rt, "in")
			p := &ackProbe{c: newCounter()}
			var opts []messaging.StageOption
			if tc.ack != 0 {
				opts = append(opts, messaging.WithAck(tc.ack))
			}
			var errRet error
			if tc.fail {
				errRet = errBoom
			}
			sinkDone := make(chan string, 1)
			sink := func() {
				messaging.ConsumeMessage(rt, "out", func(ctx context.Context, m messaging.Message[string]) error {
					err := m.Ack(ctx) // downstream acks the output
					sinkDone <- m.Payload()
					return err
				})
			}
			switch tc.shape {
			case "Consume":
				messaging.Consume(rt, "in", func(context.Context, string) error { p.observe(); return errRet }, opts...)
			case "ConsumeMessage":
				messaging.ConsumeMessage(rt, "in", func(context.Context, messaging.Message[string]) error { p.observe(); return errRet }, opts...)
			case "Subscribe":
				s := &recordingSubscriber{onNext: func(messaging.Message[string]) { p.observe() }}
				messaging.Subscribe[string](rt, "in", s, opts...)
			case "Process":
				messaging.Process(rt, "in", "out", func(_ context.Context, v string) (string, error) { p.observe(); return v, errRet }, opts...)
				sink()
			case "ProcessMessage":
				messaging.ProcessMessage(rt, "in", "out", func(_ context.Context, m messaging.Message[string]) (messaging.Message[string], error) {
					p.observe()
					return messaging.NewMessage(m.Payload()), errRet
				}, opts...)
				sink()
			case "FlatMap":
				messaging.FlatMap(rt, "in", "out", func(_ context.Context, v string) reactive.Publisher[string] {
					p.observe()
					return reactive.FromSlice(v)
				}, opts...)
				sink()
			case "Transform":
				messaging.Transform(rt, "in", "out", func(up reactive.Publisher[messaging.Message[string]]) reactive.Publisher[messaging.Message[string]] {
					return reactive.Map(up, func(m messaging.Message[string]) (messaging.Message[string], error) {
						p.observe()
						return messaging.NewMessage(m.Payload()), nil
					})
				}, opts...)
				sink()
			}
			start(t, rt)
			require.NoError(t, em.SendMessage(p.c.msg("v")))
			testwait.Eventually(t, waitTimeout, func() bool { return p.ran.Load() == 1 }, "function ran")
			if tc.want.acks+tc.want.nacks > 0 {
				p.c.wait(t, 1)
			}
			if tc.shape != "Consume" && tc.shape != "ConsumeMessage" && tc.shape != "Subscribe" && !tc.fail {
				select {
				case <-sinkDone:
				case <-time.After(waitTimeout):
					t.Fatal("no output")
				}
			}
			if tc.want.acks+tc.want.nacks == 0 {
				// Nothing may settle it: give the stage a moment, then the
				// shutdown deadline nacks it with ErrShutdown.
				time.Sleep(20 * time.Millisecond)
				a, n := p.c.counts()
				assert.Zero(t, a+n, "settled although the strategy never settles")
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				defer cancel()
				err := rt.Shutdown(ctx)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				p.c.wait(t, 1)
				require.ErrorIs(t, p.c.reasons[0], messaging.ErrShutdown)
			} else {
				require.NoError(t, rt.Shutdown(testCtx(t)), "drained")
				a, n := p.c.counts()
				assert.Equal(t, tc.want.acks, a, "acks")
				assert.Equal(t, tc.want.nacks, n, "nacks")
			}
			assert.Equal(t, tc.want.preAcked, p.ackedAtRun.Load(), "acked before the function ran")
		})
	}
}

// recordingSubscriber is a user subscriber requesting one at a time.
type recordingSubscriber struct {
	sub    reactive.Subscription
	onNext func(messaging.Message[string])
}

func (s *recordingSubscriber) OnSubscribe(sub reactive.Subscription) { s.sub = sub; sub.Request(1) }
func (s *recordingSubscriber) OnNext(m messaging.Message[string])    { s.onNext(m); s.sub.Request(1) }
func (*recordingSubscriber) OnError(error)                           {}
func (*recordingSubscriber) OnComplete()                             {}

func TestMPRM_InvalidAckStrategy(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	em := messaging.NewEmitter[string](rt, "a")
	messaging.Process(rt, "a", "b", func(_ context.Context, v string) (string, error) { return v, nil }, messaging.WithAck(messaging.AckManual))
	messaging.ProcessMessage(rt, "b", "c", func(_ context.Context, m messaging.Message[string]) (messaging.Message[string], error) { return m, nil }, messaging.WithAck(messaging.AckPost))
	messaging.FlatMap(rt, "c", "d", func(_ context.Context, v string) reactive.Publisher[string] { return reactive.FromSlice(v) }, messaging.WithAck(messaging.AckPost))
	messaging.Transform(rt, "d", "e", func(p reactive.Publisher[messaging.Message[string]]) reactive.Publisher[messaging.Message[string]] {
		return p
	}, messaging.WithAck(messaging.AckPost))
	messaging.Consume(rt, "e", func(context.Context, string) error { return nil }, messaging.WithAck(messaging.AckManual))
	messaging.Produce(rt, "f", reactive.FromSlice(messaging.NewMessage("x")), messaging.WithAck(messaging.AckPre))
	messaging.Generate(rt, "g", func(context.Context) (string, error) { return "", nil }, messaging.WithAck(messaging.AckPost))
	messaging.Consume(rt, "f", func(context.Context, string) error { return nil })
	messaging.Consume(rt, "g", func(context.Context, string) error { return nil })
	_ = em
	err := rt.Start(testCtx(t))
	var ae *messaging.AssemblyError
	require.ErrorAs(t, err, &ae)
	n := 0
	for _, p := range ae.Problems {
		assert.Equal(t, messaging.InvalidAckStrategy, p.Kind, p.Error())
		n++
	}
	assert.Equal(t, 7, n)
	assert.ErrorIs(t, err, messaging.ErrInvalidAckStrategy)
}
