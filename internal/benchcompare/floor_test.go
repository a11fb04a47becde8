//go:build unix

package benchcompare_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// floorName is the name of the consume comparisons' floor variant.
const floorName = "contract floor"

// floorInfo is the floor variant's note in the ratio tables.
const floorInfo = "the reference + the contract's reads, routing and a stoppable receive (+ a hand-off to workers): the least a consumer that keeps the contract does"

// floorConsumer is the contract's floor of a consume comparison: the least work a consumer
// that keeps the contract can do, written as a raw loop on a topic of its own, filled with
// msg. Beyond the reference (Receive, envelope.Classify, Ack) it does what the contract
// requires of every message and the reference leaves out, through the SDK's own exported
// functions, so that nothing of the contract is written twice: the schema gate, the attempts
// reconciled with the redelivery count, the routing and the handler's call (a no-op),
// contractWork; and a receive that a cancelled context stops, as Run's must be
// (stoppableReceive).
//
// With workers above 1 every message is handed over a channel to one of that many
// goroutines, which does the work above after the receive and acknowledges: the least a
// worker pool can do is one hand-off a message. It keeps no per-key order and no
// head-of-line guarantee, both of which the SDK's pool keeps, so it is a floor and not a
// rival.
//
// If the floor itself misses a target, the target is out of reach for any consumer that
// keeps the contract on this machine: that is what its judged row says.
func (h *harness) floorConsumer(topicName string, msg *apulsar.ProducerMessage, workers int) variant {
	return h.floorWith(topicName, msg, workers, func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil })
}

// floorConsumerSpending is the floor of floorConsumer at concurrency 1 with a handler that
// spends about extra of CPU a message in a loop that touches no memory (spinner): a
// consumer that costs more a message than the floor by a known amount and differs from it
// in nothing else. Set beside the SDK, whose own loop costs more than the floor's too, it
// tells how much of a consumer's gap comes from its own work and how much from the code
// that every side runs (the client's connection reader, Classify) running slower beside a
// slower consumer.
func (h *harness) floorConsumerSpending(topicName string, msg *apulsar.ProducerMessage, extra time.Duration) variant {
	burn := spinner(extra)
	v := h.floorWith(topicName, msg, 1, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		burn()
		return nil
	})
	v.name = fmt.Sprintf("%s, handler spending %v a message", floorName, extra)
	v.info = "the floor with a handler that spends BENCH_FLOOR_EXTRA of CPU a message"
	return v
}

// floorWith is floorConsumer with handle as the handler.
func (h *harness) floorWith(topicName string, msg *apulsar.ProducerMessage, workers int, handle bqpulsar.HandlerFunc) variant {
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	topic := h.topic(topicName)
	c := h.subscribe(topic)
	work := contractWork(ctx, c, handle)
	receive := stoppableReceive(ctx, c)
	if workers <= 1 {
		return variant{
			name: floorName, info: floorInfo, prepare: h.fill(topic, msg),
			run: func(n int) error {
				h.resume(topic)
				for range n {
					m, err := receive()
					if err != nil {
						return err
					}
					if err := work(m); err != nil {
						return err
					}
				}
				return nil
			},
		}
	}
	handoff := make(chan apulsar.Message, 4*workers) // the SDK's default in-flight bound
	var window sync.WaitGroup                        // the messages of the window being run
	var mu sync.Mutex
	var failed error
	var stopped sync.WaitGroup
	for range workers {
		stopped.Go(func() {
			for m := range handoff {
				if err := work(m); err != nil {
					mu.Lock()
					failed = errors.Join(failed, err)
					mu.Unlock()
				}
				window.Done()
			}
		})
	}
	h.t.Cleanup(func() {
		close(handoff)
		stopped.Wait()
	})
	return variant{
		name: fmt.Sprintf("%s, %d workers", floorName, workers), info: floorInfo, prepare: h.fill(topic, msg),
		run: func(n int) error {
			h.resume(topic)
			window.Add(n)
			for i := range n {
				m, err := receive()
				if err != nil {
					window.Add(i - n) // the messages never handed over
					window.Wait()
					return err
				}
				handoff <- m
			}
			window.Wait()
			mu.Lock()
			defer mu.Unlock()
			return failed
		},
	}
}

// floorSenderName is the name of the sync publish comparisons' floor variant.
const floorSenderName = "contract floor: raw Send of an envelope made per message"

// floorSender is the contract's floor of a sync publish comparison: a raw producer with the
// options opts, on a topic of its own, that sends a fresh envelope for every message, made
// with the SDK's exported functions (envelope.Make, Encode, ProjectProperties: two random
// ids, the clock, the data checked, the encoding, the six properties), and waits for each
// receipt. The contract requires a fresh envelope for every publish, which the raw side,
// sending one prepared message, does not build; if the floor misses the sync target, so
// does anything that keeps the contract.
func (h *harness) floorSender(opts func(*apulsar.ProducerOptions)) variant {
	po := apulsar.ProducerOptions{Topic: h.topic("publish-floor")}
	opts(&po)
	p, err := h.client.CreateProducer(po)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(p.Close)
	ctx := context.Background()
	return variant{
		name: floorSenderName,
		info: "the least a publisher that keeps the contract does: a fresh envelope a message",
		run: func(n int) error {
			for range n {
				msg, err := madeMessage()
				if err != nil {
					return err
				}
				if _, err := p.Send(ctx, msg); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// madeMessage is the message of a contract floor's publish: a fresh envelope made with the
// SDK's exported functions (envelope.Make, Encode, ProjectProperties), as the contract
// requires of every publish.
func madeMessage() (*apulsar.ProducerMessage, error) {
	env, err := envelope.Make(urn, data)
	if err != nil {
		return nil, err
	}
	payload, err := env.Encode()
	if err != nil {
		return nil, err
	}
	return &apulsar.ProducerMessage{Payload: payload, Properties: bqpulsar.ProjectProperties(env)}, nil
}

// BenchmarkMadeMessage is the contract floor's own work a publish, madeMessage alone, without
// a broker: what a sync send's round trip must hide for the sync publish target to be within
// reach ("Sync publish" in docs/perf/README.md, the performance record, sets it against the
// round trip).
//
//	go test -run='^$' -bench=MadeMessage -benchmem -count=6 ./internal/benchcompare
func BenchmarkMadeMessage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := madeMessage(); err != nil {
			b.Fatal(err)
		}
	}
}

// contractWork returns what the contract floor does with a message after receiving it,
// through the SDK's exported functions: the schema gate of bq-schema-version (GateVerdict),
// the body classified, bq-attempts reconciled with the redelivery count (Reconcile), the
// routing URN (bq-job over the body's) looked up in a map of handlers holding handle, the
// handler called, and the message acknowledged on c.
func contractWork(ctx context.Context, c apulsar.Consumer, handle bqpulsar.HandlerFunc) func(apulsar.Message) error {
	routes := map[string]bqpulsar.HandlerFunc{urn: handle}
	return func(m apulsar.Message) error {
		props := m.Properties()
		if v, ok := props[bqpulsar.PropSchemaVersion]; ok {
			if err := bqpulsar.GateVerdict(v, true); err != nil {
				return err
			}
		}
		attempts, hasAttempts := props[bqpulsar.PropAttempts]
		env, err := envelope.Classify(m.Payload())
		if err != nil {
			return err
		}
		if reconciled, _ := bqpulsar.Reconcile(attempts, hasAttempts, env.Attempts, m.RedeliveryCount()); reconciled != env.Attempts {
			return fmt.Errorf("attempts %d reconciled to %d", env.Attempts, reconciled)
		}
		route := env.URN()
		if job, ok := props[bqpulsar.PropJob]; ok && job != "" {
			route = job
		}
		handler, ok := routes[route]
		if !ok {
			return fmt.Errorf("no handler for %q", route)
		}
		if err := handler(ctx, env, m); err != nil {
			return err
		}
		return c.Ack(m)
	}
}

// stoppableReceive returns the contract floor's receive on c, which ctx's end stops: a
// message already queued is taken from the consumer's channel without a select, and
// Receive is called with ctx only when none is (the cheapest stoppable receive known here,
// the one the SDK uses).
func stoppableReceive(ctx context.Context, c apulsar.Consumer) func() (apulsar.Message, error) {
	return func() (apulsar.Message, error) {
		select {
		case cm, ok := <-c.Chan():
			if ok {
				return cm.Message, nil
			}
		default:
		}
		return c.Receive(ctx)
	}
}

// smokeRows runs every variant of c for two windows of 300 messages and returns its judged
// rows.
func smokeRows(t *testing.T, c comparison) []judged {
	t.Helper()
	results := make([][][]sample, 1)
	for _, v := range append([]variant{c.raw}, c.sdks...) {
		var ss []sample
		for range 2 {
			s, err := measure(v, 300)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, v.name, err)
			}
			ss = append(ss, s)
		}
		results[0] = append(results[0], ss)
	}
	return goalRows([]comparison{c}, results)
}

// TestFloorSmoke runs the consume and sync publish comparisons, floors included, for a few
// windows on the embedded broker: every variant handles or sends every message, and the
// judged table has the floor's row beside the SDK's, against the same target.
func TestFloorSmoke(t *testing.T) {
	h := newHarness(t, "")
	sync := smokeRows(t, h.syncGoal(h.publish(comparisonNames[3], false, noBatching, noBatching), noBatching))
	if len(sync) != 2 || sync[1].Table != "floor" || sync[1].Variant != floorSenderName+" / raw Send" || sync[1].Target != sync[0].Target {
		t.Errorf("sync publish: judged rows %+v, want the SDK's and the floor's against one target", sync)
	}
	for _, conc := range []int{1, 4} {
		c := h.consume(comparisonNames[0], conc)
		rows := smokeRows(t, c)
		if len(rows) != 2 {
			t.Fatalf("WithConcurrency(%d): %d judged rows, want the SDK's and the floor's", conc, len(rows))
		}
		sdk, floor := rows[0], rows[1]
		wantFloor := floorName
		if conc > 1 {
			wantFloor = fmt.Sprintf("%s, %d workers", floorName, conc)
		}
		if floor.Table != "floor" || floor.Variant != wantFloor+" / "+classifyRef {
			t.Errorf("WithConcurrency(%d): the floor's row is %q in table %q", conc, floor.Variant, floor.Table)
		}
		if sdk.Table != "reference" || floor.Target != sdk.Target || floor.HiMax != 0 {
			t.Errorf("WithConcurrency(%d): the floor's target %v (hi %v) is not the SDK's %v", conc, floor.Target, floor.HiMax, sdk.Target)
		}
	}
}

// TestFloorSpendingSmoke runs the consume comparison with BENCH_FLOOR_EXTRA set for a few
// windows on the embedded broker: the floor that spends more a message is one more variant,
// which handles every message and is not judged, and its profiles' file names are not caught
// by the floor's pattern in the package documentation (contract-floor-[0-9]*).
func TestFloorSpendingSmoke(t *testing.T) {
	h := newHarness(t, "")
	saved := *floorExtra
	*floorExtra = 200 * time.Nanosecond
	t.Cleanup(func() { *floorExtra = saved })
	c := h.consume(comparisonNames[0], 1)
	var names []string
	for _, v := range c.sdks {
		names = append(names, v.name)
	}
	want := floorName + ", handler spending 200ns a message"
	if !slices.Contains(names, want) {
		t.Fatalf("variants %q, want %q among them", names, want)
	}
	if rows := smokeRows(t, c); len(rows) != 2 {
		t.Errorf("%d judged rows, want the SDK's and the floor's alone", len(rows))
	}
	if floor := slug(floorName) + "-"; !strings.HasPrefix(slug(want), floor) || unicode.IsDigit(rune(slug(want)[len(floor)])) {
		t.Errorf("slug %q: the floor's pattern %s[0-9]* would take its profiles too", slug(want), floor)
	}
}

// spinSink keeps the result of spin alive.
var spinSink atomic.Uint64

// spin runs n rounds of a xorshift generator, which touch no memory.
func spin(n int) {
	x := uint64(n) | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	spinSink.Store(x)
}

// spinner returns a function that spends about d of CPU a call in spin: the rounds are
// calibrated once, from the fastest of five timed runs (a slower one was preempted).
func spinner(d time.Duration) func() {
	const probe = 1 << 22
	best := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		spin(probe)
		best = min(best, time.Since(start))
	}
	n := int(float64(d) / float64(best) * probe)
	return func() { spin(n) }
}
