package pulsartest_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
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
	eventually(t, "one message of the batch left", func() bool { return b.Backlog(topic, "s") == 1 })
	k.Close()
	k = subscribe(t, c, opts)
	m := receive(t, k)
	assert.Equal(t, "b", string(m.Payload()), "only the unacked batch member comes back")
	expectNone(t, k, 200*time.Millisecond)
	require.NoError(t, k.Ack(m))
	eventually(t, "backlog 0", func() bool { return b.Backlog(topic, "s") == 0 })
}

func TestBatchWithoutBatchIndexAckRedeliversTheWholeBatch(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared}
	k := subscribe(t, c, opts)
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Hour})
	sendBatch(t, p, "a", "b", "c")
	ms := receiveN(t, k, 3)
	require.NoError(t, k.Ack(ms[0]))
	k.Close()
	assert.Equal(t, 3, b.Backlog(topic, "s"), "partially acked batch stays whole")
	k = subscribe(t, c, opts)
	assert.Equal(t, []string{"a", "b", "c"}, payloads(receiveN(t, k, 3)))
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
