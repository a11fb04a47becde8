//go:build unix

package benchcompare_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// latencyName names the latency comparison for BENCH_ONLY, as comparisonNames name the
// others: it runs when the filter selects this name (selects: "latency", say).
const latencyName = "latency under load"

// stampProp is the property that carries a message's scheduled send time: nanoseconds since
// latencyEpoch on the monotonic clock. Producer and consumers are in the same process, so
// the one clock serves both ends, whichever broker the run uses.
const stampProp = "bench-sent-ns"

// latencyEpoch is the origin of the stamps.
var latencyEpoch = time.Now()

// sinceEpoch is the clock of the latency comparison: the time since latencyEpoch.
func sinceEpoch() time.Duration { return time.Since(latencyEpoch) }

// latencyLoads are the rates of the latency comparison, as fractions of the raw maximum.
var latencyLoads = [...]float64{0.25, 0.50, 0.75}

// latencyPercentiles are the judged percentiles and their targets: the SDK's latency over
// the raw client's at the same rate, at most (issue 27, item 2).
var latencyPercentiles = [...]struct {
	name   string
	q      float64 // the quantile in percent, as hdrhistogram takes it
	target float64
}{
	{"p50", 50, 1.10},
	{"p99", 99, 1.10},
	{"p99.9", 99.9, 1.25},
}

const (
	// latencyWindow bounds the time a window is scheduled to last: a window has
	// min(BENCH_N, rate × latencyWindow) messages.
	latencyWindow = 5 * time.Second
	// latencyBursts is the number of closed-loop bursts of every side: the median of the raw
	// side's is the raw maximum, and the capacity table pairs the sides burst by burst. One
	// burst's CPU a message moves by several per cent from the next, so the ratios need an
	// interval: medianCI gives one from 6 bursts, and from 10 one narrower than the range.
	latencyBursts = 10
	// latencyMaxUsec is the highest latency the histograms track, 60 s; a higher one is
	// recorded as 60 s.
	latencyMaxUsec = 60_000_000
	// latencyVariant names what the latency rows compare.
	latencyVariant = "SDK PublishAsync → Consumer / raw SendAsync → Receive"
	// latencyFloorVariant names what the latency floor's rows compare.
	latencyFloorVariant = "contract floor / raw SendAsync → Receive"
	// latencyComparisonPrefix starts the Comparison of every latency row; the rate label
	// follows.
	latencyComparisonPrefix = "publish → handler latency at "
)

// latencyRecorder collects the latencies one consumer side measures, a window at a time.
// The side calls take with each message's properties the moment it has the message (the raw
// Receive returned it, the SDK handler was called with it): the latency is that moment
// minus the message's scheduled send time, so a send that went out late, or waited for the
// producer, counts from when it was due. It is safe for concurrent use.
type latencyRecorder struct {
	now func() time.Duration // the clock the stamps are read against (a fake one in tests)

	mu      sync.Mutex
	hist    *hdrhistogram.Histogram // µs, 1 µs … 60 s, 3 significant digits
	want    int                     // the messages the window waits for
	got     int                     // the messages received in the window
	stamped int                     // of which carried a readable stamp
	last    time.Duration           // when the last of them was received
	done    chan struct{}           // closed once got reaches want, or on a failure
	closed  bool                    // done is closed
	err     error                   // the consumer side's first failure
}

// newLatencyRecorder returns a recorder reading the clock now, waiting for no window yet.
func newLatencyRecorder(now func() time.Duration) *latencyRecorder {
	r := &latencyRecorder{now: now, hist: hdrhistogram.New(1, latencyMaxUsec, 3)}
	r.expect(0)
	return r
}

// expect starts a window of n messages: what was recorded before is dropped.
func (r *latencyRecorder) expect(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist.Reset()
	r.want, r.got, r.stamped, r.last = n, 0, 0, 0
	r.done, r.closed = make(chan struct{}), false
	if n == 0 {
		r.finishLocked()
	}
}

// take records a message the consumer side has just received, by its properties. A message
// without a stamp (a burst's) is counted but has no latency.
func (r *latencyRecorder) take(props map[string]string) {
	at := r.now()
	due, err := strconv.ParseInt(props[stampProp], 10, 64)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got++
	r.last = at
	if err == nil {
		r.stamped++
		usec := min(max((at-time.Duration(due)).Microseconds(), 0), latencyMaxUsec)
		if err := r.hist.RecordValue(usec); err != nil && r.err == nil {
			r.err = fmt.Errorf("recording %d µs: %w", usec, err)
		}
	}
	if r.got == r.want {
		r.finishLocked()
	}
}

// fail records a failure of the consumer side and ends the window's wait.
func (r *latencyRecorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	r.finishLocked()
}

func (r *latencyRecorder) finishLocked() {
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

// latencyStats are what one window measured: its latencies in µs at latencyPercentiles and
// their maximum, the messages that carried a stamp, and when the last message came.
type latencyStats struct {
	pct     [len(latencyPercentiles)]float64
	max     float64
	stamped int
	last    time.Duration
}

// wait waits until the window's messages have all been received, or the consumer side
// failed, or timeout passed, and returns the window's figures.
func (r *latencyRecorder) wait(timeout time.Duration) (latencyStats, error) {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return latencyStats{}, r.err
	}
	if r.got < r.want {
		return latencyStats{}, fmt.Errorf("received %d of %d messages in %v", r.got, r.want, timeout)
	}
	s := latencyStats{max: float64(r.hist.Max()), stamped: r.stamped, last: r.last}
	for i, p := range latencyPercentiles {
		s.pct[i] = float64(r.hist.ValueAtQuantile(p.q))
	}
	return s, nil
}

// openLoop sends n messages at rate a second on a fixed schedule: message i is due at
// start + i/rate, start being now() when it begins. It sleeps until a message is due and
// sends one that is already late at once, without moving the later ones: the schedule is
// the intended load whatever the system under test does, and a stall of the sender (a full
// producer queue, a slow call) shows up as latency of every message it held back, counted
// from when each was due. A closed-loop sender would instead wait out the stall and send
// fewer messages during it, the coordinated omission that hides the tail.
func openLoop(n int, rate float64, now func() time.Duration, sleep func(time.Duration), send func(due time.Duration) error) error {
	start := now()
	for i := range n {
		due := start + time.Duration(float64(i)*float64(time.Second)/rate)
		if d := due - now(); d > 0 {
			sleep(d)
		}
		if err := send(due); err != nil {
			return fmt.Errorf("message %d of %d: %w", i+1, n, err)
		}
	}
	return nil
}

// latencySide is one side of the latency comparison: a producer and a consumer on a topic
// of their own, the consumer running throughout and handing what it receives to rec.
type latencySide struct {
	name string
	slug string                        // its topic's name in the harness, which names its profiles (BENCH_PROFILE)
	send func(due time.Duration) error // sends one message stamped due, asynchronously
	rec  *latencyRecorder

	wg     sync.WaitGroup // sends not yet called back
	failed atomic.Int64   // sends called back with an error
}

// sent is the end of one send of the side.
func (s *latencySide) sent(err error) {
	if err != nil {
		s.failed.Add(1)
	}
	s.wg.Done()
}

// settle waits for the receipts of the side's sends and fails when any send did.
func (s *latencySide) settle() error {
	s.wg.Wait()
	return failures(s.failed.Swap(0))
}

// latencyProducer are the producer options of both sides: batching disabled, so that each
// message goes out on its own at once on either side. With a batch builder every message
// would wait for its batch to fill or for BatchingMaxPublishDelay, the same wait on both
// sides, which would dominate the latency and drown what the SDK adds in it.
func latencyProducer(o *apulsar.ProducerOptions) { noBatching(o) }

// A latency side is a producer half and a consumer half on a topic of their own. The halves
// are built apart so that the SDK's producer can be paired with the floor's consumer and the
// reverse: the capacity table says which half of the SDK carries its gap to the floor.

// consumerHalf starts the consumer of a side on topic, running until the test's end and
// handing what it receives to s.rec.
type consumerHalf func(h *harness, topic string, s *latencySide)

// producerHalf makes the producer of a side on topic and returns its send: one message
// stamped due, sent asynchronously, its receipt reported to s.sent.
type producerHalf func(h *harness, topic string, s *latencySide) func(due time.Duration) error

// latencySideOf is the side named name of the two halves, on a topic of its own.
func (h *harness) latencySideOf(name, topicName string, consume consumerHalf, produce producerHalf) *latencySide {
	topic := h.topic(topicName)
	s := &latencySide{name: name, slug: topicName, rec: newLatencyRecorder(sinceEpoch)}
	consume(h, topic, s)
	s.send = produce(h, topic, s) // its cleanup runs first: the producer closes before the consumer stops
	return s
}

// rawLoop is the consumer half of the raw client: a loop of receive and then handle, on a
// consumer of the harness's subscription, until the test's end. A failure goes to the side's
// recorder, named by who.
func rawLoop(who string,
	receive func(context.Context, apulsar.Consumer) func() (apulsar.Message, error),
	handle func(context.Context, apulsar.Consumer, *latencySide) func(apulsar.Message) error,
) consumerHalf {
	return func(h *harness, topic string, s *latencySide) {
		c := h.subscribe(topic)
		ctx, cancel := context.WithCancel(context.Background())
		recv, work := receive(ctx, c), handle(ctx, c, s)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				m, err := recv()
				if err != nil {
					if ctx.Err() == nil {
						s.rec.fail(fmt.Errorf("%s Receive: %w", who, err))
					}
					return
				}
				if err := work(m); err != nil {
					s.rec.fail(fmt.Errorf("%s: %w", who, err))
				}
			}
		}()
		h.t.Cleanup(func() { cancel(); <-stopped }) // before the consumer is closed
	}
}

// rawProducer is the producer half of the raw client: a producer with the latency
// comparison's options that sends what next makes of the message's due time.
func rawProducer(next func(due time.Duration) (*apulsar.ProducerMessage, error)) producerHalf {
	return func(h *harness, topic string, s *latencySide) func(time.Duration) error {
		po := apulsar.ProducerOptions{Topic: topic}
		latencyProducer(&po)
		p, err := h.client.CreateProducer(po)
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(p.Close)
		callback := func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) { s.sent(err) }
		return func(due time.Duration) error {
			msg, err := next(due)
			if err != nil {
				return err
			}
			s.wg.Add(1)
			p.SendAsync(context.Background(), msg, callback)
			return nil
		}
	}
}

// stamped returns props with the due time of a message in stampProp.
func stamped(props map[string]string, due time.Duration) map[string]string {
	props[stampProp] = strconv.FormatInt(int64(due), 10)
	return props
}

// rawLatencySide is the raw side: SendAsync of the prepared envelope with the stamp added to
// its properties, and a loop of Receive + Ack.
func (h *harness) rawLatencySide() *latencySide {
	msg := rawMessage(h.t)
	return h.latencySideOf("raw SendAsync → Receive + Ack", "latency-raw",
		rawLoop("raw",
			func(ctx context.Context, c apulsar.Consumer) func() (apulsar.Message, error) {
				return func() (apulsar.Message, error) { return c.Receive(ctx) }
			},
			func(_ context.Context, c apulsar.Consumer, s *latencySide) func(apulsar.Message) error {
				return func(m apulsar.Message) error {
					s.rec.take(m.Properties())
					return c.Ack(m)
				}
			}),
		rawProducer(func(due time.Duration) (*apulsar.ProducerMessage, error) {
			// A map per message, as the SDK side's header map.
			return &apulsar.ProducerMessage{Payload: msg.Payload, Properties: stamped(maps.Clone(msg.Properties), due)}, nil
		}))
}

// sdkConsumerHalf is the SDK's consumer half: a Consumer with a handler that does nothing
// but record, running until the test's end.
func sdkConsumerHalf(h *harness, topic string, s *latencySide) {
	t := h.t
	c, err := bqpulsar.NewConsumer(h.client,
		bqpulsar.WithTopic(topic), bqpulsar.WithSubscription("bench", apulsar.Exclusive),
		bqpulsar.WithConcurrency(1),
		bqpulsar.Handle(urn, func(_ context.Context, _ *envelope.Envelope, m apulsar.Message) error {
			s.rec.take(m.Properties())
			return nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
}

// sdkPublisherHalf is the SDK's producer half: PublishAsync with the stamp in WithHeaders.
// WithHeaders reads its map during the call only, so one map and one option serve every
// publish of the side (its sends come from one goroutine), as the raw side stamps the
// properties of its one prepared message: neither allocates for the stamp.
func sdkPublisherHalf(h *harness, topic string, s *latencySide) func(time.Duration) error {
	t := h.t
	pub, err := bqpulsar.NewPublisher(h.client, topic, bqpulsar.WithProducerOptions(latencyProducer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the consumer stops
		if err := pub.Close(); err != nil {
			t.Error(err)
		}
	})
	callback := func(_ string, err error) { s.sent(err) }
	stamp := make(map[string]string, 1)
	withStamp := bqpulsar.WithHeaders(stamp)
	return func(due time.Duration) error {
		s.wg.Add(1)
		stamp[stampProp] = strconv.FormatInt(int64(due), 10)
		err := pub.PublishAsync(context.Background(), urn, data, callback, withStamp)
		if err != nil {
			s.wg.Done() // nothing was sent: no callback comes
		}
		return err
	}
}

// sdkLatencySide is the SDK side: PublishAsync with the stamp in WithHeaders, and a
// Consumer with a handler that does nothing but record.
func (h *harness) sdkLatencySide() *latencySide {
	return h.latencySideOf("SDK PublishAsync → Consumer", "latency-sdk", sdkConsumerHalf, sdkPublisherHalf)
}

// floorConsumerHalf is the contract floor's consumer half: the consume floor's loop
// (stoppableReceive, then contractWork), whose handler records.
var floorConsumerHalf = rawLoop("floor", stoppableReceive,
	func(ctx context.Context, c apulsar.Consumer, s *latencySide) func(apulsar.Message) error {
		return contractWork(ctx, c, func(_ context.Context, _ *envelope.Envelope, m apulsar.Message) error {
			s.rec.take(m.Properties())
			return nil
		})
	})

// floorProducerHalf is the contract floor's producer half: a fresh envelope for every
// message, made with the SDK's exported functions (envelope.Make, Encode,
// ProjectProperties: new ids, the clock, the six properties), sent with SendAsync.
var floorProducerHalf = rawProducer(func(due time.Duration) (*apulsar.ProducerMessage, error) {
	msg, err := madeMessage()
	if err != nil {
		return nil, err
	}
	msg.Properties = stamped(msg.Properties, due)
	return msg, nil
})

// floorLatencySide is the contract's floor of the latency comparison: a producer and a
// consumer that keep the contract and do nothing else (floorProducerHalf,
// floorConsumerHalf). Its rows are judged against the same targets as the SDK's: if the
// floor misses one, no SDK can meet it on this machine.
func (h *harness) floorLatencySide() *latencySide {
	return h.latencySideOf("contract floor: SendAsync of an envelope made per message → Receive + the contract's work", "latency-floor",
		floorConsumerHalf, floorProducerHalf)
}

// mixedLatencySides pair each half of the SDK with the other half of the floor: the SDK's
// producer with the floor's consumer, and the floor's producer with the SDK's consumer.
// They run in the capacity bursts only.
func (h *harness) mixedLatencySides() []*latencySide {
	return []*latencySide{
		h.latencySideOf("SDK PublishAsync → the floor's consumer", "latency-sdk-producer", floorConsumerHalf, sdkPublisherHalf),
		h.latencySideOf("the floor's producer → SDK Consumer", "latency-sdk-consumer", sdkConsumerHalf, floorProducerHalf),
	}
}

// window runs one open-loop window of side s: n messages at rate a second. It returns once
// every receipt and every message is in.
func (h *harness) window(s *latencySide, n int, rate float64) (latencyStats, error) {
	s.rec.expect(n)
	sendErr := openLoop(n, rate, sinceEpoch, time.Sleep, s.send)
	if err := errors.Join(sendErr, s.settle()); err != nil {
		return latencyStats{}, err
	}
	st, err := s.rec.wait(time.Duration(float64(n)/rate*float64(time.Second)) + time.Minute)
	if err == nil && st.stamped != n {
		err = fmt.Errorf("%d of %d messages carried no readable %s", n-st.stamped, n, stampProp)
	}
	if h.broker != nil {
		h.broker.TrimAll() // what was acknowledged is let go
	}
	return st, err
}

// burst is one closed-loop burst of side s: n messages sent as fast as the producer takes
// them (a send blocks while the producer's queue of pending messages is full). It returns the
// end to end rate, messages received a second from the first send to the last receive, and
// the CPU time of the whole process a message, in µs, as measure takes a window (after a
// collection, so that no earlier garbage is paid for inside).
func (h *harness) burst(s *latencySide, n int) (capacity, error) {
	var start, last time.Duration
	smp, err := measure(variant{
		prepare: func(n int) error { s.rec.expect(n); return nil },
		run: func(n int) error {
			start = sinceEpoch()
			for range n {
				if err := s.send(sinceEpoch()); err != nil {
					return errors.Join(err, s.settle())
				}
			}
			if err := s.settle(); err != nil {
				return err
			}
			st, err := s.rec.wait(time.Minute)
			last = st.last
			return err
		},
	}, n)
	if err != nil {
		return capacity{}, err
	}
	if h.broker != nil {
		h.broker.TrimAll()
	}
	return capacity{rate: float64(n) / (last - start).Seconds(), cpu: smp.cpuPerMsg()}, nil
}

// capacityBurst is burst for the capacity table, burst number round of side s. With
// BENCH_PROFILE set, a CPU profile of the whole process is written while it runs, to
// capacity-<s.slug>-<round>.pprof in that directory, so that where two sides' CPU goes can
// be set side by side, burst for burst (see the package doc).
func (h *harness) capacityBurst(s *latencySide, n, round int) (capacity, error) {
	var c capacity
	err := profiled(fmt.Sprintf("capacity-%s-%02d", s.slug, round), func() error {
		var err error
		c, err = h.burst(s, n)
		return err
	})
	return c, err
}

// capacity is what one closed-loop burst of a side measured.
type capacity struct {
	rate float64 // messages a second, end to end
	cpu  float64 // µs of the process's CPU a message
}

// latencyLoad is what the comparison measured at one rate.
type latencyLoad struct {
	frac     float64        // the rate as a fraction of the raw maximum
	rate     float64        // messages a second
	n        int            // messages a window
	raw, sdk []latencyStats // one a repeat
	floor    []latencyStats // the contract floor's, one a repeat
}

// label names the rate in the tables, e.g. "25 % of raw max (3000 msgs/s)".
func (l latencyLoad) label() string {
	return fmt.Sprintf("%.0f %% of raw max (%.0f msgs/s)", l.frac*100, l.rate)
}

// latencyRun is a whole latency comparison: the raw maximum and the loads measured under it.
type latencyRun struct {
	bursts    []float64 // the raw maximum's bursts, msgs/s
	burstN    int
	sides     []string     // the capacity table's sides: raw, SDK, floor, then the mixed ones
	capacity  [][]capacity // side → burst
	rawMax    float64
	loads     []latencyLoad
	reps      int
	took      time.Duration
	where     string
	sdkName   string
	rawName   string
	floorName string
}

// latency runs the latency comparison with windows of at most n messages and reps repeats,
// and returns its report and its judged rows (one a rate and percentile).
//
// It first measures the capacity of every side in this run, the SDK's halves each paired with
// the floor's other half included (mixedLatencySides): after a warm-up burst of each,
// latencyBursts closed-loop bursts of n messages of each, interleaved in rotating order. The
// raw maximum is the median of the raw side's.
// Then, at each of latencyLoads of it, it warms both sides up with a short window and runs
// reps repeats of a window of min(n, rate × latencyWindow) messages on each side, in an
// order that rotates from one repeat to the next. Every window is open loop (openLoop) and
// its latencies are counted from the scheduled send times (latencyRecorder). The rows
// compare the SDK's percentiles with the raw ones of the same repeat.
func (h *harness) latency(n, reps int) (string, []judgedRow) {
	t := h.t
	start := time.Now()
	raw, sdk, floor := h.rawLatencySide(), h.sdkLatencySide(), h.floorLatencySide()
	run := latencyRun{burstN: n, reps: reps, where: h.where(), rawName: raw.name, sdkName: sdk.name, floorName: floor.name}
	// The capacity of every side, the mixed ones included, in closed-loop bursts interleaved
	// in rotating order; the raw side's bursts give the raw maximum.
	all := append([]*latencySide{raw, sdk, floor}, h.mixedLatencySides()...) // raw at capacityRaw, floor at capacityFloor
	run.capacity = make([][]capacity, len(all))
	for _, s := range all {
		run.sides = append(run.sides, s.name)
		if _, err := h.burst(s, min(n/10+1, 2000)); err != nil {
			t.Fatalf("latency: %s: warm-up burst: %v", s.name, err)
		}
	}
	for r := range latencyBursts {
		for k := range all {
			i := (r + k) % len(all)
			c, err := h.capacityBurst(all[i], n, r)
			if err != nil {
				t.Fatalf("latency: %s: capacity burst: %v", all[i].name, err)
			}
			run.capacity[i] = append(run.capacity[i], c)
		}
	}
	for _, c := range run.capacity[capacityRaw] {
		run.bursts = append(run.bursts, c.rate)
	}
	run.rawMax = median(run.bursts)
	sides := [...]*latencySide{raw, sdk, floor}
	for _, frac := range latencyLoads {
		l := latencyLoad{frac: frac, rate: frac * run.rawMax}
		l.n = max(min(n, int(l.rate*latencyWindow.Seconds())), 1)
		warm := min(l.n, max(l.n/5, 200))
		for _, s := range sides {
			if _, err := h.window(s, warm, l.rate); err != nil {
				t.Fatalf("latency at %s: %s: warm-up: %v", l.label(), s.name, err)
			}
		}
		for r := range reps {
			for k := range sides { // rotating order: side (r+k) mod 3 first
				side := (r + k) % len(sides)
				st, err := h.window(sides[side], l.n, l.rate)
				if err != nil {
					t.Fatalf("latency at %s: %s: %v", l.label(), sides[side].name, err)
				}
				switch side {
				case 0:
					l.raw = append(l.raw, st)
				case 1:
					l.sdk = append(l.sdk, st)
				default:
					l.floor = append(l.floor, st)
				}
			}
		}
		run.loads = append(run.loads, l)
	}
	run.took = time.Since(start)
	rows := run.judged()
	return run.render(rows), rows
}

// ratios returns, repeat by repeat, the latency of side (the SDK's or the floor's windows
// of this load) at percentile index p over the raw side's (a raw figure of 0 µs counts as
// 1 µs).
func (l latencyLoad) ratios(side []latencyStats, p int) []float64 {
	out := make([]float64, len(l.raw))
	for r := range l.raw {
		out[r] = side[r].pct[p] / max(l.raw[r].pct[p], 1)
	}
	return out
}

// judged returns the rows of the run judged by judge: one a rate and percentile for the SDK
// (table "latency"), then as many for the contract floor (table "latency floor").
func (run latencyRun) judged() []judgedRow {
	var rows []judgedRow
	for _, floor := range []bool{false, true} {
		for _, l := range run.loads {
			for p, pc := range latencyPercentiles {
				side, table, variant, who := l.sdk, "latency", latencyVariant, "SDK"
				if floor {
					side, table, variant, who = l.floor, "latency floor", latencyFloorVariant, "floor"
				}
				r := judge(l.ratios(side, p), pc.target, true, 0)
				r.Table = table
				r.Comparison = latencyComparisonPrefix + l.label()
				r.Variant = variant
				r.Metric = pc.name + " " + who + "/raw"
				r.TargetText = r.targetText()
				rows = append(rows, r)
			}
		}
	}
	return rows
}

// latencyHeader is the header of the latency table.
const latencyHeader = "| Rate | Percentile | raw µs, median | SDK µs, median | latency SDK/raw, median [95% CI] (min–max) | Target | Met |"

// latencyFloorHeader is the header of the latency floor's table.
const latencyFloorHeader = "| Rate | Percentile | raw µs, median | floor µs, median | latency floor/raw, median [95% CI] (min–max) | Target | Met |"

// render is the latency comparison's report: how it ran, the absolute latencies and the
// judged ratios (rows, in the order of run.judged).
func (run latencyRun) render(rows []judgedRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nbench-compare, %s: open-loop publish at a fixed rate, each message's latency from its scheduled send time to its receipt by the handler (SDK) or Receive (raw); %d repeats of each side at each rate, interleaved in rotating order, %s, %s\n",
		latencyName, run.reps, machine(), run.took.Round(time.Second))
	writeProvenance(&b, run.where)
	bursts := make([]string, len(run.bursts))
	for i, r := range run.bursts {
		bursts[i] = fmt.Sprintf("%.0f", r)
	}
	fmt.Fprintf(&b, "Raw maximum: %.0f msgs/s end to end (median of %d closed-loop bursts of %d messages, %s: %s msgs/s). Both sides send with batching disabled.\n\n",
		run.rawMax, len(run.bursts), run.burstN, run.rawName, strings.Join(bursts, ", "))
	run.renderCapacity(&b)
	b.WriteString("Absolute latencies (µs, median of the repeats):\n\n")
	b.WriteString("| Rate | Side | msgs/window |")
	for _, pc := range latencyPercentiles {
		b.WriteString(" " + pc.name + " |")
	}
	b.WriteString(" max |\n| --- | --- | --- |" + strings.Repeat(" --- |", len(latencyPercentiles)+1) + "\n")
	for _, l := range run.loads {
		for _, side := range []struct {
			name string
			ss   []latencyStats
		}{{run.rawName, l.raw}, {run.sdkName, l.sdk}, {run.floorName, l.floor}} {
			fmt.Fprintf(&b, "| %s | %s | %d |", l.label(), side.name, l.n)
			for p := range latencyPercentiles {
				fmt.Fprintf(&b, " %.0f |", median(eachStat(side.ss, func(s latencyStats) float64 { return s.pct[p] })))
			}
			fmt.Fprintf(&b, " %.0f |\n", median(eachStat(side.ss, func(s latencyStats) float64 { return s.max })))
		}
	}
	i := 0
	for _, table := range []struct {
		caption, header string
		side            func(latencyLoad) []latencyStats
	}{
		{
			"SDK against raw latency, repeat by repeat (" + latencyVariant + ")", latencyHeader,
			func(l latencyLoad) []latencyStats { return l.sdk },
		},
		{
			"The contract floor against raw latency, repeat by repeat (" + latencyFloorVariant + "): met says the target is within reach of a producer and consumer that keep the contract, not met that it is out of reach here",
			latencyFloorHeader, func(l latencyLoad) []latencyStats { return l.floor },
		},
	} {
		b.WriteString("\n" + table.caption + ":\n\n")
		b.WriteString(table.header + "\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, l := range run.loads {
			side := table.side(l)
			for p, pc := range latencyPercentiles {
				r := rows[i]
				i++
				at := func(s latencyStats) float64 { return s.pct[p] }
				fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %s | %s |\n", l.label(), pc.name,
					median(eachStat(l.raw, at)), median(eachStat(side, at)), spread(l.ratios(side, p)), r.TargetText, r.Verdict)
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}

// capacityHeader is the header of the capacity table.
const capacityHeader = "| Side | msgs/s, median | rate / raw | CPU µs/msg, median | CPU / raw | CPU / floor |"

// renderCapacity writes the capacity table: the closed-loop rate and CPU of every side, the
// SDK's producer and consumer each paired with the floor's other half included. At a fixed
// rate a side runs at the rate over its own maximum, and a queue's waiting time grows as
// 1/(1 − that): a side with less capacity waits longer at the same rate. The ratios pair the
// bursts of one round (which ran back to back), with the interval of their median: a side
// whose CPU interval against the floor holds 1.00 is not shown to cost more than the floor.
func (run latencyRun) renderCapacity(b *strings.Builder) {
	fmt.Fprintf(b, "Capacity of each side: %d closed-loop bursts of %d messages, interleaved in rotating order (the raw maximum above is the raw side's); CPU of the whole process; ratios burst by burst, median [95 %% interval] (range):\n\n", latencyBursts, run.burstN)
	b.WriteString(capacityHeader + "\n| --- | --- | --- | --- | --- | --- |\n")
	rate := func(c capacity) float64 { return c.rate }
	cpu := func(c capacity) float64 { return c.cpu }
	ratio := func(i, base int, f func(capacity) float64) string {
		if i == base {
			return "—"
		}
		xs := make([]float64, len(run.capacity[i]))
		for r, c := range run.capacity[i] {
			xs[r] = f(c) / f(run.capacity[base][r])
		}
		return spread(xs)
	}
	for i, name := range run.sides {
		fmt.Fprintf(b, "| %s | %.0f | %s | %.2f | %s | %s |\n", name,
			median(eachCapacity(run.capacity[i], rate)), ratio(i, capacityRaw, rate),
			median(eachCapacity(run.capacity[i], cpu)), ratio(i, capacityRaw, cpu), ratio(i, capacityFloor, cpu))
	}
	b.WriteString("\n")
}

// capacityRaw and capacityFloor are the raw side's and the floor's places among a latency
// run's sides (see latency).
const (
	capacityRaw   = 0
	capacityFloor = 2
)

// eachCapacity is each for capacity bursts.
func eachCapacity(cs []capacity, f func(capacity) float64) []float64 {
	out := make([]float64, len(cs))
	for i, c := range cs {
		out[i] = f(c)
	}
	return out
}

// eachStat is each for latency windows.
func eachStat(ss []latencyStats, f func(latencyStats) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// compareSelected runs what the filter only selects, as TestCompare does: the comparisons
// whose name starts with it, and the latency comparison when latencyName does (all of them
// when only is empty). It returns the report: the tables of both, and the judged rows of both for
// the chart. A filter that selects nothing fails the test, as comparisons does.
func (h *harness) compareSelected(only string, n, reps int) report {
	withLatency := selects(only, latencyName)
	var rep report
	if !withLatency || slices.ContainsFunc(comparisonNames[:], func(name string) bool { return selects(only, name) }) {
		rep = h.compareAll(h.comparisons(only), n, reps)
	}
	if !withLatency {
		return rep
	}
	text, rows := h.latency(n, reps)
	return report{text: rep.text + text, rows: append(rep.rows, rows...)}
}

// The open-loop generator keeps its schedule through a stall, and the recorder counts every
// message from when it was due: a send stalled for 5 ms makes the messages it held back
// late by 4, 3, 2 and 1 ms, where a closed-loop sender would record no latency at all.
func TestOpenLoopCountsFromTheSchedule(t *testing.T) {
	var now time.Duration // the fake clock
	clock := func() time.Duration { return now }
	rec := newLatencyRecorder(clock)
	const n = 10
	rec.expect(n)
	var dues []time.Duration
	err := openLoop(n, 1000, clock, func(d time.Duration) { now += d }, func(due time.Duration) error {
		dues = append(dues, due)
		rec.take(map[string]string{stampProp: strconv.FormatInt(int64(due), 10)}) // received at once
		if len(dues) == 3 {
			now += 5 * time.Millisecond // the third send stalls the sender
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, due := range dues {
		if want := time.Duration(i) * time.Millisecond; due != want {
			t.Errorf("message %d was due at %v, want %v: the schedule moved", i, due, want)
		}
	}
	st, err := rec.wait(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The latencies are 0, 0, 0, 4, 3, 2, 1, 0, 0, 0 ms: the median 0, the tail 4 ms.
	if st.stamped != n || st.pct[0] != 0 || !near(st.pct[1], 4000) || !near(st.max, 4000) {
		t.Errorf("stamped %d, p50 %v µs, p99 %v µs, max %v µs; want 10, 0, 4000, 4000", st.stamped, st.pct[0], st.pct[1], st.max)
	}
	if err := openLoop(1, 1000, clock, func(time.Duration) {}, func(time.Duration) error { return errors.New("refused") }); err == nil {
		t.Error("openLoop hid a failed send")
	}
}

// near reports whether x is within the histogram's precision (3 significant digits) of want.
func near(x, want float64) bool { return x >= want*0.999 && x <= want*1.001 }

// The recorder counts a message without a stamp (a burst's) without a latency, waits for the
// window's count, and reports a consumer failure or a short window as an error.
func TestLatencyRecorder(t *testing.T) {
	now := 10 * time.Millisecond
	rec := newLatencyRecorder(func() time.Duration { return now })
	rec.expect(2)
	rec.take(map[string]string{})
	rec.take(map[string]string{stampProp: strconv.FormatInt(int64(9*time.Millisecond), 10)})
	st, err := rec.wait(time.Second)
	if err != nil || st.stamped != 1 || !near(st.max, 1000) || st.last != now {
		t.Errorf("got %+v, %v; want 1 stamped message of 1000 µs received at %v", st, err, now)
	}
	rec.expect(2)
	rec.take(map[string]string{})
	if _, err := rec.wait(time.Millisecond); err == nil {
		t.Error("a window short of a message did not fail")
	}
	rec.expect(1)
	rec.fail(errors.New("receive failed"))
	if _, err := rec.wait(time.Minute); err == nil || err.Error() != "receive failed" {
		t.Errorf("wait after a failure = %v", err)
	}
}

// With BENCH_PROFILE, a capacity burst writes a CPU profile named by its side and round;
// without it, none.
func TestCapacityBurstProfile(t *testing.T) {
	h := newHarness(t, "")
	s := h.rawLatencySide()
	defer func(old string) { *profileDir = old }(*profileDir)
	dir := filepath.Join(t.TempDir(), "profiles")
	*profileDir = "" // whatever BENCH_PROFILE the test run has
	if _, err := h.capacityBurst(s, 200, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("without BENCH_PROFILE a burst wrote %s (%v)", dir, err)
	}
	*profileDir = dir
	c, err := h.capacityBurst(s, 200, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.rate <= 0 || c.cpu <= 0 {
		t.Errorf("the profiled burst measured %+v", c)
	}
	b, err := os.ReadFile(filepath.Join(dir, "capacity-latency-raw-03.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the profile is not a gzipped pprof profile (%d bytes)", len(b))
	}
}

// With BENCH_PROFILE, every measured window of a comparison writes a CPU profile named by
// the comparison, the variant and the repeat; the warm-up windows write none.
func TestWindowProfile(t *testing.T) {
	h := newHarness(t, "")
	defer func(old string) { *profileDir = old }(*profileDir)
	*profileDir = filepath.Join(t.TempDir(), "profiles")
	c := h.consume(comparisonNames[1], 4)
	h.compareAll([]comparison{c}, 100, 1)
	entries, err := os.ReadDir(*profileDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"window-consume-no-op-handler-withconcurrency-4-raw-receive-ack-00.pprof"}
	for _, v := range c.sdks {
		want = append(want, "window-consume-no-op-handler-withconcurrency-4-"+slug(v.name)+"-00.pprof")
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("profiles %q, want %q", got, want)
	}
	if !slices.Contains(got, "window-consume-no-op-handler-withconcurrency-4-sdk-consumer-withconcurrency-4-00.pprof") {
		t.Errorf("no profile of the SDK's window among %q", got)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"consume, no-op handler":                "consume-no-op-handler",
		"SDK Consumer, WithConcurrency(4)":      "sdk-consumer-withconcurrency-4",
		"raw Receive + envelope.Classify + Ack": "raw-receive-envelope-classify-ack",
		"  µs / msg ":                           "µs-msg",
		"":                                      "",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// The latency comparison runs in a few tiny windows against a broker it is not given (the
// BENCH_PULSAR_URL mode) and reports every rate and percentile. It measures nothing.
func TestLatencySmoke(t *testing.T) {
	b := pulsartest.NewBroker(t)
	h := newHarness(t, b.URL())
	report, rows := h.latency(200, 2)
	if want := "Broker: a broker outside this process (" + b.URL() + ")"; !strings.Contains(report, want) {
		t.Errorf("the report has no %q:\n%s", want, report)
	}
	// The capacity table: a row for every side, each ratio with its interval, but a side's
	// against itself.
	_, capTable, _ := strings.Cut(report, capacityHeader+"\n")
	capTable, _, _ = strings.Cut(capTable, "\n\n")
	for k, side := range []string{"raw SendAsync", "SDK PublishAsync → Consumer", "contract floor", "SDK PublishAsync → the floor's consumer", "the floor's producer → SDK Consumer"} {
		var cells []string
		for line := range strings.Lines(capTable) {
			if c := splitRow(line); strings.HasPrefix(c[0], side) {
				cells = c
			}
		}
		if len(cells) != strings.Count(capacityHeader, "|")-1 {
			t.Errorf("the capacity table has no row of %d cells for %q:\n%s", strings.Count(capacityHeader, "|")-1, side, report)
			continue
		}
		for col, self := range map[int]bool{2: k == capacityRaw, 4: k == capacityRaw, 5: k == capacityFloor} {
			if c := cells[col]; (self && c != "—") || (!self && !ratioCell.MatchString(c)) {
				t.Errorf("capacity row %q, column %d: %q, want %s", side, col+1, c, map[bool]string{true: "—", false: "a ratio with its interval and range"}[self])
			}
		}
	}
	for _, header := range []string{latencyHeader, latencyFloorHeader, capacityHeader} {
		if !strings.Contains(report, "Raw maximum: ") || !strings.Contains(report, header+"\n") {
			t.Errorf("the report has no raw maximum or no table headed %q:\n%s", header, report)
		}
	}
	if want := 2 * len(latencyLoads) * len(latencyPercentiles); len(rows) != want {
		t.Fatalf("%d rows, want %d (the SDK's and the floor's)", len(rows), want)
	}
	i := 0
	for _, side := range []struct{ table, variant, who string }{
		{"latency", latencyVariant, "SDK"},
		{"latency floor", latencyFloorVariant, "floor"},
	} {
		for _, frac := range latencyLoads {
			for _, pc := range latencyPercentiles {
				r := rows[i]
				i++
				label, ok := strings.CutPrefix(r.Comparison, latencyComparisonPrefix)
				if !ok || !strings.HasPrefix(label, fmt.Sprintf("%.0f %% of raw max (", frac*100)) {
					t.Errorf("row %d is for %q, want %.0f %% of the raw maximum", i, r.Comparison, frac*100)
				}
				if r.Table != side.table || r.Variant != side.variant || r.Metric != pc.name+" "+side.who+"/raw" || r.Target != pc.target || !r.AtMost {
					t.Errorf("row %d: %+v", i, r)
				}
				if r.Verdict != verdictUndecided { // 2 repeats have no interval
					t.Errorf("row %d: verdict %q with 2 repeats", i, r.Verdict)
				}
				if line := "| " + label + " | " + pc.name + " | "; !strings.Contains(report, line) {
					t.Errorf("the report has no row %q:\n%s", line, report)
				}
			}
		}
	}
}
