package pulsar

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/mocks"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
)

// TestBusyKeyDoesNotStallOtherKeys: with concurrency 8, one key's handler is blocked for
// 5 s while messages on 1,000 other keys keep arriving at a steady rate. The share of the
// other keys' messages handled during the block must be at least 90 % of the share handled
// in the baseline windows before and after it, measured in the same run. Before the pool
// queued per key, the receive loop stopped at the first message hashed to the blocked
// worker, and the share during the block was close to 0.
func TestBusyKeyDoesNotStallOtherKeys(t *testing.T) {
	t.Parallel()
	const (
		block  = 5 * time.Second
		window = 2 * time.Second
		settle = 500 * time.Millisecond
	)
	var (
		mu      sync.Mutex
		offered []time.Time // when each message of another key was generated
		handled []time.Time // when each message of another key was handled
	)
	release := make(chan struct{})
	slowStarted := make(chan struct{})
	h := newHarness(t, WithConcurrency(8), Handle(testURN, func(_ context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
		if msg.Key() == "slow" {
			close(slowStarted)
			<-release
			return nil
		}
		time.Sleep(200 * time.Microsecond)
		mu.Lock()
		handled = append(handled, time.Now())
		mu.Unlock()
		return nil
	}))
	h.settler.EXPECT().Ack(gomock.Any()).Return(nil).AnyTimes()
	h.settler.EXPECT().Nack(gomock.Any()).AnyTimes()
	recv := mocks.NewMockReceiver(h.ctrl)
	h.c.recv = recv

	// A generator offers a message of another key every millisecond, whatever the consumer
	// does; the receiver hands them out in order.
	queue := make(chan apulsar.Message, 100_000)
	genCtx, stopGen := context.WithCancel(t.Context())
	genDone := make(chan struct{})
	injectSlow := make(chan struct{})
	proto, _ := newMessage(t, testURN, 0, 0)
	message := func(key string) *fakeMessage {
		m := *proto
		m.props = maps.Clone(proto.props)
		m.key = key
		return &m
	}
	inject := injectSlow
	go func() {
		defer close(genDone)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-genCtx.Done():
				return
			case <-inject:
				queue <- message("slow")
				inject = nil
			case <-tick.C:
				m := message("k" + strconv.Itoa(i%1000))
				mu.Lock()
				offered = append(offered, time.Now())
				mu.Unlock()
				queue <- m
			}
		}
	}()
	recv.EXPECT().Receive(gomock.Any()).DoAndReturn(func(ctx context.Context) (apulsar.Message, error) {
		select {
		case m := <-queue:
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}).AnyTimes()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()

	share := func(from, to time.Time) (float64, int, int) {
		mu.Lock()
		defer mu.Unlock()
		count := func(ts []time.Time) int {
			n := 0
			for _, x := range ts {
				if !x.Before(from) && x.Before(to) {
					n++
				}
			}
			return n
		}
		o, hd := count(offered), count(handled)
		if o == 0 {
			return 0, o, hd
		}
		return float64(hd) / float64(o), o, hd
	}

	time.Sleep(settle)
	base1From := time.Now()
	time.Sleep(window)
	base1To := time.Now()
	close(injectSlow)
	<-slowStarted
	blockStart := time.Now()
	time.Sleep(settle)
	blockFrom := time.Now()
	time.Sleep(window)
	blockTo := time.Now()
	time.Sleep(time.Until(blockStart.Add(block)))
	close(release)
	time.Sleep(settle)
	base2From := time.Now()
	time.Sleep(window)
	base2To := time.Now()
	stopGen()
	<-genDone
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	b1, o1, h1 := share(base1From, base1To)
	bl, ob, hb := share(blockFrom, blockTo)
	b2, o2, h2 := share(base2From, base2To)
	t.Logf("other keys, handled/offered: baseline %.3f (%d/%d), blocked %.3f (%d/%d), baseline %.3f (%d/%d)",
		b1, h1, o1, bl, hb, ob, b2, h2, o2)
	require.Positive(t, o1)
	require.Positive(t, ob)
	baseline := (b1 + b2) / 2
	assert.GreaterOrEqual(t, bl, 0.9*baseline, "other keys kept less than 90 %% of their throughput while one key was blocked")
}

// TestBusyKeyHoldsBackOnlyItsOwnMessages: the later messages of a busy key wait for it, in
// order, while every message of other keys is handled in the meantime.
func TestBusyKeyHoldsBackOnlyItsOwnMessages(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var (
		mu    sync.Mutex
		order []string
	)
	var others atomic.Int32
	const nOthers = 50
	allOthers := make(chan struct{})
	h := newHarness(t, WithConcurrency(2), WithMaxInflight(100), Handle(testURN, func(_ context.Context, _ *envelope.Envelope, msg apulsar.Message) error {
		seq := msg.Properties()["seq"]
		if msg.Key() == "busy" {
			if seq == "0" {
				<-release
			}
			mu.Lock()
			order = append(order, seq)
			mu.Unlock()
			return nil
		}
		if others.Add(1) == nOthers {
			close(allOthers)
		}
		return nil
	}))
	var msgs []apulsar.Message
	for i := range 3 {
		m, _ := newMessage(t, testURN, 0, 0)
		m.key, m.props["seq"] = "busy", strconv.Itoa(i)
		msgs = append(msgs, m)
	}
	for i := range nOthers {
		m, _ := newMessage(t, testURN, 0, 0)
		m.key = "other-" + strconv.Itoa(i%5)
		msgs = append(msgs, m)
	}
	recv := mocks.NewMockReceiver(h.ctrl)
	h.c.recv = recv
	feed(recv, msgs...)
	acked := make(chan struct{}, len(msgs))
	h.settler.EXPECT().Ack(gomock.Any()).DoAndReturn(func(apulsar.Message) error {
		acked <- struct{}{}
		return nil
	}).Times(len(msgs))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	select {
	case <-allOthers:
	case <-time.After(10 * time.Second):
		t.Fatalf("other keys waited for the busy key: %d of %d handled", others.Load(), nOthers)
	}
	mu.Lock()
	assert.Empty(t, order, "the busy key's later messages started before its first finished")
	mu.Unlock()
	close(release)
	for range msgs {
		<-acked
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, []string{"0", "1", "2"}, order)
}

// TestMaxInflightBoundsReceivedButUnsettled: with every worker stuck, the receive loop
// stops at the bound; when Run stops, the messages received but never started are
// negatively acknowledged.
func TestMaxInflightBoundsReceivedButUnsettled(t *testing.T) {
	t.Parallel()
	const maxInflight = 6
	release := make(chan struct{})
	var started atomic.Int32
	h := newHarness(t, WithConcurrency(2), WithMaxInflight(maxInflight), Handle(testURN,
		func(context.Context, *envelope.Envelope, apulsar.Message) error {
			started.Add(1)
			<-release
			return nil
		}))
	recv := mocks.NewMockReceiver(h.ctrl)
	h.c.recv = recv
	var received atomic.Int32
	recv.EXPECT().Receive(gomock.Any()).DoAndReturn(func(context.Context) (apulsar.Message, error) {
		i := received.Add(1)
		m, _ := newMessage(t, testURN, 0, 0)
		m.key = "k" + strconv.Itoa(int(i))
		return m, nil
	}).AnyTimes()
	var acks, nacks atomic.Int32
	h.settler.EXPECT().Ack(gomock.Any()).DoAndReturn(func(apulsar.Message) error { acks.Add(1); return nil }).AnyTimes()
	h.settler.EXPECT().Nack(gomock.Any()).Do(func(apulsar.Message) { nacks.Add(1) }).AnyTimes()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx) }()
	testwait.Eventually(t, 5*time.Second, func() bool { return received.Load() >= maxInflight && started.Load() == 2 },
		"the in-flight bound is reached and two handlers run")
	time.Sleep(100 * time.Millisecond) // room for a receive beyond the bound, if one were made
	assert.Equal(t, int32(maxInflight), received.Load(), "received beyond the in-flight bound")
	cancel()
	testwait.Eventually(t, 5*time.Second, func() bool { return nacks.Load() == maxInflight-2 },
		"the queued messages are handed back when Run stops")
	close(release)
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, int32(2), acks.Load(), "the two started messages are settled")
	assert.Equal(t, int32(maxInflight-2), nacks.Load(), "the queued ones are handed back")
}

func TestMaxInflightBelowConcurrencyIsRefused(t *testing.T) {
	t.Parallel()
	_, err := consumerSetup([]ConsumerOption{WithMaxInflight(3), WithConcurrency(4), Handle(testURN, handlerReturning(nil))})
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = consumerSetup([]ConsumerOption{WithMaxInflight(0), Handle(testURN, handlerReturning(nil))})
	require.ErrorIs(t, err, ErrInvalidOption)
	_, err = consumerSetup([]ConsumerOption{WithUnreachableTimeout(-time.Second), Handle(testURN, handlerReturning(nil))})
	require.ErrorIs(t, err, ErrInvalidOption)
}

// The ready queue yields items oldest first whatever the order they were pushed in.
func TestReadyQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q readyQueue
	seqs := rng.Perm(500)
	popped := []uint64{}
	for i, s := range seqs {
		q.push(poolItem{seq: uint64(s)})
		if i%3 == 2 { // interleave pops with pushes
			popped = append(popped, q.pop().seq)
		}
	}
	for q.len() > 0 {
		popped = append(popped, q.pop().seq)
	}
	require.Len(t, popped, len(seqs))
	// every pop returned the least of what was in the queue at the time: replay to check
	var model []uint64
	j := 0
	for i, s := range seqs {
		model = append(model, uint64(s))
		if i%3 == 2 {
			least := slices.Min(model)
			require.Equal(t, least, popped[j], "pop %d", j)
			model = slices.DeleteFunc(model, func(v uint64) bool { return v == least })
			j++
		}
	}
	slices.Sort(model)
	require.Equal(t, model, popped[j:])
}

// The in-flight gate admits max slots, makes the next acquire wait until a slot is freed or
// its ctx ends, and a release without an acquire frees nothing and does not block.
func TestInflightGateBound(t *testing.T) {
	t.Parallel()
	g := newInflightGate(2)
	g.release() // nothing taken: a no-op
	require.True(t, g.acquire(t.Context()))
	require.True(t, g.acquire(t.Context()))
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	require.False(t, g.acquire(ended), "a third slot with ctx ended")

	got := make(chan bool, 1)
	go func() { got <- g.acquire(t.Context()) }()
	select {
	case <-got:
		t.Fatal("a third slot was taken while two were held")
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	require.True(t, <-got, "the freed slot is taken by the waiting acquire")
	g.release()
	g.release()
	g.release() // one more than was taken: still a no-op
	require.True(t, g.acquire(t.Context()))
	require.True(t, g.acquire(t.Context()))
}
