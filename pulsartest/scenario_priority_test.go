package pulsartest_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// These tests subscribe over a hand-driven connection that grants its permits itself, so
// that a test decides when a consumer runs out of permits. They were written when
// pulsar-client-go (v0.19.0) had no option for a consumer's priority level; v0.21.0 has
// ConsumerOptions.PriorityLevel (apache/pulsar-client-go#1487), which
// TestPriorityLevelOptionShared uses.

// On a Shared subscription the broker dispatches to the consumers of the highest priority
// (the lowest priority_level) that have permits, and to a lower priority only while none of
// them has any (AbstractDispatcherMultipleConsumers.getNextConsumer). A consumer of priority
// 0 with permits for everything gets everything; one whose permits run out leaves the rest
// to priority 1, and takes over again when it grants more.
func TestPriorityLevelsShared(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.lookup(fq)
		const hiA, loA, hiB, loB = 1, 2, 3, 4
		// Subscription "a": the priority-0 consumer has permits for everything.
		fc.mustSubscribe(loA, rawSub{topic: fq, sub: "a", name: "lo-a", typ: wire.CommandSubscribe_Shared, priority: 1})
		fc.mustSubscribe(hiA, rawSub{topic: fq, sub: "a", name: "hi-a", typ: wire.CommandSubscribe_Shared, priority: 0})
		fc.flow(loA, 1000)
		fc.flow(hiA, 1000)
		// Subscription "b": the priority-0 consumer has permits for 5 messages only.
		fc.mustSubscribe(hiB, rawSub{topic: fq, sub: "b", name: "hi-b", typ: wire.CommandSubscribe_Shared, priority: 0})
		fc.mustSubscribe(loB, rawSub{topic: fq, sub: "b", name: "lo-b", typ: wire.CommandSubscribe_Shared, priority: 1})
		fc.flow(hiB, 5)
		fc.flow(loB, 1000)
		fc.sync()

		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		const n = 50
		sent := numbered(n)
		sendAll(t, p, sent...)
		got := fc.messagesByConsumer(2 * n)
		assert.Equal(t, sent, got[hiA], "priority 0 with permits gets everything")
		assert.Empty(t, got[loA], "priority 1 gets nothing while priority 0 has permits")
		assert.Equal(t, sent[:5], got[hiB], "priority 0 gets as many as its permits")
		assert.Equal(t, sent[5:], got[loB], "priority 1 gets the rest")

		// More permits for the priority-0 consumer of "b": it is served first again.
		fc.flow(hiB, 1000)
		fc.sync()
		more := []string{"x-0", "x-1", "x-2", "x-3", "x-4"}
		sendAll(t, p, more...)
		got = fc.messagesByConsumer(2 * len(more))
		assert.Equal(t, more, got[hiA])
		assert.Equal(t, more, got[hiB], "priority 0 has permits again")
		assert.Empty(t, got[loA])
		assert.Empty(t, got[loB])
	})
}

// TestPriorityLevelOptionShared is TestPriorityLevelsShared's first case with the Go client's
// own consumers, on the embedded broker and on a real Apache Pulsar: pulsar-client-go v0.21.0
// sends ConsumerOptions.PriorityLevel in its SUBSCRIBE, and the broker honours it. The
// priority-1 consumer subscribes first, so a broker that ignored the level would give it its
// turn; while the priority-0 consumer has permits (1000, the client's default queue) it gets
// nothing, and once that one has left it gets what follows.
//
// The client grants its permits with a FLOW after Subscribe has returned, so the test waits
// for them before it publishes; otherwise the broker could hand the first messages to the
// priority-1 consumer only because the priority-0 one had no permits yet. The wait reads the
// same admin REST stats on both brokers (consumerPermits): each consumer's availablePermits,
// which both report as the 1000 the client asked for once its FLOW has arrived (0 before).
func TestPriorityLevelOptionShared(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "waiting for the consumers' permits")
		opts := func(name string, level int) apulsar.ConsumerOptions {
			return apulsar.ConsumerOptions{
				Topic: topic, SubscriptionName: "s", Type: apulsar.Shared, Name: name,
				ReceiverQueueSize: 1000, PriorityLevel: level,
			}
		}
		lo := subscribe(t, c, opts("lo", 1))
		hi := subscribe(t, c, opts("hi", 0))
		want := map[string]int64{"lo": 1000, "hi": 1000}
		testwait.Eventually(t, eventuallyWithin, func() bool {
			return maps.Equal(consumerPermits(t, admin, topic, "s"), want)
		}, "both consumers to grant their permits: want %v", want)

		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sent := numbered(50)
		sendAll(t, p, sent...)
		got := receiveN(t, hi, len(sent))
		assert.Equal(t, sent, payloads(got), "priority 0 with permits gets everything")
		expectNone(t, lo, 200*time.Millisecond)

		// The priority-0 consumer acknowledges and leaves (Close flushes its acknowledgements):
		// the priority-1 one gets what follows.
		for _, m := range got {
			require.NoError(t, hi.Ack(m))
		}
		hi.Close()
		more := []string{"x-0", "x-1", "x-2"}
		sendAll(t, p, more...)
		assert.Equal(t, more, payloads(receiveN(t, lo, len(more))), "priority 1 once priority 0 has gone")
	})
}

// consumerPermits returns the availablePermits of each consumer of subscription sub on
// public/default/topic, by consumer name, from the admin REST stats (GET …/stats, field
// subscriptions.<sub>.consumers[]), which the embedded broker and Apache Pulsar both serve.
// It returns an empty map while the subscription does not exist yet.
func consumerPermits(t *testing.T, admin, topic, sub string) map[string]int64 {
	t.Helper()
	code, body := brokertest.AdminDo(t, http.MethodGet, brokertest.TopicURL(admin, topic)+"/stats", "")
	require.Equal(t, http.StatusOK, code, "stats of %s: %s", topic, body)
	var st struct {
		Subscriptions map[string]struct {
			Consumers []struct {
				ConsumerName     string `json:"consumerName"`
				AvailablePermits int64  `json:"availablePermits"`
			} `json:"consumers"`
		} `json:"subscriptions"`
	}
	require.NoError(t, json.Unmarshal(body, &st), "stats of %s: %s", topic, body)
	permits := map[string]int64{}
	for _, k := range st.Subscriptions[sub].Consumers {
		permits[k.ConsumerName] = k.AvailablePermits
	}
	return permits
}

// activeOf subscribes one Failover consumer per rawSub (ids from first, in order) to a new
// subscription of topic fq, grants them permits, publishes one message and returns the name of
// the consumer that got it.
func (fc *frameConn) activeOf(c apulsar.Client, fq string, first uint64, subs ...rawSub) string {
	fc.t.Helper()
	fc.lookup(fq)
	for i, s := range subs {
		s.topic, s.sub, s.typ = fq, "s", wire.CommandSubscribe_Failover
		fc.mustSubscribe(first+uint64(i), s)
		fc.flow(first+uint64(i), 100)
	}
	fc.sync()
	p := newProducer(fc.t, c, apulsar.ProducerOptions{Topic: fq, DisableBatching: true})
	sendAll(fc.t, p, "m")
	for id := range fc.messagesByConsumer(1) {
		return subs[id-first].name
	}
	return ""
}

// A Failover subscription's active consumer is chosen among the consumers of the highest
// priority only (AbstractDispatcherSingleActiveConsumer.pickAndScheduleActiveConsumer sorts by
// priority level, then name): on a non-partitioned topic the priority-0 consumer is active
// whatever its name and the order of subscribing; on partition i of a partitioned topic it is
// the (i mod n)-th, by name, of the n consumers of the highest priority. When the active one
// leaves, the next priority level takes over.
func TestPriorityLevelsFailover(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		assert.Equal(t, "z", fc.activeOf(c, fq, 1,
			rawSub{name: "a", priority: 1}, rawSub{name: "z", priority: 0}, rawSub{name: "b", priority: 2}))
		// The priority-0 consumer leaves: the priority-1 one takes over.
		fc.closeConsumer(2)
		assert.Equal(t, map[uint64][]string{1: {"m"}}, fc.messagesByConsumer(1),
			"priority 1 gets the unacknowledged message again")
		assert.Equal(t, "y", fc.activeOf(c, fq+"-2", 11, rawSub{name: "y", priority: 0}, rawSub{name: "a", priority: 1}))

		pt := topic + "-p"
		tg.CreatePartitionedTopic(t, pt, 2)
		pfq := "persistent://public/default/" + pt
		pp := newProducer(t, c, apulsar.ProducerOptions{Topic: pfq, DisableBatching: true})
		actives := map[int]string{}
		for part := range 2 {
			name := fmt.Sprintf("%s-partition-%d", pfq, part)
			fc.lookup(name)
			for i, s := range []rawSub{{name: "a", priority: 1}, {name: "c", priority: 0}, {name: "b", priority: 0}} {
				s.topic, s.sub, s.typ = name, "s", wire.CommandSubscribe_Failover
				id := uint64(100*(part+1) + i)
				fc.mustSubscribe(id, s)
				fc.flow(id, 100)
			}
		}
		fc.sync()
		sendAll(t, pp, numbered(10)...)
		for id := range fc.messagesByConsumer(10) {
			actives[int(id/100)-1] += []string{"a", "c", "b"}[id%100]
		}
		assert.Equal(t, map[int]string{0: "b", 1: "c"}, actives,
			"partition i: the (i mod 2)-th by name of the two priority-0 consumers")
	})
}

// Pulsar 4.0 picks the active consumer of a Failover subscription on a non-partitioned topic
// on a consistent-hash ring: 100 points per consumer name of the highest priority, searched
// from the Murmur3 hash of the topic name. With WithFailoverSelection(ConsistentHash) the
// embedded broker must pick the same consumer for the same topic and names. This compares
// the two brokers directly, on the same topic names.
func TestFailoverConsistentHashMatchesPulsar(t *testing.T) {
	t.Parallel()
	url, _ := brokertest.RealURLs(t)
	b := pulsartest.NewBroker(t, pulsartest.WithFailoverSelection(pulsartest.ConsistentHash))
	base := uniqueName(t, "fo")
	picks := func(serviceURL string) []string {
		c := newClient(t, serviceURL)
		fc := dialFrames(t, serviceURL)
		var picked []string
		for i := range 8 {
			picked = append(picked, fc.activeOf(c, fmt.Sprintf("persistent://public/default/%s-%d", base, i),
				uint64(10*i+1),
				rawSub{name: "consumer-a"}, rawSub{name: "consumer-b"}, rawSub{name: "consumer-c"},
				rawSub{name: "low", priority: 1}))
		}
		return picked
	}
	embedded, onPulsar := picks(b.URL()), picks(url)
	t.Logf("active consumers: %v", onPulsar)
	assert.Equal(t, onPulsar, embedded)
}

// Shared hands a backlog out in turns of up to 20 entries per consumer (Pulsar's
// dispatcherMaxRoundRobinBatchSize). Embedded only: on a real broker the turns depend on how
// many entries each asynchronous read returns, which no test can fix; PauseDispatch lets the
// whole backlog wait for one dispatch here.
func TestSharedTurnsOfTwentyEntries(t *testing.T) {
	t.Parallel()
	tg := newEmbedded(t)
	b, topic := tg.Broker(), tg.UniqueTopic(t)
	fq := "persistent://public/default/" + topic
	fc := dialFrames(t, tg.ServiceURL())
	fc.lookup(fq)
	fc.mustSubscribe(1, rawSub{topic: fq, sub: "s", name: "a", typ: wire.CommandSubscribe_Shared})
	fc.mustSubscribe(2, rawSub{topic: fq, sub: "s", name: "b", typ: wire.CommandSubscribe_Shared})
	b.PauseDispatch(topic)
	fc.flow(1, 1000)
	fc.flow(2, 1000)
	fc.sync()
	sent := numbered(50)
	sendAll(t, newProducer(t, newClient(t, tg.ServiceURL()), apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), sent...)
	b.ResumeDispatch(topic)
	got := fc.messagesByConsumer(len(sent))
	assert.Equal(t, slices.Concat(sent[:20], sent[40:]), got[1], "the first consumer: 20, then the last 10")
	assert.Equal(t, sent[20:40], got[2], "the second consumer: the next 20")
}

// FLOW permits count messages, not entries: a batch of three spends three permits, so a consumer that granted
// three gets the batch and then nothing until it grants more (Exclusive and Shared alike).
func TestPermitsCountMessages(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.lookup(fq)
		const excl, shared = 1, 2
		fc.mustSubscribe(excl, rawSub{topic: fq, sub: "excl", name: "e", typ: wire.CommandSubscribe_Exclusive})
		fc.mustSubscribe(shared, rawSub{topic: fq, sub: "shared", name: "s", typ: wire.CommandSubscribe_Shared})
		fc.flow(excl, 3)
		fc.flow(shared, 3)
		fc.sync()
		sendBatch(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Minute}), "b0", "b1", "b2")
		got := fc.messagesByConsumer(2)
		require.Len(t, got[excl], 1, "Exclusive: the batch")
		require.Len(t, got[shared], 1, "Shared: the batch")
		// Published after the batch went out: a real broker that reads both entries at once may overshoot, as
		// its dispatchers estimate messages per entry before they read.
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "single")
		assert.Empty(t, fc.messagesByConsumer(0), "no permit left for more")
		fc.flow(excl, 1)
		fc.flow(shared, 1)
		got = fc.messagesByConsumer(2)
		assert.Equal(t, []string{"single"}, got[excl], "Exclusive, after one more permit")
		assert.Equal(t, []string{"single"}, got[shared], "Shared, after one more permit")
	})
}

// Key_Shared ignores priority levels, as Pulsar does: a consumer of priority 1 gets its keys while the one of
// priority 0 has permits to spare.
func TestPriorityLevelsKeySharedIgnored(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.lookup(fq)
		const hi, lo = 1, 2
		fc.mustSubscribe(hi, rawSub{topic: fq, sub: "s", name: "hi", typ: wire.CommandSubscribe_Key_Shared, priority: 0})
		fc.mustSubscribe(lo, rawSub{topic: fq, sub: "s", name: "lo", typ: wire.CommandSubscribe_Key_Shared, priority: 1})
		fc.flow(hi, 1000)
		fc.flow(lo, 1000)
		fc.sync()
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		const n = 40
		for i := range n {
			_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Key: "key-" + strconv.Itoa(i), Payload: []byte(strconv.Itoa(i))})
			require.NoError(t, err)
		}
		got := fc.messagesByConsumer(n)
		assert.NotEmpty(t, got[hi], "priority 0 gets its keys")
		assert.NotEmpty(t, got[lo], "priority 1 gets its keys too")
	})
}
