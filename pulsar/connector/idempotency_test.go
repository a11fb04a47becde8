package connector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/redistest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
)

// guardStores are the stores the GuardFunc tests run on, those of package idempotency's tests.
var guardStores = redistest.StoreKinds()

func guardOn(t *testing.T, s idempotency.Store, opts ...idempotency.Option) *idempotency.Guard {
	t.Helper()
	g, err := idempotency.New(s, opts...)
	require.NoError(t, err)
	return g
}

// TestGuardFuncInFlightIsADelayedRedelivery: an id in flight elsewhere is not run, and the
// messaging wrapper nacks it with a redelivery after min(lease left, WithInFlightRetry).
func TestGuardFuncInFlightIsADelayedRedelivery(t *testing.T) {
	ctx := context.Background()
	for _, k := range guardStores {
		t.Run(k.Name, func(t *testing.T) {
			s := k.New(t)
			g := guardOn(t, s, idempotency.WithLease(time.Minute))
			inside := make(chan struct{})
			release := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := g.Do(ctx, "id", func(context.Context) error { close(inside); <-release; return nil })
				done <- err
			}()
			<-inside

			mg := guardOn(t, s, idempotency.WithInFlightRetry(250*time.Millisecond))
			env, err := envelope.Make("urn:babel:test:x", nil, envelope.WithMessageID("id"))
			require.NoError(t, err)
			err = connector.GuardFunc(mg, func(context.Context, *envelope.Envelope) error { t.Error("ran while in flight"); return nil })(ctx, env)
			var ne *messaging.NackError
			require.ErrorAs(t, err, &ne)
			assert.Equal(t, 250*time.Millisecond, messaging.NackOptionsOf(ne.Options...).Delay)
			require.ErrorIs(t, err, idempotency.ErrInFlight)
			_, deferred := seam.Deferral(err)
			require.True(t, deferred, "under failure-strategy babelqueue the redelivery is a deferral, not an attempt")

			close(release)
			require.NoError(t, <-done)
		})
	}
}

// TestGuardFuncRunsOncePerID runs GuardFunc the way a messaging stage calls it.
func TestGuardFuncRunsOncePerID(t *testing.T) {
	mem, err := idempotency.NewMemoryStore()
	require.NoError(t, err)
	g := guardOn(t, mem)
	runs := 0
	f := connector.GuardFunc(g, func(context.Context, *envelope.Envelope) error { runs++; return nil })
	env, err := envelope.Make("urn:babel:orders:created", nil, envelope.WithMessageID("m-1"))
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, f(context.Background(), env))
	}
	require.NoError(t, f(context.Background(), nil))
	assert.Equal(t, 2, runs, "one run for m-1, one unguarded run for the nil envelope")
}
