package messaging_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// The messaging rows of the TCK matrix, RUNTIME.md §13.1.
var tckOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 25 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	GCTimeout:        50 * time.Millisecond,
}

var errTCK = errors.New("tck: failed state")

func element(i int) messaging.Message[int] { return messaging.NewMessage(i) }

func TestTCK_Emitter(t *testing.T) {
	o := tckOptions
	o.MaxElements = 4096
	o.MaxSubscribers = 1
	tck.VerifyPublisher(t, tck.PublisherFactory[messaging.Message[int]]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[messaging.Message[int]] {
			em := messaging.NewTestEmitter[int](messaging.OverflowUnboundedBuffer)
			for i := range n {
				if err := em.SendMessage(element(int(i))); err != nil {
					panic(err)
				}
			}
			em.Complete()
			return em
		},
		CreateFailed: func(*testing.T) reactive.Publisher[messaging.Message[int]] {
			em := messaging.NewTestEmitter[int](messaging.OverflowBuffer)
			em.Fail(errTCK)
			return em
		},
	}, o)
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tck.VerifyIdentityProcessor(t, tck.ProcessorFactory[messaging.Message[int]]{
				Create: func(t *testing.T, _ int) msgProcessor {
					t.Helper()
					return tc.create(t.Context())
				},
				Element: element,
			}, o)
		})
	}
}

func TestTCK_ConsumeSubscriber(t *testing.T) {
	tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[messaging.Message[int]]{
		Create: func(t *testing.T) reactive.Subscriber[messaging.Message[int]] {
			t.Helper()
			return messaging.NewConsumeStage(t.Context(), func(int) {})
		},
		Element: element,
	}, tckOptions)
}
