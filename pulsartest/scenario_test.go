package pulsartest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
)

// Scenario suite of BROKER.md §9. Every scenario runs against the embedded broker and, when PULSAR_URL is set,
// against a real broker.

// 1. round trip: sync send, async batch, key, properties, event time, producer name, ids with batch index.
func TestScenario01RoundTrip(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		k := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Hour})
		eventTime := time.UnixMilli(1_700_000_000_000)
		id0, err := p.Send(t.Context(), &apulsar.ProducerMessage{
			Payload: []byte("sync"), Key: "k1", Properties: map[string]string{"a": "b"}, EventTime: eventTime,
		})
		require.NoError(t, err)
		var wg sync.WaitGroup
		ids := make([]apulsar.MessageID, 3)
		for i := range 3 {
			wg.Add(1)
			p.SendAsync(t.Context(), &apulsar.ProducerMessage{Payload: []byte{'a' + byte(i)}},
				func(id apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
					defer wg.Done()
					assert.NoError(t, err)
					ids[i] = id
				})
		}
		require.NoError(t, p.FlushWithCtx(t.Context()))
		wg.Wait()

		ms := receiveN(t, k, 4)
		assert.Equal(t, []string{"sync", "a", "b", "c"}, payloads(ms))
		assert.Equal(t, "k1", ms[0].Key())
		assert.Equal(t, map[string]string{"a": "b"}, ms[0].Properties())
		assert.Equal(t, eventTime.UnixMilli(), ms[0].EventTime().UnixMilli())
		assert.Equal(t, p.Name(), ms[0].ProducerName())
		assert.NotEmpty(t, p.Name())
		assert.Equal(t, id0.LedgerID(), ms[0].ID().LedgerID())
		assert.Equal(t, id0.EntryID(), ms[0].ID().EntryID())
		for i := 1; i < 4; i++ {
			id := ms[i].ID()
			assert.Equal(t, ids[0].LedgerID(), id.LedgerID())
			assert.Equal(t, ids[0].EntryID(), id.EntryID(), "one batch entry")
			assert.Equal(t, int32(i-1), id.BatchIdx())
			assert.Equal(t, int32(3), id.BatchSize())
			assert.Equal(t, ids[i-1].BatchIdx(), id.BatchIdx())
			require.NoError(t, k.Ack(ms[i]))
		}
		require.NoError(t, k.Ack(ms[0]))
		if b := tg.Broker(); b != nil {
			testwait.Eventually(t, eventuallyWithin, func() bool { return b.Backlog(topic, "s") == 0 }, "backlog 0")
		}
	})
}

// 2. initial position: Latest vs Earliest; an Earliest subscription created later sees old messages.
func TestScenario02InitialPosition(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		sendAll(t, p, "old")
		latest := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "latest"})
		earliest := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "earliest", SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		})
		sendAll(t, p, "new")
		assert.Equal(t, []string{"new"}, payloads(receiveN(t, latest, 1)))
		assert.Equal(t, []string{"old", "new"}, payloads(receiveN(t, earliest, 2)))
		expectNone(t, latest, 200*time.Millisecond)
	})
}

// 3. fan-out: two subscriptions each get everything.
func TestScenario03FanOut(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		a := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "a"})
		b := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "b", Type: apulsar.Shared})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		want := numbered(10)
		sendAll(t, p, want...)
		assert.Equal(t, want, payloads(receiveN(t, a, 10)))
		assert.Equal(t, want, sorted(payloads(receiveN(t, b, 10))))
	})
}

// 4. Exclusive: a second consumer gets ConsumerBusy, a different type is rejected, a new consumer resumes from
// mark-delete after close.
func TestScenario04Exclusive(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		first := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Exclusive})
		_, err := c.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Exclusive})
		require.Error(t, err, "second exclusive consumer")
		_, err = c.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		require.Error(t, err, "consumer of another type")

		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendAll(t, p, numbered(5)...)
		ms := receiveN(t, first, 5)
		require.NoError(t, first.Ack(ms[0]))
		require.NoError(t, first.Ack(ms[1]))
		first.Close()
		again := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Exclusive})
		assert.Equal(t, []string{"m-2", "m-3", "m-4"}, payloads(receiveN(t, again, 3)))
	})
}

// 5. ack holes: ack 1 and 3, restart, only 2 comes back; cumulative ack on Exclusive.
func TestScenario05AckHoles(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}
		k := subscribe(t, c, opts)
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendAll(t, p, "1", "2", "3")
		ms := receiveN(t, k, 3)
		require.NoError(t, k.Ack(ms[0]))
		require.NoError(t, k.Ack(ms[2]))
		k.Close()

		k = subscribe(t, c, opts)
		ms = receiveN(t, k, 1)
		assert.Equal(t, []string{"2"}, payloads(ms))
		expectNone(t, k, 200*time.Millisecond)
		sendAll(t, p, "4", "5", "6")
		ms = append(ms, receiveN(t, k, 3)...)
		assert.Equal(t, []string{"2", "4", "5", "6"}, payloads(ms))
		require.NoError(t, k.AckCumulative(ms[2]))
		k.Close()

		k = subscribe(t, c, opts)
		assert.Equal(t, []string{"6"}, payloads(receiveN(t, k, 1)))
		expectNone(t, k, 200*time.Millisecond)
	})
}

// 6. Shared: disjoint sets with a complete union; a closing consumer's unacked messages go to the other.
func TestScenario06Shared(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared}
		a := subscribe(t, c, opts)
		b := subscribe(t, c, opts)
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		want := numbered(40)
		sendAll(t, p, want...)

		var mu sync.Mutex
		seen := map[string]int{}
		ctx, cancel := context.WithTimeout(t.Context(), receiveTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, k := range []apulsar.Consumer{a, b} {
			wg.Go(func() {
				for {
					m, err := k.Receive(ctx)
					if err != nil {
						return
					}
					if err := k.Ack(m); err != nil {
						t.Errorf("ack: %v", err)
					}
					mu.Lock()
					seen[string(m.Payload())]++
					if len(seen) == len(want) {
						cancel()
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, seen, len(want))
		for m, n := range seen {
			assert.Equal(t, 1, n, "message %s delivered once", m)
		}

		// a receives without acking, then closes: b gets the messages.
		b.Close()
		sendAll(t, p, "x", "y", "z")
		assert.Equal(t, []string{"x", "y", "z"}, payloads(receiveN(t, a, 3)))
		other := subscribe(t, c, opts)
		a.Close()
		assert.Equal(t, []string{"x", "y", "z"}, sorted(payloads(receiveN(t, other, 3))))
	})
}

// 7. Shared nack and DLQ: redelivery count 0, 1, 2; then the client moves the message to the DLQ.
func TestScenario07SharedNackDLQ(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		dlq := topic + "-dlq"
		k := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: apulsar.Shared,
			DLQ: &apulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: dlq, InitialSubscriptionName: "dlq-sub"},
		})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		ids := sendAll(t, p, "poison")
		for want := uint32(0); want < 3; want++ {
			m := receive(t, k)
			assert.Equal(t, "poison", string(m.Payload()))
			assert.Equal(t, want, m.RedeliveryCount())
			k.Nack(m)
		}
		d := subscribe(t, c, apulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "dlq-sub", Type: apulsar.Shared})
		m := receive(t, d)
		assert.Equal(t, "poison", string(m.Payload()))
		assert.Contains(t, m.Properties()["REAL_TOPIC"], topic)
		assert.Equal(t, ids[0].String(), m.Properties()["ORIGIN_MESSAGE_ID"])
		require.NoError(t, d.Ack(m))
		expectNone(t, k, 300*time.Millisecond)
	})
}

// 8. Exclusive and Failover nack: the count stays 0 and the rewind redelivers later unacked messages too.
func TestScenario08ExclusiveNack(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		for _, typ := range []apulsar.SubscriptionType{apulsar.Exclusive, apulsar.Failover} {
			tp := fmt.Sprintf("%s-%d", topic, typ)
			// Acks with response: the ack of "1" must reach the broker before the nack's rewind.
			k := subscribe(t, c, apulsar.ConsumerOptions{Topic: tp, SubscriptionName: "s", Type: typ, AckWithResponse: true})
			p := newProducer(t, c, apulsar.ProducerOptions{Topic: tp, DisableBatching: true})
			sendAll(t, p, "1", "2", "3")
			ms := receiveN(t, k, 3)
			require.NoError(t, k.Ack(ms[0]))
			k.Nack(ms[1])
			again := receiveN(t, k, 2)
			assert.Equal(t, []string{"2", "3"}, payloads(again), "type %d: rewind redelivers everything unacked, in order", typ)
			for _, m := range again {
				assert.Equal(t, uint32(0), m.RedeliveryCount(), "type %d", typ)
			}
		}
	})
}

type activeListener struct {
	mu     sync.Mutex
	events []string
}

func (l *activeListener) BecameActive(_ apulsar.Consumer, _ string, _ int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "active")
}

func (l *activeListener) BecameInactive(_ apulsar.Consumer, _ string, _ int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "inactive")
}

func (l *activeListener) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return ""
	}
	return l.events[len(l.events)-1]
}

// 9. Failover: one active consumer with listener events; the standby takes over from mark-delete; partitions are
// assigned by consumer name order.
func TestScenario09Failover(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		la, lb := &activeListener{}, &activeListener{}
		a := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: apulsar.Failover, Name: "a-consumer", EventListener: la,
		})
		b := subscribe(t, c, apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: apulsar.Failover, Name: "b-consumer", EventListener: lb,
		})
		testwait.Eventually(t, eventuallyWithin, func() bool {
			return (la.last() == "active") != (lb.last() == "active") && la.last() != "" && lb.last() != ""
		}, "one active consumer")
		active, standby, activeL := a, b, la
		if lb.last() == "active" {
			active, standby, activeL = b, a, lb
		}
		_ = activeL
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendAll(t, p, numbered(5)...)
		ms := receiveN(t, active, 5)
		expectNone(t, standby, 200*time.Millisecond)
		require.NoError(t, active.Ack(ms[0]))
		require.NoError(t, active.Ack(ms[1]))
		active.Close()
		assert.Equal(t, []string{"m-2", "m-3", "m-4"}, payloads(receiveN(t, standby, 3)))
		standbyL := lb
		if standby == a {
			standbyL = la
		}
		testwait.Eventually(t, eventuallyWithin, func() bool { return standbyL.last() == "active" }, "standby became active")
	})
}

func TestScenario09FailoverPartitioned(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		tg.CreatePartitionedTopic(t, topic, 2)
		opts := func(name string) apulsar.ConsumerOptions {
			return apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Failover, Name: name}
		}
		a := subscribe(t, c, opts("a-consumer"))
		b := subscribe(t, c, opts("b-consumer"))
		// The producer routes by the "part" property, so that a probe goes to a chosen partition.
		p := newProducer(t, c, apulsar.ProducerOptions{
			Topic: topic, DisableBatching: true,
			MessageRouter: func(m *apulsar.ProducerMessage, md apulsar.TopicMetadata) int {
				n, _ := strconv.Atoi(m.Properties["part"])
				return n % int(md.NumPartitions())
			},
		})
		// Until b has joined, a is active on both partitions, and Pulsar moves partition 1 to b
		// only after its failover delay (1 s by default): a message sent before that goes to a.
		// This test flaked on a loaded machine for that cause (fixed for it): it now waits, on
		// the data path itself, until a probe of each partition reaches its consumer.
		for _, w := range []struct {
			part         string
			owner, other apulsar.Consumer
		}{{"0", a, b}, {"1", b, a}} {
			testwait.Eventually(t, eventuallyWithin, func() bool {
				_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("probe"), Properties: map[string]string{"part": w.part}})
				require.NoError(t, err)
				for _, k := range []apulsar.Consumer{w.other, w.owner} { // the other one first: a probe it got is acked away
					ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
					m, err := k.Receive(ctx)
					cancel()
					if err != nil {
						continue
					}
					require.NoError(t, k.Ack(m))
					if k == w.owner {
						return true
					}
				}
				return false
			}, "partition %s's consumer to be active", w.part)
		}
		for i := range 10 {
			_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte{byte('0' + i)}, Properties: map[string]string{"part": strconv.Itoa(i % 2)}})
			require.NoError(t, err)
		}
		got := 0
		for _, tc := range []struct {
			k    apulsar.Consumer
			part int32
		}{{a, 0}, {b, 1}} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			for {
				m, err := tc.k.Receive(ctx)
				if err != nil {
					break
				}
				if string(m.Payload()) == "probe" { // a probe that arrived after its round ended
					continue
				}
				got++
				assert.Equal(t, tc.part, m.ID().PartitionIdx(), "partition %d belongs to consumer %d", m.ID().PartitionIdx(), tc.part)
			}
			cancel()
		}
		assert.Equal(t, 10, got)
	})
}
