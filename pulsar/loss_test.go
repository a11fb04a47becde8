package pulsar_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// lossState records, per message id, every delivery the handler saw.
type lossState struct {
	mu        sync.Mutex
	rng       *rand.Rand
	attempts  map[string][]int // meta.id → counted attempt of each handler call
	successes map[string]int
	calls     int
	successN  int
}

func (s *lossState) handle(env *envelope.Envelope) error {
	s.mu.Lock()
	counted := env.Attempts + 1
	s.attempts[env.Meta.ID] = append(s.attempts[env.Meta.ID], counted)
	s.calls++
	r := s.rng.Float64()
	if r >= 0.22 {
		s.successes[env.Meta.ID]++
		s.successN++
	}
	s.mu.Unlock()
	switch {
	case r < 0.02:
		panic("handler panic (injected)")
	case r < 0.22:
		return errors.New("handler failure (injected)")
	}
	return nil
}

func (s *lossState) progress() (calls, successes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.successN
}

// TestLoss: 5,000 messages with random keys; the handler fails 20% of calls and panics in
// 2%; the broker drops every connection several times; the consumer is closed and
// restarted once midway. At the end every message was handled successfully or sits in the
// dead-letter topic with a correct block, none is missing, and no message was handled in
// more than maxAttempts distinct deliveries; repeats of one delivery (acks lost to a drop
// or the restart) are counted and bounded.
func TestLoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loss test: skipped with -short")
	}
	const (
		n           = 5000
		maxAttempts = 3
		concurrency = 8
		queueSize   = 100
		ackGroup    = 50
	)
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "loss")
	dead := collect(t, client, topic+".dlq")
	state := &lossState{
		rng:       rand.New(rand.NewPCG(1, 2)),
		attempts:  map[string][]int{},
		successes: map[string]int{},
	}

	newLossConsumer := func() *bqpulsar.Consumer {
		c, err := bqpulsar.NewConsumer(client,
			bqpulsar.WithTopic(topic),
			bqpulsar.WithSubscription("app", apulsar.Shared),
			bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) {
				earliest(o)
				o.ReceiverQueueSize = queueSize
				// Acks are grouped (at most ackGroup, at most 100 ms); a drop loses the group.
				o.AckGroupingOptions = &apulsar.AckGroupingOptions{MaxSize: ackGroup, MaxTime: 100 * time.Millisecond}
			}),
			bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond),
			bqpulsar.WithRetry(retry.Policy{MaxAttempts: maxAttempts}),
			bqpulsar.WithConcurrency(concurrency),
			bqpulsar.WithSenderOptions(func(o *apulsar.ProducerOptions) { o.SendTimeout = 5 * time.Second }),
			bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
				return state.handle(env)
			}))
		require.NoError(t, err)
		return c
	}
	start := func(c *bqpulsar.Consumer) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		return func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			require.NoError(t, c.Close())
		}
	}
	stop := start(newLossConsumer())

	// Publish with random keys, asynchronously.
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	ids := make(map[string]bool, n)
	var idsMu sync.Mutex
	var pubWG sync.WaitGroup
	keys := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		pubWG.Add(1)
		key := "k" + strconv.Itoa(keys.IntN(500))
		require.NoError(t, pub.PublishAsync(t.Context(), okURN, map[string]any{"i": i}, func(id string, err error) {
			defer pubWG.Done()
			assert.NoError(t, err)
			idsMu.Lock()
			ids[id] = true
			idsMu.Unlock()
		}, bqpulsar.WithKey(key)))
	}
	pubWG.Wait()
	require.NoError(t, pub.Close())
	require.Len(t, ids, n)

	// Faults: drop every connection at several points, restart the consumer once.
	drops := 0
	restarted := false
	dropAt := []int{800, 1800, 3000, 4200}
	done := func() bool {
		state.mu.Lock()
		handled := len(state.successes)
		state.mu.Unlock()
		return handled+dead.count() >= n && b.Backlog(topic, "app") == 0
	}
	deadline := time.Now().Add(90 * time.Second)
	for !done() || drops < len(dropAt) || !restarted {
		require.False(t, time.Now().After(deadline), "loss test did not settle: %+v", b.Stats(topic))
		calls, successes := state.progress()
		if drops < len(dropAt) && calls >= dropAt[drops] {
			b.DropConnections()
			drops++
		}
		if !restarted && successes >= n/2 {
			stop()
			stop = start(newLossConsumer())
			restarted = true
		}
		if drops < len(dropAt) && calls >= n+n/4 {
			// Fewer calls than planned: drop the rest now.
			b.DropConnections()
			drops++
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()

	// Every message: handled successfully, or dead-lettered with a correct block.
	deadIDs := map[string]int{}
	for _, m := range dead.wait(t, dead.count(), time.Second) {
		env, err := envelope.Decode(m.Payload())
		require.NoError(t, err)
		require.NotNil(t, env.DeadLetter)
		assert.True(t, ids[env.Meta.ID], "dead letter of an unknown message")
		assert.Equal(t, envelope.ReasonFailed, env.DeadLetter.Reason)
		assert.Equal(t, maxAttempts, env.DeadLetter.Attempts)
		assert.Equal(t, maxAttempts, env.Attempts)
		assert.Equal(t, "go", env.DeadLetter.Lang)
		require.NotNil(t, env.DeadLetter.Error)
		assert.Contains(t, *env.DeadLetter.Error, "(injected)")
		assert.Equal(t, strconv.Itoa(maxAttempts), m.Properties()[bqpulsar.PropAttempts])
		deadIDs[env.Meta.ID]++
	}

	state.mu.Lock()
	defer state.mu.Unlock()
	missing, repeats, deadOnly := 0, 0, 0
	for id := range ids {
		seen := state.attempts[id]
		if state.successes[id] == 0 && deadIDs[id] == 0 {
			missing++
		}
		distinct := map[int]bool{}
		for _, a := range seen {
			assert.LessOrEqual(t, a, maxAttempts, "message %s handled beyond maxAttempts", id)
			distinct[a] = true
		}
		assert.LessOrEqual(t, len(distinct), maxAttempts)
		repeats += len(seen) - len(distinct)
		if deadIDs[id] > 0 {
			deadOnly++
			assert.Len(t, distinct, maxAttempts, "dead-lettered only after maxAttempts deliveries")
		}
	}
	assert.Zero(t, missing, "messages lost")
	// A repeat is a delivery handled again because its ack (or its retry's ack) was lost to
	// a connection drop or the restart: at most what was in flight at those moments, i.e.
	// the receiver queue, the messages in the workers and the receive loop, and the grouped
	// acks not yet flushed.
	bound := (drops + 1) * (queueSize + concurrency + 1 + ackGroup)
	assert.LessOrEqual(t, repeats, bound, "repeated deliveries beyond what %d drops and a restart explain", drops)
	t.Logf("messages %d, handler calls %d, successes %d, dead-lettered %d (copies %d), repeats caused by %d drops and 1 restart: %d (bound %d)",
		n, state.calls, len(state.successes), deadOnly, dead.count(), drops, repeats, bound)
}
