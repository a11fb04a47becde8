package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency/redisstore"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/redistest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// The faults of issue 28, each on a real Redis (internal/redistest) and the embedded broker.
// The scenarios use the guard as an application does; what they check about the guard's
// newer surface (lease-lost causes, fences) goes through the probes in probes_test.go.

// faultWait bounds the waits of the fault scenarios.
const faultWait = time.Minute

// work stands for a handler's slow work: it returns after d, or with ctx's cause when ctx
// ends first.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// redisGuard is a guard on a fresh Redis store with the default key prefix.
func redisGuard(t *testing.T, opts ...idempotency.Option) *idempotency.Guard {
	t.Helper()
	_, client := redistest.Start(t)
	s, err := redisstore.New(client)
	require.NoError(t, err)
	return newGuard(t, s, opts...)
}

// TestSlowHandlerKeepsItsLease: a 0.5 s lease, a 1.5 s handler and two consumers (each with
// a guard of its own on one Redis). The duplicate reaches the other consumer while the
// first run is under way, and waits for it: the lease is renewed while the handler runs, so
// the effect fires once.
func TestSlowHandlerKeepsItsLease(t *testing.T) {
	_, client := redistest.Start(t)
	r := newRig(t)
	fx, a, obs := newEffects(), &acked{}, &tally{}
	started := make(chan struct{})
	var once sync.Once
	h := func(ctx context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		fx.fire(env.Meta.ID)
		once.Do(func() { close(started) })
		return work(ctx, 1500*time.Millisecond)
	}
	for range 2 {
		s, err := redisstore.New(client)
		require.NoError(t, err)
		g := newGuard(t, s, idempotency.WithLease(500*time.Millisecond), idempotency.WithInFlightRetry(100*time.Millisecond))
		r.consume(t, g, a, obs, h)
	}
	env, err := envelope.Make(testURN, map[string]int{"order_id": 1})
	require.NoError(t, err)
	_, err = r.pub.PublishEnvelope(context.Background(), env)
	require.NoError(t, err)
	<-started
	_, err = r.pub.PublishEnvelope(context.Background(), env) // the duplicate
	require.NoError(t, err)
	testwait.Eventually(t, faultWait, func() bool { return a.n.Load() == 2 }, "both copies acknowledged")
	fx.requireOncePerID(t, []string{env.Meta.ID})
	assert.Zero(t, obs.count(bqpulsar.EventDeadLettered))
}

// pausingStore holds every renewal until resume is closed, then passes it on.
type pausingStore struct {
	idempotency.Store
	resume  chan struct{}
	renewed atomic.Int64
}

func (s *pausingStore) Renew(ctx context.Context, id, token string, lease time.Duration) error {
	select {
	case <-s.resume:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.renewed.Add(1)
	return s.Store.Renew(ctx, id, token, lease)
}

// TestLostLeaseCancelsTheHolderAndRefusesItsCommit: the holder's renewal is held up until
// its lease has ended and another holder has claimed the id. The next renewal finds the id
// taken: the first holder's ctx is cancelled with a lease-lost cause, its late success is
// not committed, and a commit with its token is refused. The second holder keeps the id.
func TestLostLeaseCancelsTheHolderAndRefusesItsCommit(t *testing.T) {
	ctx := context.Background()
	_, client := redistest.Start(t)
	store, err := redisstore.New(client)
	require.NoError(t, err)
	ps := &pausingStore{Store: store, resume: make(chan struct{})}
	g := newGuard(t, ps, idempotency.WithLease(300*time.Millisecond))

	started, cancelled := make(chan struct{}), make(chan error, 1)
	var firstFence uint64
	done := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "L", func(ctx context.Context) error {
			firstFence, _ = fenceOf(ctx)
			close(started)
			select {
			case <-ctx.Done():
				cancelled <- context.Cause(ctx)
			case <-time.After(faultWait):
				cancelled <- nil
			}
			return nil // a late success: the holder did not notice in time
		})
		done <- err
	}()
	<-started
	var other idempotency.Claim
	testwait.Eventually(t, faultWait, func() bool {
		other, err = store.Claim(ctx, "L", time.Minute)
		return err == nil && other.Status == idempotency.StatusClaimed
	}, "the first holder's lease never ended")
	close(ps.resume)

	cause := <-cancelled
	require.Error(t, cause, "the first holder's ctx was not cancelled")
	assert.True(t, isLeaseLost(cause), "the cause says the lease was lost: %v", cause)
	err = <-done
	assert.True(t, isLeaseLost(err), "Do reports the lost lease: %v", err)

	// The late success was not committed: the second holder still has the id.
	again, err := store.Claim(ctx, "L", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.StatusInFlight, again.Status, "the lost holder's success was remembered")
	// Its token is fenced off; the second holder's is current.
	require.Error(t, store.Commit(ctx, "L", strconvFence(firstFence), time.Hour), "the late commit was accepted")
	require.NoError(t, store.Commit(ctx, "L", other.Token, time.Hour))
	assert.Greater(t, fenceOfClaim(other), firstFence, "the second holder's fence is larger")
}

// TestDuplicateOfASlowRunIsNotDeadLettered: the original takes 3 s; its duplicate arrives
// meanwhile, under 3 attempts and a short in-flight retry. The duplicate is deferred, never
// counted, and acknowledged once the original is done: 1 effect, 0 dead letters, with
// either retry strategy.
func TestDuplicateOfASlowRunIsNotDeadLettered(t *testing.T) {
	for _, strategy := range []retry.Strategy{retry.Republish, retry.Nack} {
		t.Run(strategy.String(), func(t *testing.T) {
			g := redisGuard(t, idempotency.WithInFlightRetry(400*time.Millisecond))
			r := newRig(t)
			fx, a, obs := newEffects(), &acked{}, &tally{}
			started := make(chan struct{})
			var once sync.Once
			r.consume(t, g, a, obs, func(ctx context.Context, env *envelope.Envelope, _ apulsar.Message) error {
				fx.fire(env.Meta.ID)
				once.Do(func() { close(started) })
				return work(ctx, 3*time.Second)
			},
				bqpulsar.WithRetry(retry.Policy{MaxAttempts: 3, Strategy: strategy}),
				bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond))
			env, err := envelope.Make(testURN, map[string]int{"order_id": 3})
			require.NoError(t, err)
			_, err = r.pub.PublishEnvelope(context.Background(), env)
			require.NoError(t, err)
			<-started
			_, err = r.pub.PublishEnvelope(context.Background(), env)
			require.NoError(t, err)
			testwait.Eventually(t, faultWait, func() bool {
				return a.n.Load()+int64(obs.count(bqpulsar.EventDeadLettered)) == 2
			}, "both copies settled")
			assert.Zero(t, obs.count(bqpulsar.EventDeadLettered), "a duplicate was dead-lettered")
			fx.requireOncePerID(t, []string{env.Meta.ID})
			assert.Positive(t, obs.failedWith(idempotency.ErrInFlight), "the duplicate never met the original")
		})
	}
}

// TestTwoQueuesWithTheDefaultsDoNotCollide: the same envelope (one meta.id) goes to two
// queues, each consumed through a guard with the defaults on one Redis: each queue runs its
// handler once.
func TestTwoQueuesWithTheDefaultsDoNotCollide(t *testing.T) {
	g := redisGuard(t)
	r := newRig(t)
	other := &rig{client: r.client, topic: r.topic + "-other"}
	var err error
	other.pub, err = bqpulsar.NewPublisher(r.client, other.topic)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.pub.Close() })

	fxA, fxB, a, obs := newEffects(), newEffects(), &acked{}, &tally{}
	r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		fxA.fire(env.Meta.ID)
		return nil
	})
	other.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		fxB.fire(env.Meta.ID)
		return nil
	})
	env, err := envelope.Make(testURN, map[string]int{"order_id": 4})
	require.NoError(t, err)
	_, err = r.pub.PublishEnvelope(context.Background(), env)
	require.NoError(t, err)
	_, err = other.pub.PublishEnvelope(context.Background(), env)
	require.NoError(t, err)
	testwait.Eventually(t, faultWait, func() bool { return a.n.Load() == 2 }, "both messages acknowledged")
	fxA.requireOncePerID(t, []string{env.Meta.ID})
	fxB.requireOncePerID(t, []string{env.Meta.ID})
}

// TestRedisRestartedBeforeTheCommit: Redis goes away between the handler's effect and the
// guard's commit, and comes back empty (no persistence). The failed commit is reported and
// retried, so the id is remembered by the restarted server and its duplicate is skipped.
func TestRedisRestartedBeforeTheCommit(t *testing.T) {
	srv, client := redistest.Start(t)
	store, err := redisstore.New(client)
	require.NoError(t, err)
	var reported atomic.Int64
	var restart sync.Once
	g := newGuard(t, store, idempotency.WithErrorHook(func(_ context.Context, op, _ string, err error) {
		if op != "commit" {
			return
		}
		if !errors.Is(err, idempotency.ErrStore) {
			t.Errorf("the commit failure %v is not a store failure", err)
		}
		reported.Add(1)
		restart.Do(func() { srv.Restart(t, client) }) //nolint:contextcheck // the restarted server outlives the hook's ctx by design
	}))
	r := newRig(t)
	fx, a, obs := newEffects(), &acked{}, &tally{}
	var crash sync.Once
	r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		fx.fire(env.Meta.ID)
		crash.Do(srv.Stop) // after the effect, before the commit
		return nil
	})
	env, err := envelope.Make(testURN, map[string]int{"order_id": 5})
	require.NoError(t, err)
	_, err = r.pub.PublishEnvelope(context.Background(), env)
	require.NoError(t, err)
	testwait.Eventually(t, faultWait, func() bool { return a.n.Load() == 1 }, "the message acknowledged")
	require.Positive(t, reported.Load(), "the failed commit was not reported")

	_, err = r.pub.PublishEnvelope(context.Background(), env) // its duplicate, after the restart
	require.NoError(t, err)
	testwait.Eventually(t, faultWait, func() bool { return a.n.Load() == 2 }, "the duplicate acknowledged")
	fx.requireOncePerID(t, []string{env.Meta.ID})
}

// TestCommitThatKeepsFailingIsAckedAndReported: when the commit still fails once its
// retries are spent, the delivery is acknowledged (the effect happened) and the failure
// goes to the guard's hook, the consumer's error hook and its Health warnings.
func TestCommitThatKeepsFailingIsAckedAndReported(t *testing.T) {
	mem, err := idempotency.NewMemoryStore()
	require.NoError(t, err)
	fs := &failingStore{Store: mem}
	fs.commit.Store(true)
	var tries atomic.Int64
	g := newGuard(t, fs, idempotency.WithCommitRetry(200*time.Millisecond),
		idempotency.WithErrorHook(func(_ context.Context, op, _ string, _ error) {
			if op == "commit" {
				tries.Add(1)
			}
		}))
	r := newRig(t)
	fx, a, obs := newEffects(), &acked{}, &tally{}
	var mu sync.Mutex
	var hooked []error
	c := r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
		fx.fire(env.Meta.ID)
		return nil
	}, bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(ev bqpulsar.Event) {
		if ev.Kind != bqpulsar.EventError {
			return
		}
		mu.Lock()
		hooked = append(hooked, ev.Err)
		mu.Unlock()
	}}))
	ids := r.publish(t, 1, 1)
	testwait.Eventually(t, faultWait, func() bool { return len(c.Health().Warnings) > 0 }, "no health warning")
	fx.requireOncePerID(t, ids)
	assert.Greater(t, tries.Load(), int64(1), "the commit was not retried")
	assert.Contains(t, c.Health().Warnings[0], "commit")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, hooked)
	require.ErrorIs(t, hooked[0], errOutage)
	assert.Zero(t, obs.count(bqpulsar.EventFailed), "a commit failure is not a handler failure")
}
