package pulsar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

func TestDeadLetterOutcomeDeadLettersOnTheFirstDelivery(t *testing.T) {
	t.Parallel()
	invalid := errors.New("amount is negative")
	h := newHarness(t, Handle(testURN, handlerReturning(DeadLetter(invalid))), WithMaxAttempts(5))
	msg, _ := newMessage(t, testURN, 0, 0) // counted 1 of 5: retries are left
	pm := h.processToDeadLetter(msg)
	require.NotNil(t, pm, "dead-lettered at once, not republished")
	cp := decodeDeadLetter(t, pm.Payload)
	assert.Equal(t, envelope.ReasonFailed, cp.DeadLetter.Reason)
	assert.Equal(t, 1, cp.DeadLetter.Attempts)
	require.NotNil(t, cp.DeadLetter.Error)
	assert.Contains(t, *cp.DeadLetter.Error, "amount is negative")
	errs := h.errors()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], invalid)
	var dl *DeadLetterError
	require.ErrorAs(t, errs[0], &dl)
}

func TestRetryAfterOutcomeDelaysTheRepublish(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(RetryAfter(1500*time.Millisecond, errors.New("rate limited")))),
		WithMaxAttempts(3), WithRetry(retry.Policy{Backoff: retry.Backoff{Initial: time.Hour}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	require.NotNil(t, pm)
	assert.Equal(t, 1500*time.Millisecond, pm.DeliverAfter, "the outcome's delay wins over the policy's backoff")
	assert.Equal(t, "1500", pm.Properties[PropDelay])
	assert.Equal(t, "1", pm.Properties[PropAttempts])
}

func TestRetryAfterOutcomeUnderNackNacksAfterTheDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(RetryAfter(150*time.Millisecond, errors.New("busy")))),
		WithRetry(retry.Policy{Strategy: retry.Nack}))
	msg, _ := newMessage(t, testURN, 0, 0)
	nacked := make(chan time.Time, 1)
	h.settler.EXPECT().Nack(msg).Do(func(apulsar.Message) { nacked <- time.Now() })
	start := time.Now()
	h.process(msg)
	select {
	case at := <-nacked:
		assert.GreaterOrEqual(t, at.Sub(start), 150*time.Millisecond, "nacked only after the delay")
	case <-time.After(10 * time.Second):
		t.Fatal("never nacked")
	}
}

func TestRetryAfterUnderNackIsNackedAtOnceOnClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(RetryAfter(time.Hour, errors.New("busy")))),
		WithRetry(retry.Policy{Strategy: retry.Nack}))
	msg, _ := newMessage(t, testURN, 0, 0)
	nacked := make(chan struct{})
	h.settler.EXPECT().Nack(msg).Do(func(apulsar.Message) { close(nacked) })
	h.process(msg)
	require.NoError(t, h.c.Close())
	select {
	case <-nacked:
	case <-time.After(10 * time.Second):
		t.Fatal("a delayed nack pending at Close was lost")
	}
}

// orderTrace records what the hooks of a test saw, in order, from any goroutine.
type orderTrace struct {
	mu   sync.Mutex
	seen []string
}

func (o *orderTrace) note(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, s)
}

// take returns what was recorded and starts again.
func (o *orderTrace) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.seen
	o.seen = nil
	return seen
}

func TestMiddlewareRunsInTheOrderGivenAroundTheHandler(t *testing.T) {
	t.Parallel()
	var tr orderTrace
	note := tr.note
	mw := func(name string) func(HandlerFunc) HandlerFunc {
		return func(next HandlerFunc) HandlerFunc {
			return func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
				note(name + ">")
				err := next(ctx, env, msg)
				note("<" + name + ":" + errString(err))
				return err
			}
		}
	}
	h := newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		note("handler")
		return errors.New("boom")
	}), WithHooks(Hooks{Handler: mw("a")}), WithHooks(Hooks{Handler: mw("b")}), WithHooks(Hooks{Handler: mw("c")}), WithMaxAttempts(1))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, []string{"a>", "b>", "c>", "handler", "<c:boom", "<b:boom", "<a:boom"}, tr.take())
}

// Several WithHooks compose as WithHooks says: Delivery functions are called in order, each
// given the context the one before returned; a settlement goes to the Event functions
// first, then to the Delivery hooks' settlement functions in reverse order; Publish
// functions are called in order and their outcome functions in reverse order.
func TestHooksComposeInTheDocumentedOrder(t *testing.T) {
	t.Parallel()
	var tr orderTrace
	note := tr.note
	type key struct{}
	hooks := func(name string) Hooks {
		return Hooks{
			Delivery: func(ctx context.Context, _ apulsar.Message) (context.Context, func(Event)) {
				before, _ := ctx.Value(key{}).(string)
				note("delivery " + name + " after " + before)
				return context.WithValue(ctx, key{}, name), func(ev Event) { note("settled " + name + ":" + ev.Kind.String()) }
			},
			Event: func(ev Event) {
				if ev.Kind == EventAcked || ev.Kind == EventRetried {
					note("event " + name + ":" + ev.Kind.String())
				}
			},
			Publish: func(context.Context, *OutgoingMessage) func(apulsar.MessageID, error) {
				note("publish " + name)
				return func(apulsar.MessageID, error) { note("sent " + name) }
			},
		}
	}
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithHooks(hooks("a")), WithHooks(hooks("b")))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, []string{
		"delivery a after ", "delivery b after a",
		"publish a", "publish b", "sent b", "sent a",
		"event a:retried", "event b:retried", "settled b:retried", "settled a:retried",
	}, tr.take())

	p, prod := newMockPublisher(t, WithHooks(hooks("a")), WithHooks(hooks("b")))
	prod.EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	_, err := p.Publish(t.Context(), testURN, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"publish a", "publish b", "sent b", "sent a"}, tr.take(), "a publisher calls its Publish hooks alone")
}

func TestMiddlewareCanDecideWithoutTheHandler(t *testing.T) {
	t.Parallel()
	called := false
	skip := func(HandlerFunc) HandlerFunc {
		return func(context.Context, *envelope.Envelope, apulsar.Message) error { return nil }
	}
	h := newHarness(t, Handle(testURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		called = true
		return nil
	}), WithHooks(Hooks{Handler: skip}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.False(t, called)
}

func TestNilHookFieldsAreSkipped(t *testing.T) {
	t.Parallel()
	cfg, err := consumerSetup([]ConsumerOption{Handle(testURN, handlerReturning(nil)), WithHooks(Hooks{})})
	require.NoError(t, err)
	assert.Nil(t, newHookSet(cfg.hooks, nil), "hooks without a function are no hooks")
	_, err = consumerSetup([]ConsumerOption{HandleUnknown(nil)})
	require.ErrorIs(t, err, ErrInvalidOption)
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

type ctxKey struct{}

func TestDeliveryHookContextReachesTheHandlerAndItsSettlementIsReported(t *testing.T) {
	t.Parallel()
	var got []Event
	var mu sync.Mutex
	hook := func(ctx context.Context, _ apulsar.Message) (context.Context, func(Event)) {
		return context.WithValue(ctx, ctxKey{}, "span"), func(s Event) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, s)
		}
	}
	var seen any
	var eventCtx []any
	h := newHarness(t, Handle(testURN, func(ctx context.Context, _ *envelope.Envelope, _ apulsar.Message) error {
		seen = ctx.Value(ctxKey{})
		return errors.New("once")
	}), WithHooks(Hooks{Delivery: hook}), WithMaxAttempts(2), WithHooks(Hooks{Event: func(e Event) {
		if e.Context != nil {
			eventCtx = append(eventCtx, e.Context.Value(ctxKey{}))
		}
	}}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, "span", seen)
	require.NotEmpty(t, eventCtx)
	for _, v := range eventCtx {
		assert.Equal(t, "span", v, "observer events carry the delivery's context")
	}
	require.Len(t, got, 1)
	assert.Equal(t, EventRetried, got[0].Kind)
	assert.Equal(t, 1, got[0].Attempt)
	assert.Equal(t, testURN, got[0].URN)
	assert.EqualError(t, got[0].Err, "once")
}

func TestHealthFollowsSettlementWritesAndAcks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithMaxAttempts(1))
	require.True(t, h.c.Health().Ready)

	msg, _ := newMessage(t, testURN, 0, 0)
	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, errors.New("dlq down"))
	h.settler.EXPECT().Nack(msg)
	h.process(msg)
	hl := h.c.Health()
	assert.True(t, hl.Live)
	assert.False(t, hl.Ready, "a failing dead-letter write makes the consumer not ready")
	assert.Contains(t, strings.Join(hl.Reasons, ";"), "dlq down")

	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	ackErr := errors.New("connection lost")
	h.settler.EXPECT().Ack(msg).Return(ackErr)
	h.process(msg)
	hl = h.c.Health()
	assert.False(t, hl.Ready, "a failed ack makes it not ready")
	assert.Contains(t, strings.Join(hl.Reasons, ";"), "connection lost")
	var se *SettleError
	require.ErrorAs(t, h.errors()[len(h.errors())-1], &se, "the failed ack reaches the error hook")

	h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(apulsar.EarliestMessageID(), nil)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.True(t, h.c.Health().Ready, "ready again after a successful write and ack")

	require.NoError(t, h.c.Close())
	hl = h.c.Health()
	assert.False(t, hl.Live)
	assert.Equal(t, []string{"stopped"}, hl.Reasons)
}

func TestPermanentRepublishErrorDeadLettersInsteadOfLooping(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithMaxAttempts(3))
	msg, _ := newMessage(t, testURN, 0, 0)
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, tooBig()),
		h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	require.NotNil(t, pm, "dead-lettered, not nacked to loop")
	assert.Equal(t, envelope.ReasonFailed, decodeDeadLetter(t, pm.Payload).DeadLetter.Reason)
}

func TestDeadLetterRefusedAsTooBigIsTruncatedAndWrittenOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New(strings.Repeat("e", 200_000)))), WithMaxAttempts(1))
	msg, _ := newMessage(t, testURN, 0, 0)
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, tooBig()),
		h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	require.NotNil(t, pm)
	assert.Contains(t, string(pm.Payload), `"truncated":true`)
	assert.Contains(t, h.kinds(), EventTruncated)
	var te *truncatedError
	found := false
	for _, err := range h.errors() {
		found = found || (errors.As(err, &te) && errors.Is(err, ErrTruncated))
	}
	assert.True(t, found, "the truncation is reported")
}

func TestRetryCopyTooLargeGoesToTheDeadLetterPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("x"))), WithMaxAttempts(3), WithMaxMessageSize(64<<10))
	env, err := envelope.Make(testURN, map[string]any{"blob": strings.Repeat("b", 70<<10)}, envelope.WithQueue("orders"))
	require.NoError(t, err)
	payload, err := env.Encode()
	require.NoError(t, err)
	msg := &fakeMessage{topic: testTopic, props: ProjectProperties(env), payload: payload}
	pm := h.processToDeadLetter(msg)
	require.NotNil(t, pm, "no republish was tried")
	// The dead-letter copy would be over the bound as well: it is the truncated, marked copy
	// within it, written at once rather than after the broker refuses the whole.
	assert.Contains(t, string(pm.Payload), `"truncated":true`)
	assert.LessOrEqual(t, messageSize(pm), 64<<10)
	assert.Contains(t, h.kinds(), EventTruncated)
}

// Without WithMaxMessageSize the bound is 5 MiB less 64 KiB: a dead-letter copy just over
// it is truncated, one well under it is written whole.
func TestDefaultMaxMessageSizeIsFiveMiBLessSixtyFourKiB(t *testing.T) {
	t.Parallel()
	const limit = 5<<20 - 64<<10
	for _, tc := range []struct {
		blob      int
		truncated bool
	}{
		{blob: limit - 32<<10, truncated: false},
		{blob: limit + 16<<10, truncated: true},
	} {
		h := newHarness(t, Handle(testURN, handlerReturning(DeadLetter(errors.New("x")))))
		env, err := envelope.Make(testURN, map[string]any{"blob": strings.Repeat("b", tc.blob)}, envelope.WithQueue("orders"))
		require.NoError(t, err)
		payload, err := env.Encode()
		require.NoError(t, err)
		msg := &fakeMessage{topic: testTopic, props: ProjectProperties(env), payload: payload}
		pm := h.processToDeadLetter(msg)
		require.NotNil(t, pm)
		assert.Equal(t, tc.truncated, strings.Contains(string(pm.Payload), `"truncated":true`), "a %d-byte blob", tc.blob)
		assert.Equal(t, tc.truncated, slices.Contains(h.kinds(), EventTruncated), "a %d-byte blob", tc.blob)
	}
}

// permanentForMessage tells the send errors that no retry of the same copy can cure (the
// copy goes to the dead-letter path) from those that a later attempt may (the message is
// negatively acknowledged): a closed producer is replaced by a fresh one, so it is not
// permanent, though it is not retryable either.
func TestPermanentForMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apulsar.ErrMessageTooLarge, true},
		{apulsar.ErrTopicTerminated, true},
		{apulsar.ErrProducerFenced, true},
		{apulsar.ErrInvalidMessage, true},
		{apulsar.ErrProducerClosed, false},
		{apulsar.ErrSendTimeout, false},
		{apulsar.ErrSendQueueIsFull, false},
		{apulsar.ErrMemoryBufferIsFull, false},
		{fmt.Errorf("pulsar: send to %q: %w", "t", apulsar.ErrTopicTerminated), true},
		{fmt.Errorf("pulsar: send to %q: %w", "t", apulsar.ErrProducerClosed), false},
		{errors.New("not a client error"), false},
		{context.DeadlineExceeded, false},
	} {
		assert.Equal(t, tc.want, permanentForMessage(tc.err), "%v", tc.err)
	}
}

func tooBig() error {
	// The client's own error for a message over the broker's limit.
	return apulsar.ErrMessageTooLarge
}

// TestCopiesCarryExactlyTheDocumentedProperties pins what the package doc says each copy
// carries: the poison copy keeps the original properties, with bq-attempts set to the counted
// delivery and bq-delay removed, and nothing added; the gate-rejection copy keeps payload and
// properties byte for byte.
func TestCopiesCarryExactlyTheDocumentedProperties(t *testing.T) {
	t.Parallel()
	t.Run("poison", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, Handle(testURN, handlerReturning(nil)))
		in := map[string]string{"traceparent": traceparent, "x-app": "kept", PropAttempts: "4", PropDelay: "250", PropJob: "urn:x"}
		msg := &fakeMessage{topic: testTopic, payload: []byte("not json"), props: in, key: "k", orderingKey: "ok"}
		var pm *apulsar.ProducerMessage
		h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
		h.settler.EXPECT().Ack(msg).Return(nil)
		h.process(msg)
		require.NotNil(t, pm)
		assert.Equal(t, map[string]string{"traceparent": traceparent, "x-app": "kept", PropAttempts: "5", PropJob: "urn:x"}, pm.Properties)
		assert.Equal(t, "k", pm.Key)
		assert.Equal(t, "ok", pm.OrderingKey)
		assert.Zero(t, pm.DeliverAfter)
	})
	t.Run("gate rejection", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, Handle(testURN, handlerReturning(nil)))
		msg, _ := newMessage(t, testURN, 0, 3)
		msg.props[PropSchemaVersion] = "2"
		msg.props[PropDelay] = "250"
		want := maps.Clone(msg.props)
		var pm *apulsar.ProducerMessage
		h.senders[testDLQ].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
		h.settler.EXPECT().Ack(msg).Return(nil)
		h.process(msg)
		require.NotNil(t, pm)
		assert.Equal(t, want, pm.Properties, "properties unchanged, bq-attempts and bq-delay included")
		assert.Equal(t, msg.payload, pm.Payload, "payload byte for byte, no dead_letter block")
	})
}

func TestSeveralObserversAllSeeEveryEvent(t *testing.T) {
	t.Parallel()
	var a, b []EventKind
	h := newHarness(t, Handle(testURN, handlerReturning(nil)),
		WithHooks(Hooks{Event: func(e Event) { a = append(a, e.Kind) }}),
		WithHooks(Hooks{}),
		WithHooks(Hooks{Event: func(e Event) { b = append(b, e.Kind) }}))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	assert.Equal(t, []EventKind{EventReceived, EventHandled, EventAcked}, a)
	assert.Equal(t, a, b)
	assert.Contains(t, h.kinds(), EventHandled, "the harness's own observer too")
}
