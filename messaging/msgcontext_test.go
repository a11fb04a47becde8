package messaging_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

type (
	deliveryKey struct{}
	runtimeKey  struct{}
)

// TestMessageContextTakesTheValuesNotTheCancellation: the message's context answers the
// keys it knows, the runtime's context the others and everything about cancellation, its
// cause included, for the merged context and for the contexts derived from it.
func TestMessageContextTakesTheValuesNotTheCancellation(t *testing.T) {
	t.Parallel()
	rctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), runtimeKey{}, "runtime"))
	defer cancel(nil)
	mctx, mcancel := context.WithCancel(context.WithValue(context.Background(), deliveryKey{}, "delivery"))
	mcancel() // the message's context ended: its values still count, its end does not

	ctx := messaging.MessageContext(rctx, messaging.NewMetadata(messaging.ContextMetadata{Context: mctx}))
	assert.Equal(t, "delivery", ctx.Value(deliveryKey{}))
	assert.Equal(t, "runtime", ctx.Value(runtimeKey{}))
	require.NoError(t, ctx.Err(), "the message's context ended, the runtime's did not")
	child, stop := context.WithCancel(ctx)
	defer stop()

	shutdown := errors.New("shutdown")
	cancel(shutdown)
	select {
	case <-child.Done():
	case <-time.After(waitTimeout):
		t.Fatal("a context derived from the merged one did not end with the runtime's")
	}
	require.ErrorIs(t, ctx.Err(), context.Canceled)
	assert.Equal(t, shutdown, context.Cause(ctx), "the runtime's cause")
	assert.Equal(t, shutdown, context.Cause(child), "the runtime's cause, derived")
	assert.Equal(t, "delivery", child.Value(deliveryKey{}))

	assert.Equal(t, rctx, messaging.MessageContext(rctx, messaging.Metadata{}), "no ContextMetadata: ctx itself")
	assert.Equal(t, rctx, messaging.MessageContext(rctx, messaging.NewMetadata(messaging.ContextMetadata{})), "a nil Context is ignored")
}

// TestStageFunctionsGetTheMessageContext: Process, FlatMap and Consume are given a ctx with
// the values of the message's ContextMetadata, which the messages they derive keep; a
// message without one gets the runtime's ctx.
func TestStageFunctionsGetTheMessageContext(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t, nil)
	mctx := context.WithValue(context.Background(), deliveryKey{}, "delivery of a")
	withCtx := messaging.NewMessage("a", messaging.WithMetadata(messaging.NewMetadata(messaging.ContextMetadata{Context: mctx})))
	messaging.Produce(rt, "ctx-in", reactive.FromSlice(withCtx, messaging.NewMessage("b")))
	var mu sync.Mutex
	seen := map[string]any{}
	record := func(stage, p string, ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		seen[stage+" "+p] = ctx.Value(deliveryKey{})
	}
	messaging.Process(rt, "ctx-in", "ctx-mid", func(ctx context.Context, p string) (string, error) {
		record("process", p, ctx)
		return p, nil
	})
	messaging.FlatMap(rt, "ctx-mid", "ctx-out", func(ctx context.Context, p string) reactive.Publisher[string] {
		record("flatmap", p, ctx)
		return reactive.FromSlice(p)
	})
	done := make(chan struct{}, 2)
	messaging.Consume(rt, "ctx-out", func(ctx context.Context, p string) error {
		record("consume", p, ctx)
		done <- struct{}{}
		return nil
	})
	start(t, rt)
	for range 2 {
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatal("the messages did not reach the consumer")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]any{
		"process a": "delivery of a", "flatmap a": "delivery of a", "consume a": "delivery of a",
		"process b": nil, "flatmap b": nil, "consume b": nil,
	}, seen)
}
