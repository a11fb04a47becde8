package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

const testURN = "urn:babel:orders:created"

// rig is an embedded broker, a client, a topic and a publisher on it.
type rig struct {
	client apulsar.Client
	topic  string
	pub    *bqpulsar.Publisher
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b := pulsartest.NewBroker(t)
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               b.URL(),
		OperationTimeout:  10 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	name := strings.NewReplacer("/", "-", " ", "-").Replace(strings.ToLower(t.Name()))
	r := &rig{client: c, topic: "persistent://public/default/idem-" + name}
	r.pub, err = bqpulsar.NewPublisher(c, r.topic)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.pub.Close() })
	return r
}

// publish sends n envelopes with distinct meta.ids, each copies times (the same envelope
// republished: a redelivery storm), and returns the ids.
func (r *rig) publish(t *testing.T, n, copies int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range n {
		env, err := envelope.Make(testURN, map[string]int{"order_id": i + 1})
		require.NoError(t, err)
		ids[i] = env.Meta.ID
		for range copies {
			_, err := r.pub.PublishEnvelope(ctx, env)
			require.NoError(t, err)
		}
	}
	return ids
}

// effects counts the side effect of the handler per meta.id.
type effects struct {
	mu    sync.Mutex
	perID map[string]int
	total atomic.Int64
}

func newEffects() *effects { return &effects{perID: map[string]int{}} }

func (e *effects) fire(id string) {
	e.mu.Lock()
	e.perID[id]++
	e.mu.Unlock()
	e.total.Add(1)
}

// requireOncePerID checks that every id's effect fired exactly once, and no other.
func (e *effects) requireOncePerID(t *testing.T, ids []string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Len(t, e.perID, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, e.perID[id], "effects of %s", id)
	}
	require.Equal(t, int64(len(ids)), e.total.Load())
}

// tally counts the consumer's events.
type tally struct {
	mu     sync.Mutex
	counts map[bqpulsar.EventKind]int
	errs   []error
}

func (t *tally) Observe(e bqpulsar.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[bqpulsar.EventKind]int{}
	}
	t.counts[e.Kind]++
	if e.Kind == bqpulsar.EventFailed {
		t.errs = append(t.errs, e.Err)
	}
}

func (t *tally) count(k bqpulsar.EventKind) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[k]
}

func (t *tally) failedWith(target error) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, err := range t.errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

// acked counts the deliveries the chain settled with nil (handled or skipped).
type acked struct{ n atomic.Int64 }

func (a *acked) middleware(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
	return func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
		err := next(ctx, env, msg)
		if err == nil {
			a.n.Add(1)
		}
		return err
	}
}

// consume runs a Shared consumer with 8 workers, the guard's middleware and h until the
// test ends, and returns it.
func (r *rig) consume(t *testing.T, g *idempotency.Guard, a *acked, obs *tally, h bqpulsar.HandlerFunc, opts ...bqpulsar.ConsumerOption) *bqpulsar.Consumer {
	t.Helper()
	all := append([]bqpulsar.ConsumerOption{
		bqpulsar.WithTopic(r.topic),
		bqpulsar.WithSubscription("workers", apulsar.Shared),
		bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) {
			o.SubscriptionInitialPosition = apulsar.SubscriptionPositionEarliest
		}),
		bqpulsar.WithConcurrency(8),
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: 50, Strategy: retry.Republish}),
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: obs.Observe, Handler: a.middleware}),
		bqpulsar.WithHooks(bqpulsar.Hooks{Handler: g.Middleware()}),
		bqpulsar.Handle(testURN, h),
	}, opts...)
	c, err := bqpulsar.NewConsumer(r.client, all...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("consumer stopped: %v", err)
		}
		_ = c.Close()
	})
	return c
}

// stormWait bounds the waits of the redelivery-storm tests (a thousand messages, three
// copies each, under eight workers).
const stormWait = 2 * time.Minute

// TestRedeliveryStormOneEffectPerID: 1,000 messages, each published three times with the
// same meta.id, under eight workers: the effect fires exactly 1,000 times.
func TestRedeliveryStormOneEffectPerID(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			g := newGuard(t, k.New(t), idempotency.WithInFlightRetry(20*time.Millisecond))
			r := newRig(t)
			fx, a, obs := newEffects(), &acked{}, &tally{}
			r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
				fx.fire(env.Meta.ID)
				return nil
			})
			const n, copies = 1000, 3
			ids := r.publish(t, n, copies)
			testwait.Eventually(t, stormWait, func() bool { return a.n.Load() == n*copies }, "every copy acknowledged")
			fx.requireOncePerID(t, ids)
			assert.Zero(t, obs.count(bqpulsar.EventDeadLettered))
			t.Logf("%d in-flight retries", obs.failedWith(idempotency.ErrInFlight))
		})
	}
}

// TestFailedFirstRunIsRetried: a handler that fails the first time for every id still gets
// its retry (the failure left the id unmarked), and the duplicates are skipped after it.
func TestFailedFirstRunIsRetried(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			g := newGuard(t, k.New(t), idempotency.WithInFlightRetry(20*time.Millisecond))
			r := newRig(t)
			fx, a, obs := newEffects(), &acked{}, &tally{}
			var mu sync.Mutex
			calls := map[string]int{}
			errFirst := errors.New("first run fails")
			r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
				mu.Lock()
				calls[env.Meta.ID]++
				first := calls[env.Meta.ID] == 1
				mu.Unlock()
				if first {
					return errFirst
				}
				fx.fire(env.Meta.ID)
				return nil
			})
			const n, copies = 100, 3
			ids := r.publish(t, n, copies)
			testwait.Eventually(t, stormWait, func() bool { return a.n.Load() == n*copies }, "every copy acknowledged")
			fx.requireOncePerID(t, ids)
			mu.Lock()
			for _, id := range ids {
				assert.Equal(t, 2, calls[id], "handler calls of %s: one failure, one success", id)
			}
			mu.Unlock()
			assert.Equal(t, n, obs.failedWith(errFirst))
			assert.Zero(t, obs.count(bqpulsar.EventDeadLettered))
		})
	}
}

// TestStoreOutageNacksAndLosesNothing: while the store cannot answer, no handler runs and
// every delivery is negatively acknowledged; once it answers again, every message is
// handled exactly once.
func TestStoreOutageNacksAndLosesNothing(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.Name, func(t *testing.T) {
			fs := &failingStore{Store: k.New(t)}
			fs.claim.Store(true)
			g := newGuard(t, fs, idempotency.WithInFlightRetry(20*time.Millisecond))
			r := newRig(t)
			fx, a, obs := newEffects(), &acked{}, &tally{}
			r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
				fx.fire(env.Meta.ID)
				return nil
			},
				bqpulsar.WithRetry(retry.Policy{MaxAttempts: 1000, Strategy: retry.Nack}),
				bqpulsar.WithNackRedeliveryDelay(50*time.Millisecond))
			const n, copies = 100, 2
			ids := r.publish(t, n, copies)
			testwait.Eventually(t, stormWait, func() bool { return obs.failedWith(idempotency.ErrStore) >= 2*n }, "deliveries failed by the outage")
			assert.Zero(t, fx.total.Load(), "a handler ran while the store was down")
			assert.Zero(t, a.n.Load(), "a delivery was acknowledged while the store was down")
			fs.claim.Store(false)
			testwait.Eventually(t, stormWait, func() bool { return a.n.Load() == n*copies }, "every copy acknowledged")
			fx.requireOncePerID(t, ids)
			assert.Zero(t, obs.count(bqpulsar.EventDeadLettered))
			assert.Zero(t, obs.count(bqpulsar.EventDropped))
		})
	}
}

// TestCrashedWorkersLeaseExpires: an id claimed by a worker that died is in flight until
// its lease ends; then the message is handled, once.
func TestCrashedWorkersLeaseExpires(t *testing.T) {
	for _, k := range storeKinds {
		for _, mode := range []string{"retry", "wait"} {
			t.Run(k.Name+"/"+mode, func(t *testing.T) {
				store := k.New(t)
				opt := idempotency.WithInFlightRetry(50 * time.Millisecond)
				if mode == "wait" {
					opt = idempotency.WithInFlightWait(50 * time.Millisecond)
				}
				g := newGuard(t, store, opt)
				r := newRig(t)
				env, err := envelope.Make(testURN, map[string]int{"order_id": 7})
				require.NoError(t, err)
				// The crashed worker's claim: taken, never committed nor released (under the
				// key the guard gives the message: its queue and meta.id).
				c, err := store.Claim(context.Background(), g.Key(env, r.topic), 700*time.Millisecond)
				require.NoError(t, err)
				require.Equal(t, idempotency.StatusClaimed, c.Status)

				fx, a, obs := newEffects(), &acked{}, &tally{}
				var firstRun atomic.Int64
				r.consume(t, g, a, obs, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
					firstRun.CompareAndSwap(0, time.Now().UnixNano())
					fx.fire(env.Meta.ID)
					return nil
				})
				start := time.Now()
				_, err = r.pub.PublishEnvelope(context.Background(), env)
				require.NoError(t, err)
				testwait.Eventually(t, stormWait, func() bool { return a.n.Load() == 1 }, "the message handled")
				fx.requireOncePerID(t, []string{env.Meta.ID})
				assert.GreaterOrEqual(t, time.Unix(0, firstRun.Load()).Sub(start), 300*time.Millisecond,
					"the handler ran while the dead worker's lease was still held")
				if mode == "retry" {
					assert.Positive(t, obs.failedWith(idempotency.ErrInFlight), "no in-flight retry was seen")
				} else {
					assert.Zero(t, obs.failedWith(idempotency.ErrInFlight), "the wait mode spent an attempt")
				}
			})
		}
	}
}
