package pulsartest_test

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

func sendBatch(t *testing.T, p apulsar.Producer, payloads ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range payloads {
		wg.Add(1)
		p.SendAsync(t.Context(), &apulsar.ProducerMessage{Payload: []byte(s)},
			func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
	}
	require.NoError(t, p.FlushWithCtx(t.Context()))
	wg.Wait()
}

func TestBatchIndexAck(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithBatchIndexAck(true))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	opts := apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: apulsar.Shared, EnableBatchIndexAcknowledgment: true,
		AckWithResponse: true,
	}
	k := subscribe(t, c, opts)
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Hour})
	sendBatch(t, p, "a", "b", "c")
	ms := receiveN(t, k, 3)
	require.NoError(t, k.Ack(ms[0]))
	require.NoError(t, k.Ack(ms[2]))
	testwait.Eventually(t, eventuallyWithin, func() bool { return b.Backlog(topic, "s") == 1 }, "one message of the batch left")
	k.Close()
	k = subscribe(t, c, opts)
	m := receive(t, k)
	assert.Equal(t, "b", string(m.Payload()), "only the unacked batch member comes back")
	expectNone(t, k, 200*time.Millisecond)
	require.NoError(t, k.Ack(m))
	testwait.Eventually(t, eventuallyWithin, func() bool { return b.Backlog(topic, "s") == 0 }, "backlog 0")
}

func TestBrokerEntryMetadata(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithBrokerEntryMetadata(true))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	before := time.Now().Add(-time.Second)
	sendAll(t, p, "a", "b")
	for i, m := range receiveN(t, k, 2) {
		require.NotNil(t, m.Index())
		assert.Equal(t, uint64(i), *m.Index())
		require.NotNil(t, m.BrokerPublishTime())
		assert.True(t, m.BrokerPublishTime().After(before))
	}
}

func TestTopicsPatternConsumer(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	base := uniqueName(t, "pat")
	for i := range 2 {
		require.NoError(t, b.CreateTopic(base+"-"+strconv.Itoa(i)))
	}
	require.NoError(t, b.CreateTopic("other-"+base))
	k := subscribe(t, c, apulsar.ConsumerOptions{
		TopicsPattern: "persistent://public/default/" + base + "-.*", SubscriptionName: "s",
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	for _, topic := range []string{base + "-0", base + "-1", "other-" + base} {
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		sendAll(t, p, topic)
	}
	assert.Equal(t, []string{base + "-0", base + "-1"}, sorted(payloads(receiveN(t, k, 2))))
	expectNone(t, k, 200*time.Millisecond)
}

func TestRedeliveryOnDisconnect(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			t.Parallel()
			b := pulsartest.NewBroker(t, pulsartest.WithRedeliveryOnDisconnect(on))
			c := newClient(t, b.URL())
			topic := uniqueName(t, "t")
			opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared}
			first := subscribe(t, c, opts)
			p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
			sendAll(t, p, "x")
			receive(t, first)
			second := subscribe(t, c, opts)
			first.Close()
			m := receive(t, second)
			want := uint32(0)
			if on {
				want = 1
			}
			assert.Equal(t, want, m.RedeliveryCount())
		})
	}
}

func TestKeySharedSticky(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	policy := func(lo, hi int) *apulsar.KeySharedPolicy {
		p, err := apulsar.NewKeySharedPolicySticky([]int{lo, hi})
		require.NoError(t, err)
		return p
	}
	opts := func(p *apulsar.KeySharedPolicy) apulsar.ConsumerOptions {
		return apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.KeyShared, KeySharedPolicy: p}
	}
	low := subscribe(t, c, opts(policy(0, 32767)))
	high := subscribe(t, c, opts(policy(32768, 65535)))
	_, err := c.Subscribe(opts(policy(100, 200)))
	require.Error(t, err, "overlapping range is refused")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 40 {
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Key: "k" + strconv.Itoa(i%10), Payload: []byte(strconv.Itoa(i))})
		require.NoError(t, err)
	}
	got := collect(t, 40, low, high)
	keysOf := func(ms []apulsar.Message) map[string]bool {
		out := map[string]bool{}
		for _, m := range ms {
			out[m.Key()] = true
		}
		return out
	}
	lk, hk := keysOf(got[0]), keysOf(got[1])
	for k := range lk {
		assert.False(t, hk[k], "key %s went to both consumers", k)
	}
	assert.Len(t, lk, 10-len(hk))
}

func TestExclusiveProducerAccessMode(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	newProducer(t, c, apulsar.ProducerOptions{Topic: topic, ProducerAccessMode: apulsar.ProducerAccessModeExclusive})
	_, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.Error(t, err, "second producer next to an exclusive one")
}

func TestTrimDropsEntriesAckedByEverySubscription(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	a := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "a", AckWithResponse: true})
	slow := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", AckWithResponse: true})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendAll(t, p, numbered(4)...)
	for _, m := range receiveN(t, a, 4) {
		require.NoError(t, a.Ack(m))
	}
	ms := receiveN(t, slow, 4)
	require.NoError(t, slow.Ack(ms[0]))
	require.NoError(t, slow.Ack(ms[1]))
	assert.Equal(t, 2, b.Trim(topic), "only what both subscriptions acked")
	assert.Equal(t, 2, b.Stats(topic).Entries)
	assert.Equal(t, 2, b.Backlog(topic, "slow"))
	slow.Close()
	slow = subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	assert.Equal(t, []string{"m-2", "m-3"}, payloads(receiveN(t, slow, 2)))
}

func TestFailoverConsistentHashSelection(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithFailoverSelection(pulsartest.ConsistentHash))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	la, lb := &activeListener{}, &activeListener{}
	opts := func(name string, l *activeListener) apulsar.ConsumerOptions {
		return apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Failover, Name: name, EventListener: l}
	}
	a := subscribe(t, c, opts("a", la))
	subscribe(t, c, opts("b", lb))
	testwait.Eventually(t, eventuallyWithin, func() bool {
		return (la.last() == "active") != (lb.last() == "active") && la.last() != "" && lb.last() != ""
	}, "exactly one active consumer")
	if la.last() == "active" {
		a.Close()
		testwait.Eventually(t, eventuallyWithin, func() bool { return lb.last() == "active" }, "fail over to b")
	}
}

// The real client's CONNECT decodes with our wire types (field numbers and required fields agree), and both
// protobuf registrations coexist in this binary (a conflict would panic at init).
func TestRealClientConnectDecodes(t *testing.T) {
	t.Parallel()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan *wire.CommandConnect, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		f, err := wire.ReadFrame(nc, 1<<20)
		if err == nil {
			got <- f.Cmd.GetConnect()
		}
		close(got)
	}()
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: "pulsar://" + ln.Addr().String(), OperationTimeout: time.Second, ConnectionTimeout: time.Second,
		Logger: plog.DefaultNopLogger(),
	})
	require.NoError(t, err)
	lookupDone := make(chan struct{})
	go func() {
		defer close(lookupDone)
		_, _ = c.TopicPartitions("x") // fails: nobody answers CONNECT
	}()
	defer func() {
		c.Close()
		<-lookupDone
	}()
	cc := <-got
	require.NoError(t, ln.Close()) // the client's retries are refused at once
	require.NotNil(t, cc)
	assert.True(t, strings.HasPrefix(cc.GetClientVersion(), "Pulsar-Go-"), cc.GetClientVersion())
	assert.Equal(t, int32(20), cc.GetProtocolVersion())
	assert.True(t, cc.GetFeatureFlags().GetSupportsBrokerEntryMetadata())
}

func TestRealisticFailoverDelay(t *testing.T) {
	t.Parallel()
	clock := pulsartest.NewManualClock(time.Now())
	b := pulsartest.NewBroker(t, pulsartest.WithRealisticTiming(true), pulsartest.WithClock(clock))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	lb := &activeListener{}
	a := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Failover, Name: "a"})
	standby := subscribe(t, c, apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: apulsar.Failover, Name: "b", EventListener: lb,
	})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendAll(t, p, "x")
	receive(t, a)
	testwait.Eventually(t, eventuallyWithin, func() bool { return lb.last() == "inactive" }, "b told it is inactive")
	a.Close()
	testwait.Eventually(t, eventuallyWithin, func() bool { return lb.last() == "active" }, "b told it is active")
	expectNone(t, standby, 200*time.Millisecond) // the failover delay has not passed
	clock.Advance(time.Second)
	assert.Equal(t, "x", string(receive(t, standby).Payload()))
}

func TestKeySharedAutoSplitSelector(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithKeySharedSelector(pulsartest.AutoSplitHashRange))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.KeyShared}
	ks := []apulsar.Consumer{subscribe(t, c, opts), subscribe(t, c, opts), subscribe(t, c, opts)}
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 60 {
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Key: "k" + strconv.Itoa(i%12), Payload: []byte(strconv.Itoa(i))})
		require.NoError(t, err)
	}
	got := collect(t, 60, ks...)
	owner := map[string]int{}
	for ci, ms := range got {
		for _, m := range ms {
			if o, ok := owner[m.Key()]; ok {
				assert.Equal(t, o, ci, "key %s stays with one consumer", m.Key())
			}
			owner[m.Key()] = ci
		}
	}
	// A leaving consumer's range is merged: its keys still reach someone.
	ks[1].Close()
	sendAll(t, p, "after")
	after := collect(t, 1, ks[0], ks[2])
	assert.Len(t, append(after[0], after[1]...), 1)
}

func TestInactiveTopicGC(t *testing.T) {
	t.Parallel()
	clock := pulsartest.NewManualClock(time.Now())
	b := pulsartest.NewBroker(t, pulsartest.WithClock(clock), pulsartest.WithInactiveTopicGC(time.Minute))
	c := newClient(t, b.URL())
	idle, used := uniqueName(t, "idle"), uniqueName(t, "used")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: idle})
	sendAll(t, p, "x")
	p.Close()
	subscribe(t, c, apulsar.ConsumerOptions{Topic: used, SubscriptionName: "s"})
	require.NoError(t, b.CreatePartitionedTopic("kept", 1))
	testwait.Eventually(t, eventuallyWithin, func() bool { return b.Stats(idle).Producers == 0 }, "producer gone")
	clock.Advance(time.Minute)
	assert.NotContains(t, b.Topics(), "persistent://public/default/"+idle)
	assert.Contains(t, b.Topics(), "persistent://public/default/"+used)
	assert.Contains(t, b.Topics(), "persistent://public/default/kept-partition-0", "partitioned topics are admin-managed")
}

// A Shared subscription hands all chunks of one message to one consumer, so every consumer can reassemble.
func TestSharedChunkPinning(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithMaxMessageSize(8*1024))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared}
	k1, k2 := subscribe(t, c, opts), subscribe(t, c, opts)
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, EnableChunking: true, DisableBatching: true})
	want := map[string]bool{}
	for i := range 9 { // three chunks each: the 20-entry round-robin turn ends inside the seventh message
		body := strings.Repeat(strconv.Itoa(i), 20*1024)
		want[body] = true
		p.SendAsync(t.Context(), &apulsar.ProducerMessage{Payload: []byte(body)},
			func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
	}
	require.NoError(t, p.FlushWithCtx(t.Context()))
	got := collect(t, 9, k1, k2)
	for _, ms := range got {
		for _, m := range ms {
			assert.True(t, want[string(m.Payload())], "complete payload")
			delete(want, string(m.Payload()))
		}
	}
	assert.Empty(t, want)
}

func TestWaitForExclusiveProducer(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	first, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic, ProducerAccessMode: apulsar.ProducerAccessModeExclusive})
	require.NoError(t, err)
	created := make(chan apulsar.Producer, 1)
	go func() {
		p, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic, ProducerAccessMode: apulsar.ProducerAccessModeWaitForExclusive})
		if err != nil {
			t.Errorf("wait for exclusive: %v", err)
			close(created)
			return
		}
		created <- p
	}()
	select {
	case <-created:
		t.Fatal("the waiting producer was created while the exclusive one is connected")
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	select {
	case p := <-created:
		require.NotNil(t, p)
		defer p.Close()
		k := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		})
		sendAll(t, p, "mine now")
		assert.Equal(t, "mine now", string(receive(t, k).Payload()))
	case <-time.After(receiveTimeout):
		t.Fatal("the waiting producer never became ready")
	}
}
