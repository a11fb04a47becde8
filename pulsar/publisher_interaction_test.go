package pulsar

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/mocks"
)

func newMockPublisher(t *testing.T, opts ...PublisherOption) (*Publisher, *mocks.MockMessageProducer) {
	t.Helper()
	prod := mocks.NewMockMessageProducer(gomock.NewController(t))
	p, err := wrapMessageProducer(prod, "persistent://public/default/orders", opts)
	require.NoError(t, err)
	return p, prod
}

func TestPublishSendsEnvelopeWithExactlySixProperties(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t)
	var pm *apulsar.ProducerMessage
	prod.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
	id, err := p.Publish(t.Context(), testURN, map[string]any{"order": 42})
	require.NoError(t, err)

	env, err := envelope.Classify(pm.Payload)
	require.NoError(t, err)
	assert.Equal(t, id, env.Meta.ID)
	assert.Equal(t, "orders", env.Meta.Queue, "queue name derived from the topic")
	assert.JSONEq(t, `{"order":42}`, string(env.Data))
	assert.Equal(t, map[string]string{
		PropJob: testURN, PropTraceID: env.TraceID, PropMessageID: id,
		PropSchemaVersion: "1", PropSourceLang: "go", PropAttempts: "0",
	}, pm.Properties)
	assert.Zero(t, pm.DeliverAfter)
	assert.True(t, pm.DeliverAt.IsZero())
	assert.True(t, pm.EventTime.IsZero(), "EventTime is not set")
}

// WithHeaders reads the caller's maps and never writes to them: the one map of the common
// case is not copied, and several are merged into a map of the publish's own. A publish held
// for a transaction, sent after the call returned, keeps the headers as they were at the
// call.
func TestWithHeadersLeavesTheCallersMapsAlone(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t)
	var pm *apulsar.ProducerMessage
	prod.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)).Times(2)

	one := map[string]string{"c": "3", "blank": ""}
	_, err := p.Publish(t.Context(), testURN, nil, WithHeaders(one))
	require.NoError(t, err)
	assert.Equal(t, "3", pm.Properties["c"])
	assert.NotContains(t, pm.Properties, "blank")
	pm.Properties["written"] = "by the client"
	assert.Equal(t, map[string]string{"c": "3", "blank": ""}, one, "the message has a property map of its own")

	first := map[string]string{"a": "1", "empty": ""}
	second := map[string]string{"b": "2", "a": ""}
	_, err = p.Publish(t.Context(), testURN, nil, WithHeaders(first), WithHeaders(second))
	require.NoError(t, err)
	assert.Equal(t, "1", pm.Properties["a"], "an empty value does not override")
	assert.Equal(t, "2", pm.Properties["b"])
	assert.NotContains(t, pm.Properties, "empty")
	assert.Equal(t, map[string]string{"a": "1", "empty": ""}, first, "the merge does not write to the first map")
	assert.Equal(t, map[string]string{"b": "2", "a": ""}, second)

	var st txnState
	held := map[string]string{"k": "at the call"}
	var po publishOptions
	require.NoError(t, WithHeaders(held).applyPublish(&po))
	require.True(t, st.hold(heldSend{po: po}))
	held["k"] = "changed after the call"
	assert.Equal(t, "at the call", st.take()[0].po.headers["k"], "a held publish keeps its own copy")
}

func TestPublishOptions(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t, WithQueue("billing"))
	var pm *apulsar.ProducerMessage
	prod.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)).Times(4)

	_, err := p.Publish(t.Context(), testURN, nil,
		WithTraceID("trace-1"), WithMessageID("msg-1"), WithKey("k"), WithOrderingKey("ok"),
		WithHeaders(map[string]string{"traceparent": traceparent, "": "x", "empty": "", PropJob: "urn:evil", PropDelay: "5"}),
		WithHeaders(map[string]string{"tracestate": "a=b"}))
	require.NoError(t, err)
	env, err := envelope.Classify(pm.Payload)
	require.NoError(t, err)
	assert.Equal(t, "trace-1", env.TraceID)
	assert.Equal(t, "msg-1", env.Meta.ID)
	assert.Equal(t, "billing", env.Meta.Queue, "publisher-level queue")
	assert.Equal(t, "k", pm.Key)
	assert.Equal(t, "ok", pm.OrderingKey)
	assert.Equal(t, testURN, pm.Properties[PropJob], "contract keys win")
	assert.Equal(t, traceparent, pm.Properties["traceparent"])
	assert.Equal(t, "a=b", pm.Properties["tracestate"])
	assert.NotContains(t, pm.Properties, "empty")
	assert.NotContains(t, pm.Properties, "")
	assert.NotContains(t, pm.Properties, PropDelay, "no bq-delay without a delay")
	assert.Len(t, pm.Properties, 8)

	_, err = p.Publish(t.Context(), testURN, nil, WithDelay(1500*time.Millisecond), WithQueue("other"))
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, pm.DeliverAfter)
	assert.Equal(t, "1500", pm.Properties[PropDelay])
	env, err = envelope.Classify(pm.Payload)
	require.NoError(t, err)
	assert.Equal(t, "other", env.Meta.Queue, "per-message queue")

	_, err = p.Publish(t.Context(), testURN, nil, WithDelay(-time.Second))
	require.NoError(t, err)
	assert.Zero(t, pm.DeliverAfter)
	assert.NotContains(t, pm.Properties, PropDelay, "a delay ≤ 0 means none")

	at := time.Now().Add(time.Hour)
	_, err = p.Publish(t.Context(), testURN, nil, WithDeliverAt(at))
	require.NoError(t, err)
	assert.Equal(t, at, pm.DeliverAt)
	ms, err := strconv.Atoi(pm.Properties[PropDelay])
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Milliseconds(), ms, 5000)
}

func TestPublishRefusesBadInput(t *testing.T) {
	t.Parallel()
	p, _ := newMockPublisher(t)
	_, err := p.Publish(t.Context(), " ", nil)
	require.ErrorIs(t, err, envelope.ErrInvalidURN)
	_, err = p.Publish(t.Context(), testURN, []int{1})
	require.ErrorIs(t, err, envelope.ErrInvalidData)
	_, err = p.Publish(t.Context(), testURN, nil, WithTraceID(""))
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = p.Publish(t.Context(), testURN, nil, WithQueue("a/b"))
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = p.PublishEnvelope(t.Context(), nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = wrapMessageProducer(nil, "a/b", nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = wrapMessageProducer(nil, "orders", []PublisherOption{WithMaxPending(0)})
	require.ErrorIs(t, err, ErrInvalidOption)
}

func TestPublishEnvelopeKeepsItsFields(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t)
	env, err := envelope.Make(testURN, nil, envelope.WithQueue("elsewhere"))
	require.NoError(t, err)
	env = env.WithAttempts(4)
	var pm *apulsar.ProducerMessage
	prod.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm))
	id, err := p.PublishEnvelope(t.Context(), env, WithKey("k"),
		WithTraceID("ignored-trace"), WithMessageID("ignored-id"), WithQueue("ignored")) // the envelope has its own
	require.NoError(t, err)
	assert.Equal(t, env.Meta.ID, id)
	want, err := env.Encode()
	require.NoError(t, err)
	assert.Equal(t, want, pm.Payload)
	assert.Equal(t, "4", pm.Properties[PropAttempts])
	assert.Equal(t, "k", pm.Key)
}

func TestPublishSendErrorIsWrapped(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t)
	prod.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil, apulsar.ErrSendTimeout)
	_, err := p.Publish(t.Context(), testURN, nil)
	require.ErrorIs(t, err, apulsar.ErrSendTimeout)
	assert.Contains(t, err.Error(), "pulsar: publish to")
}

func TestPublishAsyncBoundsPendingAndDeliversErrors(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t, WithMaxPending(1))
	var complete func(apulsar.MessageID, *apulsar.ProducerMessage, error)
	prod.EXPECT().SendAsync(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ *apulsar.ProducerMessage, done func(apulsar.MessageID, *apulsar.ProducerMessage, error)) {
			complete = done
		})
	results := make(chan error, 2)
	var gotID string
	require.NoError(t, p.PublishAsync(t.Context(), testURN, nil, func(id string, err error) {
		gotID = id
		results <- err
	}))

	// The one pending slot is taken: the next call waits until its ctx ends, the Try variant
	// fails at once.
	err := p.TryPublishAsync(t.Context(), testURN, nil, func(string, error) { t.Error("must not be called") })
	require.ErrorIs(t, err, ErrFull)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err = p.PublishAsync(ctx, testURN, nil, func(string, error) { t.Error("must not be called") })
	require.ErrorIs(t, err, context.DeadlineExceeded)

	sendErr := errors.New("broker said no")
	complete(nil, nil, sendErr)
	require.ErrorIs(t, <-results, sendErr)
	assert.NotEmpty(t, gotID)

	// The slot is free again.
	prod.EXPECT().SendAsync(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ *apulsar.ProducerMessage, done func(apulsar.MessageID, *apulsar.ProducerMessage, error)) {
			go done(apulsar.EarliestMessageID(), nil, nil)
		})
	require.NoError(t, p.TryPublishAsync(t.Context(), testURN, nil, func(_ string, err error) { results <- err }))
	require.NoError(t, <-results)

	prod.EXPECT().FlushWithCtx(gomock.Any()).Return(nil)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	_, err = p.Publish(t.Context(), testURN, nil)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.PublishAsync(t.Context(), testURN, nil, nil), ErrClosed)
}

// Without WithMaxPending, a thousand asynchronous sends are in flight at most.
func TestPublishAsyncDefaultBoundIsAThousandPendingSends(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t)
	var callbacks []func(apulsar.MessageID, *apulsar.ProducerMessage, error)
	prod.EXPECT().SendAsync(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ *apulsar.ProducerMessage, done func(apulsar.MessageID, *apulsar.ProducerMessage, error)) {
			callbacks = append(callbacks, done)
		}).Times(1000)
	for i := range 1000 {
		require.NoError(t, p.TryPublishAsync(t.Context(), testURN, nil, func(string, error) {}), "send %d", i)
	}
	assert.Equal(t, 1000, p.Pending())
	require.ErrorIs(t, p.TryPublishAsync(t.Context(), testURN, nil, func(string, error) { t.Error("must not be called") }), ErrFull)
	for _, done := range callbacks {
		done(apulsar.EarliestMessageID(), nil, nil)
	}
	assert.Zero(t, p.Pending())
}

// Close waits for the callbacks of pending sends within the close timeout, also over a
// wrapped producer, which Close does not close: a send the caller's producer never completes
// does not hold Close beyond it, and its callback still runs, once, when the send ends.
func TestPublisherCloseOverAWrappedProducerIsBoundedByTheCloseTimeout(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t, WithCloseTimeout(50*time.Millisecond))
	var complete func(apulsar.MessageID, *apulsar.ProducerMessage, error)
	prod.EXPECT().SendAsync(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ *apulsar.ProducerMessage, done func(apulsar.MessageID, *apulsar.ProducerMessage, error)) {
			complete = done
		})
	prod.EXPECT().FlushWithCtx(gomock.Any()).DoAndReturn(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	results := make(chan error, 1)
	require.NoError(t, p.PublishAsync(t.Context(), testURN, nil, func(_ string, err error) { results <- err }))

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	lateErr := errors.New("completed after Close")
	select {
	case err := <-closed:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second): // a bound for the failing case, not a timing
		complete(nil, nil, lateErr) // lets the blocked Close return, for the leak check
		require.FailNow(t, "Close waited past its close timeout for a send the wrapped producer never completed", "Close then returned %v", <-closed)
	}
	complete(nil, nil, lateErr)
	require.ErrorIs(t, <-results, lateErr)
	assert.Zero(t, p.Pending())
}

// The Close of a producer the publisher created waits for the broker, up to the client's
// operation timeout when the broker is gone: Publisher.Close returns at its close timeout
// plus half a second with a *CloseTimeoutError, and the producer's Close ends on its own.
func TestPublisherCloseIsBoundedWhenTheProducersCloseHangs(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t, WithCloseTimeout(50*time.Millisecond))
	prod.EXPECT().FlushWithCtx(gomock.Any()).Return(nil)
	release, producerClosed := make(chan struct{}), make(chan struct{})
	p.closeFn = func() { <-release; close(producerClosed) } // as if it had created the producer
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		var cte *CloseTimeoutError
		require.ErrorAs(t, err, &cte)
		require.ErrorIs(t, err, ErrCloseTimeout)
		assert.Equal(t, "the Pulsar producer's Close", cte.Pending)
		assert.Equal(t, 50*time.Millisecond+closeGrace, cte.Timeout)
	case <-time.After(5 * time.Second): // a bound for the failing case, not a timing
		close(release)
		require.FailNow(t, "Close waited for the producer's Close past its deadline", "Close then returned %v", <-closed)
	}
	close(release)
	<-producerClosed
	require.ErrorIs(t, p.Close(), ErrCloseTimeout, "idempotent")
}

func TestPublisherCloseReportsFlushError(t *testing.T) {
	t.Parallel()
	p, prod := newMockPublisher(t)
	flushErr := errors.New("flush failed")
	prod.EXPECT().FlushWithCtx(gomock.Any()).Return(flushErr)
	require.ErrorIs(t, p.Close(), flushErr)
}
