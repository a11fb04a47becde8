package pulsar_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// TestChaos is the acceptance scenario of the consumer's worker pool: 50,000 messages on
// 1,000 keys, a handler that fails 20 % of its calls and panics in 2 %, every connection
// dropped every 500 ms, a 2 s outage of the dead-letter topic (each write refused until the
// send timeout), and two restarts of the consumer, on Shared, Key_Shared and Exclusive
// subscriptions. Nothing may be lost: every message is handled successfully or sits in the
// dead-letter topic. It takes about a minute (up to 10 minutes before it gives up), so it
// runs only with BQ_CHAOS=1; its figures are logged.
func TestChaos(t *testing.T) {
	if os.Getenv("BQ_CHAOS") != "1" {
		t.Skip("chaos acceptance scenario (50,000 messages per subscription type, about a minute): set BQ_CHAOS=1 to run it")
	}
	for _, st := range []struct {
		name string
		typ  apulsar.SubscriptionType
	}{{"Shared", apulsar.Shared}, {"Key_Shared", apulsar.KeyShared}, {"Exclusive", apulsar.Exclusive}} {
		t.Run(st.name, func(t *testing.T) {
			runChaos(t, brokertest.Embedded(t), st.typ, chaosPlan{n: 50_000, keys: 1000, faultEvery: 500 * time.Millisecond})
		})
	}
}

// TestChaosShort is the chaos scenario small enough for every run, on both brokers: 2,000
// messages on 100 keys, the same failing and panicking handler, two restarts of the
// consumer, on a Shared subscription. On the embedded broker every connection is dropped
// every 500 ms and the dead-letter topic has its 2 s outage. On a real Apache Pulsar, where
// neither fault hook exists, the topic is unloaded every second (at most 20 times; the
// embedded broker's drops likewise stop after 20) through the admin API: the
// broker closes every producer and consumer of the topic, which reconnect by themselves,
// and an acknowledgement still being persisted may be lost, so that message comes again.
// Nothing may be lost, on either.
//
// Its real half failed in CI twice (with pulsar-client-go v0.19.0), for two causes:
//   - a restart of the consumer fell into an unload, and Subscribe was refused with
//     ServiceNotReady "Topic is temporarily unavailable": fixed, NewConsumer and NewPublisher
//     ask again (TestCreateThroughUnload);
//   - a stall (handled 125, backlog 1062 after 4 minutes, in a run beside three others),
//     reproduced with the unloads every 400 ms under CPU load (2 stalls in 11 runs): the
//     broker's log shows the consumer closed by an unload 25 ms after its reconnect's
//     SUBSCRIBE succeeded, and no SUBSCRIBE after that; the topic's stats show no consumer on
//     the subscription, while the client has no reconnect in progress and its Receive waits
//     for ever. pulsar-client-go v0.19.0's grabConn registered the consumer with its
//     connection (AddConsumeHandler) only after the SUBSCRIBE's answer was handled, so a
//     CLOSE_CONSUMER that came in between found no consumer and was dropped ("Consumer with
//     ID not found while closing consumer"), and the consumer was stranded. Fixed: the
//     watchdog asks the idle consumer's broker for its last message id, the broker answers
//     "Consumer not found", and the consumer subscribes again (TestStrandedConsumer).
//     v0.21.0's grabConn registers the consumer before it sends the SUBSCRIBE
//     (apache/pulsar-client-go#1476), which closes that window; the watchdog stays as a
//     guard.
func TestChaosShort(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		// A bounded number of faults and a settle time well inside go test's 10-minute
		// timeout: on a loaded machine a run that was unloaded every second until it settled
		// did not settle before the package's timeout (seen in a CI run beside three others).
		plan := chaosPlan{n: 2000, keys: 100, faultEvery: 500 * time.Millisecond, maxFaults: 20, settleIn: 4 * time.Minute}
		if tg.Real() {
			plan.faultEvery = time.Second
		}
		runChaos(t, tg, apulsar.Shared, plan)
	})
}

// TestChaosTransactions is TestChaosShort with 1,000 messages, WithTransactions and a handler that first
// publishes, through a Publisher with its ctx, one message per call to an output topic (so
// that a failed or aborted call has published too). Its figures add the output topic's
// view: the ids with more than one message there. The embedded broker runs WithTransactions.
func TestChaosTransactions(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		runChaos(t, tg, apulsar.Shared, chaosPlan{
			n: 1000, keys: 100, faultEvery: time.Second, maxFaults: 20,
			settleIn: 4 * time.Minute, txn: true,
		})
	}, pulsartest.WithTransactions())
}

// chaosPlan sizes a chaos run; its faults come from the target.
type chaosPlan struct {
	txn        bool // WithTransactions, and the handler publishes to an output topic
	n, keys    int
	faultEvery time.Duration // how often the connections are dropped (embedded) or the topic unloaded (real)
	maxFaults  int           // stop the faults after this many (0: until settled), so that a slow run still settles
	settleIn   time.Duration // how long the run may take to settle (0: 10 minutes)
}

// outputOf returns the id a chaos handler's output message names (its data's "of").
func outputOf(t *testing.T, m apulsar.Message) string {
	t.Helper()
	var body struct {
		Data struct {
			Of string `json:"of"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(m.Payload(), &body))
	return body.Data.Of
}

func runChaos(t *testing.T, tg *brokertest.Target, subType apulsar.SubscriptionType, plan chaosPlan) {
	t.Helper()
	const (
		maxAttempts = 3
		concurrency = 8
		queueSize   = 100
		ackGroup    = 50
		outage      = 2 * time.Second
	)
	n, keys := plan.n, plan.keys
	began := time.Now()
	client := tg.Client(t)
	if plan.txn {
		client = tg.TxnClient(t)
	}
	topic := tg.Topic(t, "chaos")
	dlqTopic := topic + ".dlq"
	// The faults: the embedded broker's hooks, or what a real broker's admin API can do.
	b := tg.Broker
	var fault func()
	var backlog func() int64
	if b != nil {
		require.NoError(t, b.CreateTopic(dlqTopic))
		fault = func() { b.DropConnections() }
		backlog = func() int64 { return int64(b.Backlog(topic, "app")) }
	} else {
		admin := tg.Admin(t)
		hc, unload := brokertest.HTTPClient(t), brokertest.TopicURL(admin, topic)+"/unload"
		fault = func() { // from the fault goroutine: it reports nothing; a refused unload is a fault that did not happen
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, unload, http.NoBody)
			if err != nil {
				return
			}
			if resp, err := hc.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		backlog = func() int64 { return brokertest.Backlog(t, admin, topic, "app") }
	}
	dead := collect(t, client, dlqTopic)
	state := &lossState{
		rng:       rand.New(rand.NewPCG(5, 6)),
		attempts:  map[string][]int{},
		successes: map[string]int{},
	}
	var dlqFailures, republishFailures atomic.Int64
	onError := func(err error, _ *envelope.Envelope, _ apulsar.Message) {
		switch {
		case errors.Is(err, bqpulsar.ErrDeadLetterWrite):
			dlqFailures.Add(1)
		case errors.Is(err, bqpulsar.ErrRepublish):
			republishFailures.Add(1)
		}
	}
	// With transactions the handler publishes first, so that a failed or aborted call has
	// published too; out counts what reached the output topic.
	var out *collector
	var outPub *bqpulsar.Publisher
	txnOpts := []bqpulsar.ConsumerOption{}
	if plan.txn {
		outTopic := topic + "-out"
		out = collect(t, client, outTopic)
		var err error
		outPub, err = bqpulsar.NewPublisher(client, outTopic)
		require.NoError(t, err)
		t.Cleanup(func() { _ = outPub.Close() })
		txnOpts = append(txnOpts, bqpulsar.WithTransactions(10*time.Second))
	}
	newChaosConsumer := func() *bqpulsar.Consumer {
		c, err := bqpulsar.NewConsumer(client, append(txnOpts,
			bqpulsar.WithTopic(topic),
			bqpulsar.WithSubscription("app", subType),
			bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) {
				earliest(o)
				o.ReceiverQueueSize = queueSize
				o.AckGroupingOptions = &apulsar.AckGroupingOptions{MaxSize: ackGroup, MaxTime: 100 * time.Millisecond}
			}),
			bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond),
			bqpulsar.WithRetry(retry.Policy{MaxAttempts: maxAttempts}),
			bqpulsar.WithConcurrency(concurrency),
			bqpulsar.WithSenderOptions(func(o *apulsar.ProducerOptions) { o.SendTimeout = time.Second }),
			onFailure(onError),
			bqpulsar.Handle(okURN, func(ctx context.Context, env *envelope.Envelope, _ apulsar.Message) error {
				if outPub != nil {
					if _, err := outPub.Publish(ctx, okURN, map[string]any{"of": env.Meta.ID}); err != nil {
						return err
					}
				}
				return state.handle(env)
			}))...)
		require.NoError(t, err)
		return c
	}
	var current *bqpulsar.Consumer // the running consumer, for the report of a run that does not settle
	start := func(c *bqpulsar.Consumer) (stop func()) {
		current = c
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		return func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			require.NoError(t, c.Close())
		}
	}
	stop := start(newChaosConsumer())

	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	ids := make(map[string]bool, n)
	var idsMu sync.Mutex
	var pubWG sync.WaitGroup
	keyRNG := rand.New(rand.NewPCG(7, 8))
	for i := range n {
		pubWG.Add(1)
		key := "k" + strconv.Itoa(keyRNG.IntN(keys))
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
	published := time.Now()

	// A fault every plan.faultEvery until everything is settled (or plan.maxFaults of them).
	dropCtx, stopDrops := context.WithCancel(context.Background())
	dropsDone := make(chan int)
	go func() {
		tick := time.NewTicker(plan.faultEvery)
		defer tick.Stop()
		drops := 0
		for {
			select {
			case <-dropCtx.Done():
				dropsDone <- drops
				return
			case <-tick.C:
				if plan.maxFaults == 0 || drops < plan.maxFaults {
					fault()
					drops++
				}
			}
		}
	}()
	defer stopDrops()

	handled := func() int {
		state.mu.Lock()
		defer state.mu.Unlock()
		return len(state.successes)
	}
	restarts, outageDone := 0, b == nil // a real broker has no outage hook
	var outageAt time.Time
	// Settled: every id handled successfully or dead-lettered, and nothing left in the backlog.
	// (A sum of the two counts would also reach n while a message is still in flight, since
	// an id can be both; lost would then be counted for a message that was not.)
	deadSeen := map[string]bool{}
	deadRead := 0
	outSeen := map[string]bool{}
	outRead := 0
	covered := func() int {
		msgs := dead.wait(t, dead.count(), time.Second)
		for _, m := range msgs[deadRead:] {
			if env, err := envelope.Decode(m.Payload()); err == nil {
				deadSeen[env.Meta.ID] = true
			}
		}
		deadRead = len(msgs)
		if out != nil {
			// With transactions a handler's success counts once its output is there: a
			// success whose commit failed is delivered again, and its output was never sent.
			msgs := out.wait(t, out.count(), time.Second)
			for _, m := range msgs[outRead:] {
				outSeen[outputOf(t, m)] = true
			}
			outRead = len(msgs)
			done := 0
			for id := range ids {
				if outSeen[id] || deadSeen[id] {
					done++
				}
			}
			return done
		}
		state.mu.Lock()
		defer state.mu.Unlock()
		done := len(state.successes)
		for id := range deadSeen {
			if state.successes[id] == 0 {
				done++
			}
		}
		return done
	}
	settled := func() bool { return covered() >= n && backlog() == 0 }
	deadline := time.Now().Add(cmp.Or(plan.settleIn, 10*time.Minute))
	for !settled() || restarts < 2 || !outageDone {
		if time.Now().After(deadline) {
			// What a stalled run looked like, so that a failure in CI says where it stopped:
			// the consumer's own view, and the broker's view of the subscription (permits,
			// unacked messages, connected consumers).
			calls, successes := state.progress()
			t.Logf("chaos: at the deadline: %d handler calls, %d successes, %d restarts, in flight %d, health %+v",
				calls, successes, restarts, current.InFlight(), current.Health())
			if b == nil {
				code, body := brokertest.AdminDo(t, http.MethodGet, brokertest.TopicURL(tg.Admin(t), topic)+"/stats", "")
				t.Logf("chaos: the topic's stats (HTTP %d): %s", code, body)
			}
			require.Failf(t, "chaos did not settle", "handled %d, dead %d, backlog %d", handled(), dead.count(), backlog())
		}
		_, successes := state.progress()
		switch {
		case b == nil:
		case outageAt.IsZero() && successes >= n/3:
			b.FailNextSends(dlqTopic, 1<<30, pulsartest.NotAllowedError)
			outageAt = time.Now()
		case !outageAt.IsZero() && !outageDone && time.Since(outageAt) >= outage:
			b.FailNextSends(dlqTopic, 0, pulsartest.NotAllowedError)
			outageDone = true
		}
		if (restarts == 0 && successes >= n/4) || (restarts == 1 && successes >= 2*n/3) {
			stop()
			stop = start(newChaosConsumer())
			restarts++
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopDrops()
	drops := <-dropsDone
	stop()
	elapsed := time.Since(published)

	deadIDs := map[string]int{}
	for _, m := range dead.wait(t, dead.count(), time.Second) {
		env, err := envelope.Decode(m.Payload())
		require.NoError(t, err)
		require.NotNil(t, env.DeadLetter)
		assert.True(t, ids[env.Meta.ID], "dead letter of an unknown message")
		assert.Equal(t, envelope.ReasonFailed, env.DeadLetter.Reason)
		deadIDs[env.Meta.ID]++
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	lost, repeats, dupSuccess, both, beyond := 0, 0, 0, 0, 0
	for id := range ids {
		seen := state.attempts[id]
		if state.successes[id] == 0 && deadIDs[id] == 0 {
			lost++
		}
		if state.successes[id] > 1 {
			dupSuccess += state.successes[id] - 1
		}
		if state.successes[id] > 0 && deadIDs[id] > 0 {
			both++
		}
		distinct := map[int]bool{}
		for _, a := range seen {
			if a > maxAttempts {
				beyond++
			}
			distinct[a] = true
		}
		repeats += len(seen) - len(distinct)
	}
	copies := 0
	for _, c := range deadIDs {
		copies += c
	}
	if out != nil {
		// The output topic's view: the ids with more than one message there, and those with
		// one there and a dead-letter copy too.
		outIDs := map[string]int{}
		for _, m := range out.wait(t, out.count(), time.Second) {
			outIDs[outputOf(t, m)]++
		}
		dupOut, outAndDead, outLost := 0, 0, 0
		for id, c := range outIDs {
			dupOut += c - 1
			if deadIDs[id] > 0 {
				outAndDead++
			}
		}
		for id := range ids {
			if outIDs[id] == 0 && deadIDs[id] == 0 {
				outLost++
			}
		}
		// What counts with transactions is what was committed: an id lost has neither an
		// output nor a dead letter. An id with both, and a duplicate output, come from
		// sends that went out before their transaction was aborted anyway (a failed commit,
		// a lost connection), which pulsar-client-go v0.21.0 (as v0.19.0) lets the broker
		// deliver (apache/pulsar-client-go#1498): reported, not asserted.
		assert.Zero(t, outLost, "ids with neither an output nor a dead letter")
		t.Logf("transactions: output messages %d for %d ids, duplicates on the output topic %d, ids with an output and a dead letter %d, ids with neither %d",
			out.count(), len(outIDs), dupOut, outAndDead, outLost)
	}
	t.Logf("%s on the %s broker: published %d, handled %d, dead-lettered %d (copies %d), lost %d; handler calls %d, "+
		"repeated deliveries %d, duplicate successes %d, handled and dead-lettered %d, calls beyond max attempts %d; "+
		"%d drops or unloads, DLQ outage done %t (%s; %d failed dead-letter writes, %d failed republishes), %d restarts; settled in %s after publishing (total %s)",
		subTypeName(subType), tg.Name, n, len(state.successes), len(deadIDs), copies, lost, state.calls,
		repeats, dupSuccess, both, beyond, drops, b != nil, outage, dlqFailures.Load(), republishFailures.Load(), restarts, elapsed.Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond))
	assert.Zero(t, lost, "messages lost")
	if b != nil {
		assert.Zero(t, beyond, "deliveries handled beyond max attempts")
	} else if beyond > 0 {
		// On Apache Pulsar a delivery's number also comes from the broker's redelivery count
		// (the larger of it and bq-attempts counts), and an unload can lose an ack in flight
		// and deliver the message again with a higher count: a handler may then see a number
		// above max attempts, once, after which a failure exhausts it (counted >= max). Seen
		// in a CI run on a loaded machine (3 of 3,102 calls, 79 unloads). What must hold there
		// is that nothing is lost.
		t.Logf("on the real broker %d handler calls came with a delivery number above %d (redelivery counts after unloads)", beyond, maxAttempts)
	}
}

func subTypeName(t apulsar.SubscriptionType) string {
	switch t {
	case apulsar.Shared:
		return "Shared"
	case apulsar.KeyShared:
		return "Key_Shared"
	case apulsar.Exclusive:
		return "Exclusive"
	default:
		return "Failover"
	}
}
