package messaging_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// The TCK runs of the messaging runtime: emitters, stages, merged inputs,
// the new shapes and the connector building blocks.
var tckOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 25 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	GCTimeout:        50 * time.Millisecond,
}

var errTCK = errors.New("tck: failed state")

func element(i int) messaging.Message[int] { return messaging.NewMessage(i) }

// prefillMax is the largest n the emitter factory sends before returning the
// emitter (sending before subscription is allowed); larger
// streams, up to the math.MaxInt32 of required_spec317, come from a sender
// goroutine that sends only while the emitter has demand.
const prefillMax = 1024

func TestTCK_Emitter(t *testing.T) {
	o := tckOptions
	o.MaxSubscribers = 1 // MaxElements: default, so required_spec317 runs
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(t *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			t.Helper()
			if n <= prefillMax {
				em := messaging.NewTestEmitter[int](messaging.OverflowUnboundedBuffer)
				for i := range n {
					if err := em.SendMessage(element(int(i))); err != nil {
						t.Errorf("SendMessage(%d): %v", i, err)
					}
				}
				em.Complete()
				return em
			}
			em := messaging.NewTestEmitter[int](messaging.OverflowBuffer)
			startSender(t, em, n)
			return em
		},
		CreateFailed: func(*testing.T) reactive.Publisher[messaging.Message[int]] {
			em := messaging.NewTestEmitter[int](messaging.OverflowBuffer)
			em.Fail(errTCK)
			return em
		},
	}, o)
}

// startSender sends n elements (forever for reactive.Unbounded) then
// Complete, on a goroutine that sends only while em has demand and stops when
// em is cancelled or the test ends.
func startSender(t *testing.T, em *messaging.Emitter[int], n int64) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		idle := time.NewTimer(0)
		defer idle.Stop()
		for i := int64(0); n == reactive.Unbounded || i < n; {
			if em.Cancelled() {
				return
			}
			if !em.HasDemand() {
				idle.Reset(20 * time.Microsecond)
				select {
				case <-stop:
					return
				case <-idle.C:
				}
				continue
			}
			if err := em.SendMessage(element(int(i % (1 << 30)))); err != nil {
				t.Errorf("SendMessage(%d): %v", i, err)
				return
			}
			i++
		}
		em.Complete()
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
}

type msgProcessor = reactive.Processor[messaging.Message[int], messaging.Message[int]]

func TestTCK_StageProcessors(t *testing.T) {
	o := tckOptions
	o.MaxSubscribers = 1
	cases := []struct {
		name   string
		create func(ctx context.Context) msgProcessor
	}{
		{"Process", messaging.NewProcessStage},
		{"ProcessMessage", messaging.NewProcessMessageStage},
		{"FlatMap", messaging.NewFlatMapStage},
		{"Transform", func(context.Context) msgProcessor { return messaging.NewTransformStage() }},
		{"TransformPayloads", messaging.NewTransformPayloadsStage},
		{"FlatMapMessage", messaging.NewFlatMapMessageStage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tck.VerifyIdentityProcessor(t, tck.ProcessorFactory[messaging.Message[int]]{
				Create: func(t *testing.T, _ int) msgProcessor {
					t.Helper()
					return tc.create(t.Context())
				},
				// The failed state of a stage processor: subscribed to a
				// failed upstream, it passes OnSubscribe then OnError on.
				CreateFailed: func(t *testing.T) reactive.Publisher[messaging.Message[int]] {
					t.Helper()
					p := tc.create(t.Context())
					reactive.Failed[messaging.Message[int]](errTCK).Subscribe(p)
					return p
				},
				Element: element,
			}, o)
		})
	}
}

func TestTCK_ConsumeSubscribersBlackbox(t *testing.T) {
	cases := []struct {
		name   string
		create func(ctx context.Context) reactive.Subscriber[messaging.Message[int]]
	}{
		{"Consume", func(ctx context.Context) reactive.Subscriber[messaging.Message[int]] {
			return messaging.NewConsumeStage(ctx, func(int) {})
		}},
		{"ConsumeMessage", messaging.NewConsumeMessageStage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[messaging.Message[int]]{
				Create: func(t *testing.T) reactive.Subscriber[messaging.Message[int]] {
					t.Helper()
					return tc.create(t.Context())
				},
				Element: element,
			}, tckOptions)
		})
	}
}

func TestTCK_ConsumeSubscribersWhitebox(t *testing.T) {
	cases := []struct {
		name   string
		create func(ctx context.Context, p *tck.Probe[messaging.Message[int]]) reactive.Subscriber[messaging.Message[int]]
	}{
		{"Consume", messaging.NewConsumeWhitebox},
		{"ConsumeMessage", messaging.NewConsumeMessageWhitebox},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tck.VerifySubscriberWhitebox(t, tck.WhiteboxFactory[messaging.Message[int]]{
				Create: func(t *testing.T, p *tck.Probe[messaging.Message[int]]) reactive.Subscriber[messaging.Message[int]] {
					t.Helper()
					return tc.create(t.Context(), p)
				},
				Element: element,
			}, tckOptions)
		})
	}
}

// TestTCK_MergedInput verifies the publisher of a WithMerge input: n elements
// split over 3 upstreams (lazy, so the math.MaxInt32 of required_spec317
// costs only what is requested).
func TestTCK_MergedInput(t *testing.T) {
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			parts := make([]reactive.Publisher[messaging.Message[int]], 3)
			for k := range parts {
				share := n / 3
				if int64(k) < n%3 {
					share++
				}
				parts[k] = counting(n == reactive.Unbounded, share)
			}
			return messaging.NewMergedInput(parts...)
		},
		CreateFailed: func(*testing.T) reactive.Publisher[messaging.Message[int]] {
			return messaging.NewMergedInput(counting(false, 0), reactive.Failed[messaging.Message[int]](errTCK), counting(false, 0))
		},
	}, tckOptions)
}

// counting publishes n elements (endless when unbounded) lazily, counting
// afresh for every subscriber.
func counting(unbounded bool, n int64) reactive.Publisher[messaging.Message[int]] {
	return countingPub{unbounded: unbounded, n: n}
}

type countingPub struct {
	unbounded bool
	n         int64
}

func (c countingPub) Subscribe(s reactive.Subscriber[messaging.Message[int]]) {
	var i atomic.Int64
	reactive.FromFunc(func(context.Context) (messaging.Message[int], error) {
		k := i.Add(1)
		if !c.unbounded && k > c.n {
			return nil, io.EOF
		}
		return element(int(k % (1 << 30))), nil
	}).Subscribe(s)
}

// TestTCK_ProducePayloads verifies the output of ProducePayloads over a lazy
// publisher of n payloads.
func TestTCK_ProducePayloads(t *testing.T) {
	o := tckOptions
	o.MaxSubscribers = 1
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			var i atomic.Int64
			return messaging.NewProducePayloadsOutput(reactive.FromFunc(func(context.Context) (int, error) {
				k := i.Add(1)
				if n != reactive.Unbounded && k > n {
					return 0, io.EOF
				}
				return int(k % (1 << 30)), nil
			}))
		},
		CreateFailed: func(*testing.T) reactive.Publisher[messaging.Message[int]] {
			return messaging.NewProducePayloadsOutput(reactive.Failed[int](errTCK))
		},
	}, o)
}

// TestTCK_GenerateMessage verifies the output of GenerateMessage over a
// function generating n messages.
func TestTCK_GenerateMessage(t *testing.T) {
	o := tckOptions
	o.MaxSubscribers = 1
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			var i int64
			return messaging.NewGenerateMessageOutput(func(context.Context) (messaging.Message[int], error) {
				i++
				if n != reactive.Unbounded && i > n {
					return nil, io.EOF
				}
				return element(int(i % (1 << 30))), nil
			})
		},
		// No CreateFailed: a generator is called only on demand, so it has no
		// failed state to signal before the first request.
	}, o)
}
