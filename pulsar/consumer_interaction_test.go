package pulsar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/mocks"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

const (
	testTopic     = "persistent://public/default/orders-partition-2"
	testParent    = "persistent://public/default/orders"
	testDLQ       = "persistent://public/default/orders.dlq"
	testURN       = "urn:babel:orders:created"
	otherURN      = "urn:babel:orders:cancelled"
	traceparent   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	noRetryPolicy = 0
)

// harness is a consumer built on mocks: a settler, and one sender per topic.
type harness struct {
	t       *testing.T
	ctrl    *gomock.Controller
	settler *mocks.MockSettler
	senders map[string]*mocks.MockSender
	created []string
	mu      sync.Mutex
	errs    []error
	errEnvs []*envelope.Envelope
	errMsgs []apulsar.Message
	events  []Event
	logs    *observer.ObservedLogs
	c       *Consumer
}

// mockReceiver makes the consumer receive from a new mock, which it returns for the test's
// expectations.
func (h *harness) mockReceiver() *mocks.MockReceiver {
	recv := mocks.NewMockReceiver(h.ctrl)
	h.c.recv = recv
	return recv
}

func newHarness(t *testing.T, opts ...ConsumerOption) *harness {
	t.Helper()
	ctrl := gomock.NewController(t)
	h := &harness{
		t: t, ctrl: ctrl,
		settler: mocks.NewMockSettler(ctrl),
		senders: map[string]*mocks.MockSender{
			testParent: mocks.NewMockSender(ctrl),
			testDLQ:    mocks.NewMockSender(ctrl),
		},
	}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	base := []ConsumerOption{
		WithSubscription("sub", apulsar.Shared),
		WithRetry(retry.Policy{}),
		WithLogger(zap.New(core)),
		WithHooks(Hooks{Event: func(e Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, e)
			if reportsFailure(e) {
				h.errs = append(h.errs, e.Err)
				h.errEnvs = append(h.errEnvs, e.Envelope)
				h.errMsgs = append(h.errMsgs, e.Message)
			}
		}}),
	}
	cfg, err := consumerSetup(append(base, opts...))
	require.NoError(t, err)
	require.NoError(t, checkStrategy(cfg))
	h.c = newConsumer(cfg, nil, h.settler, func(topic string) (seam.Sender, func(), error) {
		h.mu.Lock()
		h.created = append(h.created, topic)
		h.mu.Unlock()
		s, ok := h.senders[topic]
		if !ok {
			return nil, nil, fmt.Errorf("no sender for %q", topic)
		}
		return s, func() {}, nil
	})
	t.Cleanup(func() { require.NoError(t, h.c.Close()) })
	return h
}

// reportsFailure reports whether e is one of the events that report a failure: what the
// error hook was given before the one Event hook took its place.
func reportsFailure(e Event) bool {
	switch e.Kind {
	case EventGateRejected, EventPoison, EventFailed, EventUnknownURN, EventTruncated, EventError:
		return e.Err != nil
	case EventDropped:
		return errors.Is(e.Err, ErrExhausted)
	case EventNacked: // a failed settlement, not a Delivery.Nack's own reason
		return errors.Is(e.Err, ErrSettle) || errors.Is(e.Err, ErrRepublish) || errors.Is(e.Err, ErrDeadLetterWrite)
	default:
		return false
	}
}

func (h *harness) failures() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, e := range h.events {
		if reportsFailure(e) {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

func (h *harness) kinds() []EventKind {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]EventKind, 0, len(h.events))
	for _, e := range h.events {
		out = append(out, e.Kind)
	}
	return out
}

// runUntil runs the consumer until wait is closed, then ends Run's ctx and checks that Run
// returned ctx's error.
func (h *harness) runUntil(wait <-chan struct{}) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	select {
	case <-wait:
	case err := <-done:
		cancel()
		require.FailNow(h.t, "Run returned early", "%v", err)
	}
	cancel()
	require.ErrorIs(h.t, <-done, context.Canceled, "Run returns ctx.Err() when ctx ends")
}

func (h *harness) process(msg apulsar.Message) {
	h.c.process(withConsumerInfo(h.t.Context(), h.c.eng.info), msg, nil) // as Run derives it
}

// processToDeadLetter processes msg expecting its dead-letter copy to be written, then msg
// to be acknowledged, in that order, and returns the copy (nil if none was written).
func (h *harness) processToDeadLetter(msg apulsar.Message) *apulsar.ProducerMessage {
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	return pm
}

func handlerReturning(err error) HandlerFunc {
	return func(context.Context, *envelope.Envelope, apulsar.Message) error { return err }
}

// newMessage builds a received message carrying a fresh envelope and its six properties
// plus a traceparent header.
func newMessage(tb testing.TB, urn string, attempts int, redelivery uint32) (*fakeMessage, *envelope.Envelope) {
	tb.Helper()
	env, err := envelope.Make(urn, json.RawMessage(`{"id":9007199254740993,"amount":1.0}`), envelope.WithQueue("orders"))
	require.NoError(tb, err)
	env = env.WithAttempts(attempts)
	payload, err := env.Encode()
	require.NoError(tb, err)
	props := ProjectProperties(env)
	props["traceparent"] = traceparent
	return &fakeMessage{topic: testTopic, props: props, payload: payload, key: "k1", redelivery: redelivery}, env
}

// sent captures what a mock sender was given.
func capture(dst **apulsar.ProducerMessage) func(context.Context, *apulsar.ProducerMessage) (apulsar.MessageID, error) {
	return func(_ context.Context, pm *apulsar.ProducerMessage) (apulsar.MessageID, error) {
		*dst = pm
		return apulsar.EarliestMessageID(), nil
	}
}

func decodeDeadLetter(t *testing.T, payload []byte) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Decode(payload)
	require.NoError(t, err)
	require.NotNil(t, env.DeadLetter)
	return env
}

// --- §2.8 row 1: handler failed / unknown URN, exhausted --------------------------------

func TestExhaustedHandlerFailureIsDeadLetteredThenAcked(t *testing.T) {
	t.Parallel()
	failure := errors.New("payment service down")
	h := newHarness(t, Handle(testURN, handlerReturning(failure)), WithMaxAttempts(3))
	msg, env := newMessage(t, testURN, 2, 0) // reconciled 2, counted 3 = maxAttempts
	msg.props[PropDelay] = "250"             // it was published delayed; the copy is not

	pm := h.processToDeadLetter(msg)

	require.NotNil(t, pm)
	cp := decodeDeadLetter(t, pm.Payload)
	assert.Equal(t, envelope.ReasonFailed, cp.DeadLetter.Reason)
	require.NotNil(t, cp.DeadLetter.Error)
	assert.Equal(t, "payment service down", *cp.DeadLetter.Error)
	require.NotNil(t, cp.DeadLetter.Exception)
	assert.Equal(t, "*errors.errorString", *cp.DeadLetter.Exception)
	assert.Equal(t, 3, cp.DeadLetter.Attempts)
	assert.Equal(t, 3, cp.Attempts, "top-level attempts = counted")
	assert.Equal(t, "orders", cp.DeadLetter.OriginalQueue)
	assert.Equal(t, "go", cp.DeadLetter.Lang)
	assert.JSONEq(t, string(env.Data), string(cp.Data))
	assert.Contains(t, string(pm.Payload), `"id":9007199254740993,"amount":1.0`, "data text kept byte for byte")
	assert.Equal(t, "3", pm.Properties[PropAttempts])
	assert.Equal(t, testURN, pm.Properties[PropJob])
	assert.Equal(t, env.Meta.ID, pm.Properties[PropMessageID])
	assert.Equal(t, traceparent, pm.Properties["traceparent"], "other properties kept")
	assert.NotContains(t, pm.Properties, PropDelay, "a dead-letter copy is not delayed")
	assert.Equal(t, "k1", pm.Key)

	fails := h.failures()
	require.Len(t, fails, 1)
	require.Equal(t, EventFailed, fails[0].Kind, "reported as the handler's failure")
	require.ErrorIs(t, fails[0].Err, failure)
	assert.Contains(t, h.kinds(), EventDeadLettered)
	assert.Equal(t, []string{testDLQ}, h.created, "only the dead-letter producer was created")
}

func TestExhaustedUnknownURNIsDeadLetteredWithReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(otherURN, handlerReturning(nil)), WithMaxAttempts(1))
	msg, _ := newMessage(t, testURN, 0, 0)

	pm := h.processToDeadLetter(msg)

	cp := decodeDeadLetter(t, pm.Payload)
	assert.Equal(t, envelope.ReasonUnknownURN, cp.DeadLetter.Reason)
	assert.Equal(t, 1, cp.DeadLetter.Attempts)
	require.NotNil(t, cp.DeadLetter.Exception)
	assert.Equal(t, "*pulsar.UnknownURNError", *cp.DeadLetter.Exception)
	errs := h.errors()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrUnknownURN)
	assert.Contains(t, h.kinds(), EventUnknownURN)
}

func TestExhaustedWithoutDeadLetterIsAckedWithWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		urn    string
		reason envelope.Reason
	}{
		{"handler failed", testURN, envelope.ReasonFailed},
		{"unknown urn", "urn:babel:nobody:home", envelope.ReasonUnknownURN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Handle(testURN, handlerReturning(errors.New("nope"))),
				WithMaxAttempts(2), WithDeadLetter(dlq.Off()))
			msg, _ := newMessage(t, tc.urn, 0, 1) // redelivery count 1 → counted 2
			h.settler.EXPECT().Ack(msg).Return(nil)
			h.process(msg)

			errs := h.errors()
			require.Len(t, errs, 2)
			var ex *ExhaustedError
			require.ErrorAs(t, errs[1], &ex)
			assert.Equal(t, tc.reason, ex.Reason)
			assert.Equal(t, 2, ex.Attempts)
			warn := h.logs.FilterMessage("message dropped: dead-lettering is off").All()
			require.Len(t, warn, 1)
			assert.Equal(t, zapcore.WarnLevel, warn[0].Level)
			assert.Equal(t, string(tc.reason), warn[0].ContextMap()["reason"])
			assert.Contains(t, h.kinds(), EventDropped)
			assert.Empty(t, h.created, "no producer when dead-lettering is off")
		})
	}
}

// --- §2.8 row 2: poison ----------------------------------------------------------------

func TestPoisonIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)), WithMaxAttempts(5))
	payload := []byte("{\"job\":\"urn:x\",\"bad\xff\":1}")
	msg := &fakeMessage{topic: testTopic, payload: payload, props: map[string]string{"traceparent": traceparent, PropAttempts: "1"}}

	pm := h.processToDeadLetter(msg)

	var cp struct {
		Raw        string `json:"raw"`
		RawBase64  []byte `json:"raw_base64"`
		DeadLetter struct {
			Reason        string `json:"reason"`
			Attempts      int    `json:"attempts"`
			OriginalQueue string `json:"original_queue"`
		} `json:"dead_letter"`
	}
	require.NoError(t, json.Unmarshal(pm.Payload, &cp))
	assert.Equal(t, payload, cp.RawBase64, "exact bytes kept")
	assert.Equal(t, "poison", cp.DeadLetter.Reason)
	assert.Equal(t, 2, cp.DeadLetter.Attempts, "counted = valid bq-attempts + 1")
	assert.Equal(t, "orders", cp.DeadLetter.OriginalQueue)
	assert.Equal(t, "2", pm.Properties[PropAttempts])
	assert.Equal(t, traceparent, pm.Properties["traceparent"])
	errs := h.errors()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], envelope.ErrPoison)
	var pe *envelope.PoisonError
	require.ErrorAs(t, errs[0], &pe)
	assert.Equal(t, envelope.RuleUTF8, pe.Rule)
	assert.Nil(t, h.errEnvs[0])
	assert.Same(t, msg, h.errMsgs[0])
	assert.Equal(t, []string{testDLQ}, h.created)
}

func TestPoisonWithoutDeadLetterIsRetriedByteForByteThenAcked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)), WithMaxAttempts(2), WithDeadLetter(dlq.Off()))
	payload := []byte(`[1,2,3]`)
	first := &fakeMessage{topic: testTopic, payload: payload, props: map[string]string{"x-extra": "kept"}}

	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(first).Return(nil),
	)
	h.process(first)
	assert.Equal(t, payload, pm.Payload, "poison retried byte for byte")
	assert.Equal(t, map[string]string{"x-extra": "kept", PropAttempts: "1"}, pm.Properties)

	second := &fakeMessage{topic: testTopic, payload: pm.Payload, props: pm.Properties}
	h.settler.EXPECT().Ack(second).Return(nil)
	h.process(second)
	var ex *ExhaustedError
	errs := h.errors()
	require.ErrorAs(t, errs[len(errs)-1], &ex)
	assert.Equal(t, envelope.ReasonPoison, ex.Reason)
	assert.Len(t, h.logs.FilterMessage("message dropped: dead-lettering is off").All(), 1)
}

// --- §2.8 row 3: gate rejection --------------------------------------------------------

func TestGateRejectionSendsRawCopyOnFirstDelivery(t *testing.T) {
	t.Parallel()
	var handled bool
	h := newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		handled = true
		return nil
	}), HandleUnknown(func(context.Context, *envelope.Envelope, apulsar.Message) error {
		t.Error("HandleUnknown consulted")
		return nil
	}))
	msg, _ := newMessage(t, testURN, 0, 0)
	msg.props[PropSchemaVersion] = "2"
	msg.props[PropAttempts] = "0"
	msg.payload = []byte("not even json") // never decoded

	pm := h.processToDeadLetter(msg)

	assert.False(t, handled)
	assert.Equal(t, msg.payload, pm.Payload, "payload byte for byte, no dead_letter block")
	assert.Equal(t, msg.props, pm.Properties, "properties unchanged")
	errs := h.errors()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrSchemaVersion)
	assert.Nil(t, h.errEnvs[0])
	assert.Same(t, msg, h.errMsgs[0])
	assert.Equal(t, []EventKind{EventReceived, EventGateRejected, EventDeadLettered}, h.kinds())
}

func TestGateRejectionWithoutDeadLetterIsAckedWithWarning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)), WithDeadLetter(dlq.Off()))
	for _, v := range []string{"01", " 1", "1 ", "\u00a0", "2"} {
		msg, _ := newMessage(t, testURN, 0, 0)
		msg.props[PropSchemaVersion] = v
		h.settler.EXPECT().Ack(msg).Return(nil)
		h.process(msg)
	}
	for _, err := range h.errors() {
		require.ErrorIs(t, err, ErrSchemaVersion)
	}
	assert.Len(t, h.errors(), 5)
	assert.Len(t, h.logs.FilterMessage("message dropped: dead-lettering is off").All(), 5)
}

func TestGateLetsAbsentBlankAndOneThrough(t *testing.T) {
	t.Parallel()
	var calls int
	h := newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		calls++
		return nil
	}))
	for _, v := range []string{"", " \t", "1", "-"} {
		msg, _ := newMessage(t, testURN, 0, 0)
		if v == "-" {
			delete(msg.props, PropSchemaVersion)
		} else {
			msg.props[PropSchemaVersion] = v
		}
		h.settler.EXPECT().Ack(msg).Return(nil)
		h.process(msg)
	}
	assert.Equal(t, 4, calls)
	assert.Empty(t, h.errors())
}

// --- §2.8 row 4: a failed dead-letter write is never followed by an ack ------------------

func TestDeadLetterWriteFailureNacks(t *testing.T) {
	t.Parallel()
	writeErr := errors.New("dlq unavailable")
	cases := map[string]func(*fakeMessage){
		"exhausted": func(*fakeMessage) {},
		"poison":    func(m *fakeMessage) { m.payload = []byte("{") },
		"gate":      func(m *fakeMessage) { m.props[PropSchemaVersion] = "3" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Handle(testURN, handlerReturning(errors.New("boom"))), WithMaxAttempts(1))
			msg, _ := newMessage(t, testURN, 0, 0)
			mutate(msg)
			h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, writeErr)
			h.settler.EXPECT().Nack(msg)
			// No Ack expected: gomock fails the test on any Ack call.
			h.process(msg)

			errs := h.errors()
			last := errs[len(errs)-1]
			require.ErrorIs(t, last, ErrDeadLetterWrite)
			require.ErrorIs(t, last, writeErr)
			var se *SendError
			require.ErrorAs(t, last, &se)
			assert.Equal(t, testDLQ, se.Topic)
			assert.NotContains(t, h.kinds(), EventDeadLettered)
			logged := h.logs.FilterMessage("settlement send failed; message negatively acknowledged").All()
			require.Len(t, logged, 1)
			assert.Equal(t, zapcore.WarnLevel, logged[0].Level)
			assert.Equal(t, testDLQ, logged[0].ContextMap()["to"])
			assert.Equal(t, testTopic, logged[0].ContextMap()["topic"])
		})
	}
}

func TestDeadLetterProducerCreationFailureNacks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("boom"))), WithMaxAttempts(1),
		WithDeadLetter(dlq.Config{Topic: "persistent://public/default/nowhere"}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Nack(msg)
	h.process(msg)
	errs := h.errors()
	require.ErrorIs(t, errs[len(errs)-1], ErrDeadLetterWrite)
}

// --- retries ---------------------------------------------------------------------------

func TestRetryRepublishesToParentWithAttemptsThenAcks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))), WithMaxAttempts(5))
	msg, env := newMessage(t, testURN, 1, 0) // reconciled 1 → counted 2
	msg.orderingKey = "ok"
	msg.props[PropDelay] = "250" // the original was delayed; this retry is not

	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)

	assert.Equal(t, []string{testParent}, h.created, "retries go to the parent topic")
	got, err := envelope.Classify(pm.Payload)
	require.NoError(t, err)
	assert.Equal(t, 2, got.Attempts, "body attempts = counted")
	want, err := env.WithAttempts(2).Encode()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(pm.Payload), "everything else byte for byte")
	wantProps := ProjectProperties(env)
	wantProps["traceparent"] = traceparent
	wantProps[PropAttempts] = "2"
	assert.Equal(t, wantProps, pm.Properties)
	assert.Equal(t, "k1", pm.Key)
	assert.Equal(t, "ok", pm.OrderingKey)
	assert.Zero(t, pm.DeliverAfter, "no backoff configured")
	assert.Contains(t, h.kinds(), EventRetried)
}

func TestRetryRepublishFailureNacks(t *testing.T) {
	t.Parallel()
	sendErr := apulsar.ErrSendTimeout
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, sendErr)
	h.settler.EXPECT().Nack(msg)
	h.process(msg)
	errs := h.errors()
	require.ErrorIs(t, errs[len(errs)-1], ErrRepublish)
	require.ErrorIs(t, errs[len(errs)-1], sendErr)
	assert.NotContains(t, h.kinds(), EventRetried)
}

func TestRetryBackoffUsesDeliverAfterOnShared(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))),
		WithRetry(retry.Policy{Backoff: retry.Backoff{Initial: 2 * time.Second, Multiplier: 3}}))
	msg, _ := newMessage(t, testURN, 1, 0) // counted 2 → second retry
	var pm *apulsar.ProducerMessage
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, 6*time.Second, pm.DeliverAfter)
	assert.Equal(t, "6000", pm.Properties[PropDelay])
}

func TestRetryBackoffWaitsLocallyOnExclusive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))),
		WithSubscription("sub", apulsar.Exclusive),
		WithRetry(retry.Policy{Backoff: retry.Backoff{Initial: 30 * time.Millisecond}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	var pm *apulsar.ProducerMessage
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
	h.settler.EXPECT().Ack(msg).Return(nil)
	start := time.Now()
	h.process(msg)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "the consumer waited the backoff")
	assert.Zero(t, pm.DeliverAfter, "the broker ignores DeliverAfter on Exclusive")
}

func TestRetryBackoffWaitEndsWithCtx(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))),
		WithSubscription("sub", apulsar.Failover),
		WithRetry(retry.Policy{Backoff: retry.Backoff{Initial: time.Hour}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Nack(msg)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	h.c.process(withConsumerInfo(ctx, h.c.eng.info), msg, nil)
	errs := h.errors()
	require.ErrorIs(t, errs[len(errs)-1], context.DeadlineExceeded)
}

func TestRetryByNackOnShared(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))),
		WithRetry(retry.Policy{Strategy: retry.Nack, MaxAttempts: 3}))
	msg, _ := newMessage(t, testURN, 0, 1)
	h.settler.EXPECT().Nack(msg)
	h.process(msg)
	assert.Empty(t, h.created, "nack needs no producer")
	assert.Contains(t, h.kinds(), EventRetried)
}

func TestNackRetryRefusedWhereItWouldLoop(t *testing.T) {
	t.Parallel()
	nack := WithRetry(retry.Policy{Strategy: retry.Nack})
	for _, st := range []apulsar.SubscriptionType{apulsar.Exclusive, apulsar.Failover} {
		cfg, err := consumerSetup([]ConsumerOption{Handle(testURN, handlerReturning(nil)), WithSubscription("s", st), nack})
		require.NoError(t, err)
		err = checkStrategy(cfg)
		require.ErrorIs(t, err, ErrInvalidOption, "type %d", st)
		assert.Contains(t, err.Error(), "loop")
	}
}

func TestReconcileDrivesExhaustion(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithMaxAttempts(3))
	msg, _ := newMessage(t, testURN, 0, 0)
	msg.props[PropAttempts] = "7" // valid property wins over body attempts 0
	var pm *apulsar.ProducerMessage
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, "8", pm.Properties[PropAttempts])

	// Invalid property: body attempts (1) vs redelivery count (4) → reconciled 4, counted 5.
	h2 := newHarness(t, Handle(testURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		assert.Equal(t, 4, env.Attempts, "the handler sees reconciled attempts")
		return errors.New("x")
	}), WithMaxAttempts(10))
	msg2, _ := newMessage(t, testURN, 1, 4)
	msg2.props[PropAttempts] = "+3"
	var pm2 *apulsar.ProducerMessage
	h2.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm2))
	h2.settler.EXPECT().Ack(msg2).Return(nil)
	h2.process(msg2)
	assert.Equal(t, "5", pm2.Properties[PropAttempts])
}

// --- dispatch and hooks ----------------------------------------------------------------

func TestSuccessAcks(t *testing.T) {
	t.Parallel()
	var got *envelope.Envelope
	h := newHarness(t, Handle(testURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		got = env
		return nil
	}))
	msg, env := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	require.NotNil(t, got)
	assert.Equal(t, env.Meta.ID, got.Meta.ID)
	assert.Empty(t, h.errors())
	kinds := h.kinds()
	assert.Equal(t, []EventKind{EventReceived, EventHandled, EventAcked}, kinds)
}

func TestAckFailureIsReported(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(nil)))
	msg, _ := newMessage(t, testURN, 0, 0)
	ackErr := errors.New("ack lost")
	h.settler.EXPECT().Ack(msg).Return(ackErr)
	h.process(msg)
	errs := h.errors()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], ErrSettle)
	require.ErrorIs(t, errs[0], ackErr)
}

func TestHandlerPanicIsAFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		panic("kaboom")
	}), WithMaxAttempts(1))
	msg, _ := newMessage(t, testURN, 0, 0)
	var pm *apulsar.ProducerMessage
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	cp := decodeDeadLetter(t, pm.Payload)
	require.NotNil(t, cp.DeadLetter.Exception)
	assert.Equal(t, "*pulsar.PanicError", *cp.DeadLetter.Exception)
	assert.Contains(t, *cp.DeadLetter.Error, "kaboom")
	fails := h.failures()
	require.ErrorIs(t, fails[0].Err, ErrPanic)
	require.Equal(t, EventFailed, fails[0].Kind, "reported as the handler's failure")
}

func TestHandleUnknownAcks(t *testing.T) {
	t.Parallel()
	var seen string
	var wrapped bool
	h := newHarness(t, HandleUnknown(func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		seen = env.URN()
		return nil
	}), WithHooks(Hooks{Handler: func(next HandlerFunc) HandlerFunc {
		return func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			wrapped = true
			return next(ctx, env, msg)
		}
	}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, testURN, seen)
	assert.False(t, wrapped, "HandleUnknown's handler is not wrapped by the Handler hooks")
	errs := h.errors()
	require.Len(t, errs, 1, "only the unknown URN is reported, no failure")
	require.ErrorIs(t, errs[0], ErrUnknownURN)
	assert.Equal(t, []EventKind{EventReceived, EventUnknownURN, EventHandled, EventAcked}, h.kinds())
}

func TestPanickingHandleUnknownIsAnUnknownURN(t *testing.T) {
	t.Parallel()
	h := newHarness(t, HandleUnknown(func(context.Context, *envelope.Envelope, apulsar.Message) error { panic("hook bug") }), WithMaxAttempts(2))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	errs := h.errors()
	require.Len(t, errs, 2)
	require.ErrorIs(t, errs[0], ErrUnknownURN)
	require.ErrorIs(t, errs[1], ErrPanic)
	assert.Contains(t, h.kinds(), EventRetried, "retried as an unknown URN")
}

func TestRoutingPropertyWinsAndMismatchHook(t *testing.T) {
	t.Parallel()
	type call struct{ prop, body string }
	var calls []call
	var routed string
	h := newHarness(t,
		Handle(otherURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
			routed = env.URN()
			return nil
		}),
		Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			t.Error("body URN must not win")
			return nil
		}),
		WithHooks(Hooks{Event: func(e Event) {
			if e.Kind != EventRoutingMismatch {
				return
			}
			require.NotNil(t, e.Envelope)
			require.NotNil(t, e.Message)
			calls = append(calls, call{e.URN, e.Envelope.URN()})
		}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	msg.props[PropJob] = otherURN
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, testURN, routed, "the handler got the envelope as received")
	assert.Equal(t, []call{{otherURN, testURN}}, calls)

	// A blank property routes on the body.
	h2 := newHarness(t, Handle(testURN, handlerReturning(nil)), WithHooks(Hooks{Event: func(e Event) {
		if e.Kind == EventRoutingMismatch {
			t.Error("no mismatch for a blank property")
		}
	}}))
	msg2, _ := newMessage(t, testURN, 0, 0)
	msg2.props[PropJob] = " \t"
	h2.settler.EXPECT().Ack(msg2).Return(nil)
	h2.process(msg2)
}

func TestPanickingMismatchHookIsRecoveredWithoutAFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(otherURN, handlerReturning(nil)),
		WithHooks(Hooks{Event: func(e Event) {
			if e.Kind == EventRoutingMismatch {
				panic("hook bug")
			}
		}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	msg.props[PropJob] = otherURN
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Empty(t, h.errors(), "no failure is reported for a mismatch hook panic")
	assert.Len(t, h.logs.FilterMessage("event hook panicked").All(), 1)
	assert.Contains(t, h.kinds(), EventAcked, "the settlement is unchanged")
}

func TestPanickingHooksDoNotCrash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithMaxAttempts(1),
		WithDeadLetter(dlq.Off()),
		WithHooks(Hooks{
			Event: func(Event) { panic("bad hook") },
			Delivery: func(ctx context.Context, _ apulsar.Message) (context.Context, func(Event)) {
				return ctx, func(Event) { panic("bad settlement hook") }
			},
		}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.NotEmpty(t, h.logs.FilterMessage("event hook panicked").All())
	assert.NotEmpty(t, h.logs.FilterMessage("delivery hook's settlement panicked").All())
	assert.Contains(t, h.kinds(), EventDropped, "the hooks after a panicking one still see every event")
}

func TestObserverSeesLatencyAndAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		time.Sleep(5 * time.Millisecond)
		return nil
	}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, EventAcked, h.events[len(h.events)-1].Kind, "the settlement comes last")
	last := h.events[len(h.events)-2]
	assert.Equal(t, EventHandled, last.Kind)
	assert.Equal(t, testURN, last.URN)
	assert.Equal(t, 1, last.Attempt)
	assert.Equal(t, testTopic, last.Topic)
	assert.GreaterOrEqual(t, last.Latency, 5*time.Millisecond)
}

func TestFailedSendReplacesTheProducer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithMaxAttempts(1))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, apulsar.ErrSendTimeout)
	h.settler.EXPECT().Nack(msg)
	h.process(msg)
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, []string{testDLQ, testDLQ}, h.created, "a producer whose send failed is replaced")
}
