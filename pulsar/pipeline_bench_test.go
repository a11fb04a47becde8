package pulsar

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/cputime"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// nopSettler and nopProducer implement the narrow interfaces with no work, so that the
// benchmarks below measure the SDK's own cost per message.
type nopSettler struct{}

func (nopSettler) Ack(apulsar.Message) error { return nil }
func (nopSettler) Nack(apulsar.Message)      {}

type nopProducer struct{}

func (nopProducer) Send(context.Context, *apulsar.ProducerMessage) (apulsar.MessageID, error) {
	return apulsar.EarliestMessageID(), nil
}

func (nopProducer) SendAsync(_ context.Context, m *apulsar.ProducerMessage, f func(apulsar.MessageID, *apulsar.ProducerMessage, error)) {
	f(apulsar.EarliestMessageID(), m, nil)
}

func (nopProducer) FlushWithCtx(context.Context) error { return nil }

// BenchmarkPipelineSuccess: gate, classify, reconcile, route, dispatch and ack of one
// message, without a broker.
func BenchmarkPipelineSuccess(b *testing.B) {
	cfg, err := consumerSetup([]ConsumerOption{Handle(testURN, handlerReturning(nil))})
	require.NoError(b, err)
	c := newConsumer(cfg, nil, nopSettler{}, nil)
	msg, _ := newMessage(b, testURN, 0, 0)
	ctx := withConsumerInfo(b.Context(), c.eng.info) // as Run derives it, once
	// The delivery's slot, as Run's receive loop keeps it.
	var slot deliverySlot
	b.ReportAllocs()
	for b.Loop() {
		c.process(ctx, msg, &slot)
	}
}

// BenchmarkPipelineFloor is BenchmarkPipelineSuccess's counterpart: the least a consumer
// that keeps the contract does with the same message, through the exported functions only
// (the schema gate, Classify, Reconcile, the routing URN looked up in a map, the handler,
// the ack), with nothing of the engine's (no delivery, hooks, events, in-flight count or
// health state). The difference between the two is the engine's own cost a message, which
// the consume comparison of make bench-compare measures with a broker (the SDK against the
// contract floor). Its steps are that floor's (contractWork in internal/benchcompare, which
// this package's tests cannot import: it imports this package); change them together.
func BenchmarkPipelineFloor(b *testing.B) {
	msg, _ := newMessage(b, testURN, 0, 0)
	handlers := map[string]HandlerFunc{testURN: handlerReturning(nil)}
	var settler seam.Settler = nopSettler{}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		props := msg.Properties()
		if v, ok := props[PropSchemaVersion]; ok {
			if err := GateVerdict(v, true); err != nil {
				b.Fatal(err)
			}
		}
		attempts, hasAttempts := props[PropAttempts]
		env, err := envelope.Classify(msg.Payload())
		if err != nil {
			b.Fatal(err)
		}
		if reconciled, _ := Reconcile(attempts, hasAttempts, env.Attempts, msg.RedeliveryCount()); reconciled != env.Attempts {
			env = env.WithAttempts(reconciled)
		}
		route := env.URN()
		if job, ok := props[PropJob]; ok && !envelope.IsBlank(job) {
			route = job
		}
		h, ok := handlers[route]
		if !ok {
			b.Fatalf("no handler for %q", route)
		}
		if err := h(ctx, env, msg); err != nil {
			b.Fatal(err)
		}
		if err := settler.Ack(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipelineReference is the consume targets' reference (issue 27) without a broker:
// envelope.Classify of the payload and the ack, nothing else. BenchmarkPipelineFloor beside
// it is what the contract adds to that for every message (its reads of the properties, the
// gate, the reconciliation, the routing and the handler's call), so that
//
//	make bench-instructions BENCH_FIRST=PipelineFloor BENCH_SECOND=PipelineReference
//
// counts, function by function, the work by which any consumer keeping the contract exceeds
// the reference, before the SDK adds anything of its own.
func BenchmarkPipelineReference(b *testing.B) {
	msg, _ := newMessage(b, testURN, 0, 0)
	var settler seam.Settler = nopSettler{}
	b.ReportAllocs()
	for b.Loop() {
		env, err := envelope.Classify(msg.Payload())
		if err != nil {
			b.Fatal(err)
		}
		sinkEnvelope = env
		if err := settler.Ack(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// sinkEnvelope keeps BenchmarkPipelineReference's decode from being optimized away.
var sinkEnvelope *envelope.Envelope

// BenchmarkPublishPath: build, encode and project one message, without a broker: for a
// wrapped producer, and with the reuse of outgoing messages that NewPublisher enables for
// the producers it creates; and the latter with one header (WithHeaders, the map made once,
// so that what is measured is the SDK's own cost of a header).
func BenchmarkPublishPath(b *testing.B) {
	data := json.RawMessage(`{"order":42,"customer":"c-1","amount":12.5}`)
	headers := map[string]string{"tenant": "t-1"}
	for _, bc := range []struct {
		name    string
		recycle bool
		opts    []PublishOption
	}{
		{"wrapped", false, nil},
		{"recycled", true, nil},
		{"recycled_header", true, []PublishOption{WithHeaders(headers)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := wrapMessageProducer(nopProducer{}, "orders", nil)
			require.NoError(b, err)
			p.recycle = bc.recycle
			done := func(string, error) {}
			b.ReportAllocs()
			for b.Loop() {
				if err := p.PublishAsync(b.Context(), testURN, data, done, bc.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPublishFloor is BenchmarkPublishPath/recycled_header's counterpart: the least a
// publisher that keeps the contract does for the same message, by hand with the exported
// functions (envelope.Make, Encode, ProjectProperties, the header added to the properties,
// a fresh client message), as the contract floor of make bench-compare's latency comparison
// does (madeMessage in internal/benchcompare).
func BenchmarkPublishFloor(b *testing.B) {
	data := json.RawMessage(`{"order":42,"customer":"c-1","amount":12.5}`)
	var prod nopProducer
	sent := func(apulsar.MessageID, *apulsar.ProducerMessage, error) {}
	b.ReportAllocs()
	for b.Loop() {
		env, err := envelope.Make(testURN, data)
		if err != nil {
			b.Fatal(err)
		}
		payload, err := env.Encode()
		if err != nil {
			b.Fatal(err)
		}
		props := ProjectProperties(env)
		props["tenant"] = "t-1"
		prod.SendAsync(b.Context(), &apulsar.ProducerMessage{Payload: payload, Properties: props}, sent)
	}
}

// windowSettler acknowledges without a broker and closes done at the want-th Ack.
type windowSettler struct {
	acked atomic.Int64
	want  int64
	done  chan struct{}
}

func (s *windowSettler) Ack(apulsar.Message) error {
	if s.acked.Add(1) == s.want {
		close(s.done)
	}
	return nil
}

func (*windowSettler) Nack(apulsar.Message) {}

// repeatReceiver hands out msg n times, then blocks until ctx ends, as Receive does.
type repeatReceiver struct {
	msg  apulsar.Message
	left atomic.Int64
}

func (r *repeatReceiver) Receive(ctx context.Context) (apulsar.Message, error) {
	if r.left.Add(-1) >= 0 {
		return r.msg, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// BenchmarkRunHandoff: Run's whole path without a broker, from the receive to the ack, at
// concurrency 1 (the pump handles each message itself) and 4 (the in-flight gate, the worker
// pool and its per-key queue), beside the least a pool can do: one channel hand-off a
// message to 4 goroutines that run the same pipeline. The difference between concurrency 4
// and 1 is what WithConcurrency spends on the hand-off (issue 27, item 3); the messages carry
// no key, as the bench-compare harness's do. On two cores ns/op is wall time: cpu-ns/msg, the
// process's CPU over the messages, is the figure to compare.
func BenchmarkRunHandoff(b *testing.B) {
	msg, _ := newMessage(b, testURN, 0, 0)
	msg.key = ""
	run := func(b *testing.B, concurrency int) {
		b.Helper()
		cfg, err := consumerSetup([]ConsumerOption{Handle(testURN, handlerReturning(nil)), WithConcurrency(concurrency)})
		require.NoError(b, err)
		settler := &windowSettler{want: int64(b.N), done: make(chan struct{})}
		recv := &repeatReceiver{msg: msg}
		recv.left.Store(int64(b.N))
		c := newConsumer(cfg, recv, settler, nil)
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		b.ReportAllocs()
		b.ResetTimer()
		cputime.Report(b, func() {
			go func() { done <- c.Run(ctx) }()
			<-settler.done
		})
		b.StopTimer()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
	}
	b.Run("concurrency=1", func(b *testing.B) { run(b, 1) })
	b.Run("concurrency=4", func(b *testing.B) { run(b, 4) })
	b.Run("channel-floor=4", func(b *testing.B) {
		cfg, err := consumerSetup([]ConsumerOption{Handle(testURN, handlerReturning(nil))})
		require.NoError(b, err)
		settler := &windowSettler{want: int64(b.N), done: make(chan struct{})}
		c := newConsumer(cfg, nil, settler, nil)
		ctx := withConsumerInfo(b.Context(), c.eng.info)
		handoff := make(chan apulsar.Message, 4*4)
		var workers sync.WaitGroup
		for range 4 {
			workers.Go(func() {
				var slot deliverySlot
				for m := range handoff {
					c.process(ctx, m, &slot)
				}
			})
		}
		recv := &repeatReceiver{msg: msg}
		recv.left.Store(int64(b.N))
		b.ReportAllocs()
		b.ResetTimer()
		cputime.Report(b, func() {
			for range b.N {
				m, _ := recv.Receive(ctx)
				handoff <- m
			}
			<-settler.done
		})
		b.StopTimer()
		close(handoff)
		workers.Wait()
	})
}
