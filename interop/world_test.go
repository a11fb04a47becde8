package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// namespace is where every scenario's topics live; the peer's transport gets it as its topic
// prefix, so that a queue name means the same topic on both sides.
const namespace = "persistent://public/default/"

// What the peer program reports (see python/peer.py).

// peerMessage is a message the peer received or sent, byte for byte.
type peerMessage struct {
	Topic           string            `json:"topic"`
	Payload         []byte            `json:"payload_b64"`
	Properties      map[string]string `json:"properties"`
	RedeliveryCount int               `json:"redelivery_count"`
	PublishTimeMs   int64             `json:"publish_time_ms"`
	ReceivedAtMs    int64             `json:"received_at_ms"`
	RouteURN        string            `json:"route_urn"` // the SDK's routing URN (bq-job)
	Body            []byte            `json:"body_b64"`  // the body after the SDK's reconciliation
}

// peerHandled is one call of a peer handler: the envelope, data and meta as the SDK gave them
// (re-encoded by Python's json), and whether the handler raised.
type peerHandled struct {
	URN          string `json:"urn"`
	Delivery     int    `json:"delivery"`
	EnvelopeJSON string `json:"envelope_json"`
	DataJSON     string `json:"data_json"`
	MetaJSON     string `json:"meta_json"`
	Raised       bool   `json:"raised"`
}

type consumeResult struct {
	Processed  int           `json:"processed"`
	Deliveries []peerMessage `json:"deliveries"`
	Handled    []peerHandled `json:"handled"`
	Sent       []peerMessage `json:"sent"`
}

type publishResult struct {
	IDs  []string      `json:"ids"`
	Sent []peerMessage `json:"sent"`
}

type redriveItem struct {
	MessageID string `json:"message_id"`
	TraceID   string `json:"trace_id"`
	URN       string `json:"urn"`
	Reason    string `json:"reason"`
	FromQueue string `json:"from_queue"`
	To        string `json:"to"`
	Redriven  bool   `json:"redriven"`
}

type redriveResult struct {
	Redriven   int           `json:"redriven"`
	Skipped    int           `json:"skipped"`
	Items      []redriveItem `json:"items"`
	Deliveries []peerMessage `json:"deliveries"`
	Sent       []peerMessage `json:"sent"`
}

// pyEnvelope is an envelope as the peer's handler saw it.
type pyEnvelope struct {
	Job        string          `json:"job"`
	TraceID    string          `json:"trace_id"`
	Data       json.RawMessage `json:"data"`
	Meta       map[string]any  `json:"meta"` // numbers as json.Number
	Attempts   json.Number     `json:"attempts"`
	DeadLetter map[string]any  `json:"dead_letter"`
}

// metaInt is the integer meta member key, failing the test when it is not one.
func (e pyEnvelope) metaInt(t *testing.T, key string) int64 {
	t.Helper()
	n, ok := e.Meta[key].(json.Number)
	require.True(t, ok, "meta.%s is a number: %v", key, e.Meta[key])
	v, err := n.Int64()
	require.NoError(t, err, "meta.%s", key)
	return v
}

func decodePy(t *testing.T, text string) pyEnvelope {
	t.Helper()
	var e pyEnvelope
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&e), "the peer's envelope: %s", text)
	return e
}

// world is one scenario on one broker: the target, the Go client, the peer, and a fresh topic.
type world struct {
	t      *testing.T
	tg     *brokertest.Target
	py     *pythonPeer
	client apulsar.Client
	topic  string // persistent://public/default/<queue>
	queue  string // the logical queue name, the peer's queue
}

func newWorld(t *testing.T, tg *brokertest.Target, py *pythonPeer) *world {
	t.Helper()
	topic := tg.Topic(t, "interop")
	return &world{t: t, tg: tg, py: py, client: tg.Client(t), topic: topic, queue: strings.TrimPrefix(topic, namespace)}
}

func (w *world) dlqTopic() string { return w.topic + ".dlq" }

func (w *world) spec(s map[string]any) map[string]any {
	s["url"], s["prefix"] = w.tg.URL, namespace
	return s
}

// peerPublish has the peer publish msgs (each a map with mode, queue and the mode's fields).
func (w *world) peerPublish(msgs ...map[string]any) publishResult {
	w.t.Helper()
	for _, m := range msgs {
		if _, ok := m["queue"]; !ok {
			m["queue"] = w.queue
		}
	}
	var res publishResult
	w.py.run(w.t, "publish", w.spec(map[string]any{"messages": msgs}), &res)
	return res
}

// peerConsume runs a peer worker on the scenario's queue (subscription "py" unless given).
func (w *world) peerConsume(s map[string]any) consumeResult {
	w.t.Helper()
	if _, ok := s["queue"]; !ok {
		s["queue"] = w.queue
	}
	if _, ok := s["subscription"]; !ok {
		s["subscription"] = "py"
	}
	var res consumeResult
	w.py.run(w.t, "consume", w.spec(s), &res)
	return res
}

func (w *world) peerRedrive(s map[string]any) redriveResult {
	w.t.Helper()
	var res redriveResult
	w.py.run(w.t, "redrive", w.spec(s), &res)
	return res
}

// publisher is a Go Publisher on the scenario's topic.
func (w *world) publisher() *bqpulsar.Publisher {
	w.t.Helper()
	p, err := bqpulsar.NewPublisher(w.client, w.topic)
	require.NoError(w.t, err)
	w.t.Cleanup(func() { _ = p.Close() })
	return p
}

// sendRaw sends payload with props through a plain producer: what a foreign or older producer
// puts on the wire, which this SDK's Publisher would refuse to build.
func (w *world) sendRaw(topic string, payload []byte, props map[string]string) {
	w.t.Helper()
	p, err := w.client.CreateProducer(apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	require.NoError(w.t, err)
	defer p.Close()
	_, err = p.Send(w.t.Context(), &apulsar.ProducerMessage{Payload: payload, Properties: props})
	require.NoError(w.t, err)
}

// subscribeAt creates the durable subscription name on topic at pos, and detaches.
func (w *world) subscribeAt(name string, pos apulsar.SubscriptionInitialPosition) error {
	c, err := w.client.Subscribe(apulsar.ConsumerOptions{
		Topic: w.topic, SubscriptionName: name, Type: apulsar.Shared, SubscriptionInitialPosition: pos,
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", name, err)
	}
	c.Close()
	return nil
}

// goDelivery is one handler call of a Go worker.
type goDelivery struct {
	URN         string // the handler's URN (the routing URN)
	Env         *envelope.Envelope
	Payload     []byte
	Props       map[string]string
	Redelivery  uint32
	PublishTime time.Time
}

// goWorker is this SDK's Consumer on the scenario's topic, recording handler calls, errors,
// routing mismatches and pipeline events.
type goWorker struct {
	t          *testing.T
	calls      chan goDelivery
	mu         sync.Mutex
	errs       []error
	mismatches [][2]string
	events     []bqpulsar.Event
}

func newGoWorker(t *testing.T) *goWorker {
	t.Helper()
	return &goWorker{t: t, calls: make(chan goDelivery, 100)}
}

// handle registers a recording handler for urn whose outcome is decided by outcome (nil: ack).
func (g *goWorker) handle(urn string, outcome func(d goDelivery) error) bqpulsar.ConsumerOption {
	return bqpulsar.Handle(urn, func(_ context.Context, env *envelope.Envelope, msg apulsar.Message) error {
		d := goDelivery{
			URN: urn, Env: env, Payload: bytes.Clone(msg.Payload()), Props: msg.Properties(),
			Redelivery: msg.RedeliveryCount(), PublishTime: msg.PublishTime(),
		}
		g.calls <- d
		if outcome == nil {
			return nil
		}
		return outcome(d)
	})
}

// start runs the Consumer (subscription "go", Shared, unless opts say otherwise) until the
// test ends.
func (g *goWorker) start(w *world, opts ...bqpulsar.ConsumerOption) {
	w.t.Helper()
	base := []bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(w.topic),
		bqpulsar.WithSubscription("go", apulsar.Shared),
		bqpulsar.WithLogger(zap.NewNop()),
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.events = append(g.events, e)
			switch {
			case e.Kind == bqpulsar.EventRoutingMismatch:
				g.mismatches = append(g.mismatches, [2]string{e.URN, e.Envelope.URN()})
			case reportsFailure(e):
				g.errs = append(g.errs, e.Err)
			}
		}}),
	}
	c, err := bqpulsar.NewConsumer(w.client, append(base, opts...)...)
	require.NoError(w.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	w.t.Cleanup(func() {
		cancel()
		<-done
		_ = c.Close()
	})
}

// next returns the next handler call, failing the test after brokertest.WaitLong.
func (g *goWorker) next() goDelivery {
	g.t.Helper()
	select {
	case d := <-g.calls:
		return d
	case <-time.After(brokertest.WaitLong):
		g.t.Fatalf("go worker: no handler call within %s (errors: %v, events: %v)", brokertest.WaitLong, g.errors(), g.kinds())
		return goDelivery{}
	}
}

// quiet fails the test when a handler is called within d.
func (g *goWorker) quiet(d time.Duration) {
	g.t.Helper()
	select {
	case c := <-g.calls:
		g.t.Fatalf("go worker: unexpected handler call for %s: %s", c.URN, c.Payload)
	case <-time.After(d):
	}
}

// reportsFailure reports whether e reports a failure: a step that failed (the handler, the
// gate, the payload, the routing, a receive) or a failed settlement, not a settlement that
// carries the failure it settled.
func reportsFailure(e bqpulsar.Event) bool {
	switch e.Kind {
	case bqpulsar.EventGateRejected, bqpulsar.EventPoison, bqpulsar.EventFailed, bqpulsar.EventUnknownURN,
		bqpulsar.EventTruncated, bqpulsar.EventError:
		return e.Err != nil
	case bqpulsar.EventDropped:
		return errors.Is(e.Err, bqpulsar.ErrExhausted)
	case bqpulsar.EventNacked:
		return errors.Is(e.Err, bqpulsar.ErrSettle) || errors.Is(e.Err, bqpulsar.ErrRepublish) || errors.Is(e.Err, bqpulsar.ErrDeadLetterWrite)
	default:
		return false
	}
}

func (g *goWorker) errors() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]error(nil), g.errs...)
}

func (g *goWorker) kinds() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(g.events))
	for i, e := range g.events {
		out[i] = e.Kind.String()
	}
	return out
}

// waitEvent waits until an event of kind was observed.
func (g *goWorker) waitEvent(kind bqpulsar.EventKind) {
	g.t.Helper()
	testwait.Eventually(g.t, brokertest.WaitLong, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, e := range g.events {
			if e.Kind == kind {
				return true
			}
		}
		return false
	}, "go worker: a %s event (saw %v)", kind, g.kinds())
}

// Comparing JSON values across languages: numbers compare by value (an integer exactly, as
// big.Int; anything else as the nearest float64), objects by members, arrays by elements.

// sameJSON fails the test when the two JSON texts do not hold the same value.
func sameJSON(t *testing.T, want, got string, msgAndArgs ...any) {
	t.Helper()
	w, err := normalJSON(want)
	require.NoError(t, err, "want: %s", want)
	g, err := normalJSON(got)
	require.NoError(t, err, "got: %s", got)
	require.Equal(t, w, g, msgAndArgs...)
}

func normalJSON(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return normalValue(v), nil
}

func normalValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalValue(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalValue(e)
		}
		return x
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if n, ok := new(big.Int).SetString(s, 10); ok {
				return "int " + n.String()
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "number " + s
		}
		if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
			return "int " + strconv.FormatInt(int64(f), 10)
		}
		return "float " + strconv.FormatFloat(f, 'g', -1, 64)
	default:
		return v
	}
}

// sixProps is the contract's property projection of a plain message.
func sixProps(urn, traceID, id, lang string, attempts int) map[string]string {
	return map[string]string{
		"bq-job": urn, "bq-trace-id": traceID, "bq-message-id": id,
		"bq-schema-version": "1", "bq-source-lang": lang, "bq-attempts": strconv.Itoa(attempts),
	}
}

// withProps returns a copy of base with kv (key, value, …) set.
func withProps(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
