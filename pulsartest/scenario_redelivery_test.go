package pulsartest_test

import (
	"fmt"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// When a Shared or Key_Shared consumer leaves with unacknowledged messages, by closing or by
// losing its connection (a crashed client), the consumers that remain get them with the
// redelivery count they had: Apache Pulsar 4.0 does not count a departure as a redelivery (2.x
// brokers did: PULSAR_REDELIVERY_ON_DISCONNECT=true, pulsartest.WithRedeliveryOnDisconnect).
// A count that a negative ack raised is kept for the next consumer; once the last consumer
// has left, the counts start again at 0.
func TestRedeliveryCountAfterConsumerLeaves(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		onLeave := uint32(0)
		if tg.Capabilities().redeliveryOnDisconnect {
			onLeave = 1
		}
		for _, tc := range []struct {
			typ   apulsar.SubscriptionType
			crash bool
			nack  bool
		}{
			{apulsar.Shared, false, false},
			{apulsar.Shared, true, false},
			{apulsar.Shared, false, true},
			{apulsar.Shared, true, true},
			{apulsar.KeyShared, false, false},
			{apulsar.KeyShared, true, true},
		} {
			name := fmt.Sprintf("type=%d crash=%t nack=%t", tc.typ, tc.crash, tc.nack)
			fq := fmt.Sprintf("persistent://public/default/%s-%d-%t-%t", topic, tc.typ, tc.crash, tc.nack)
			wtyp := wire.CommandSubscribe_Shared
			if tc.typ == apulsar.KeyShared {
				wtyp = wire.CommandSubscribe_Key_Shared
			}
			// The leaving consumer is a raw one, whose connection the test can drop.
			fc := dialFrames(t, tg.ServiceURL())
			fc.lookup(fq)
			fc.mustSubscribe(1, rawSub{topic: fq, sub: "s", name: "leaving", typ: wtyp})
			fc.flow(1, 100)
			fc.sync()
			p := newProducer(t, c, apulsar.ProducerOptions{Topic: fq, DisableBatching: true})
			sendAll(t, p, "m0", "m1")
			var ids []*wire.MessageIdData
			for range 2 {
				ids = append(ids, fc.await(wire.BaseCommand_MESSAGE).Cmd.GetMessage().GetMessageId())
			}
			want := onLeave
			if tc.nack {
				fc.send(&wire.BaseCommand{
					Type: wire.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
					RedeliverUnacknowledgedMessages: &wire.CommandRedeliverUnacknowledgedMessages{
						ConsumerId: proto.Uint64(1), MessageIds: ids,
					},
				})
				for range 2 {
					m := fc.await(wire.BaseCommand_MESSAGE).Cmd.GetMessage()
					assert.Equal(t, uint32(1), m.GetRedeliveryCount(), "%s: a negative ack counts", name)
				}
				want++
			}
			opts := apulsar.ConsumerOptions{Topic: fq, SubscriptionName: "s", Type: tc.typ, NackRedeliveryDelay: 50 * time.Millisecond}
			stays := subscribe(t, c, opts)
			if tc.crash {
				fc.drop()
			} else {
				fc.closeConsumer(1)
			}
			ms := receiveN(t, stays, 2)
			assert.Equal(t, []string{"m0", "m1"}, sorted(payloads(ms)), name)
			for _, m := range ms {
				assert.Equal(t, want, m.RedeliveryCount(), "%s: %s after the consumer left", name, m.Payload())
			}

			// The last consumer leaves: a new one starts the counts again.
			stays.Nack(ms[0])
			again := receive(t, stays)
			assert.Equal(t, want+1, again.RedeliveryCount(), "%s: a negative ack of the consumer that stayed", name)
			stays.Close()
			next := subscribe(t, c, opts)
			for _, m := range receiveN(t, next, 2) {
				assert.Equal(t, uint32(0), m.RedeliveryCount(), "%s: %s after the last consumer left", name, m.Payload())
			}
		}
	})
}

// Without batch-index acknowledgement (pulsar-client-go's default) a batch is acknowledged whole or not at all: a
// partially acknowledged batch comes back whole to the next consumer, on both brokers.
func TestBatchWithoutBatchIndexAckRedeliversTheWholeBatch(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared, AckWithResponse: true}
		k := subscribe(t, c, opts)
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Hour})
		sendBatch(t, p, "a", "b", "c")
		ms := receiveN(t, k, 3)
		require.NoError(t, k.Ack(ms[0]))
		k.Close()
		if b := tg.Broker(); b != nil {
			assert.Equal(t, 3, b.Backlog(topic, "s"), "partially acked batch stays whole")
		}
		k = subscribe(t, c, opts)
		assert.Equal(t, []string{"a", "b", "c"}, payloads(receiveN(t, k, 3)))
	})
}

// REDELIVER_UNACKNOWLEDGED_MESSAGES without message ids, what a client's ack timeout sends, gives back everything
// the consumer has not acknowledged: with the redelivery count raised on Shared and Key_Shared, by a rewind (count
// 0) on Exclusive and Failover.
func TestRedeliverWithoutIdsGivesBackEverythingUnacked(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		for _, tc := range []struct {
			typ   wire.CommandSubscribe_SubType
			count uint32
		}{
			{wire.CommandSubscribe_Shared, 1},
			{wire.CommandSubscribe_Key_Shared, 1},
			{wire.CommandSubscribe_Exclusive, 0},
			{wire.CommandSubscribe_Failover, 0},
		} {
			fq := fmt.Sprintf("persistent://public/default/%s-%d", topic, tc.typ)
			fc := dialFrames(t, tg.ServiceURL())
			fc.lookup(fq)
			fc.mustSubscribe(1, rawSub{topic: fq, sub: "s", name: "k", typ: tc.typ})
			fc.flow(1, 100)
			fc.sync()
			sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: fq, DisableBatching: true}), "m0", "m1")
			assert.Equal(t, map[uint64][]string{1: {"m0", "m1"}}, fc.messagesByConsumer(2), "%v", tc.typ)
			fc.send(&wire.BaseCommand{
				Type:                            wire.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
				RedeliverUnacknowledgedMessages: &wire.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(1)},
			})
			var again []string
			for range 2 {
				f := fc.await(wire.BaseCommand_MESSAGE)
				assert.Equal(t, tc.count, f.Cmd.GetMessage().GetRedeliveryCount(), "%v", tc.typ)
				again = append(again, rawMessageBody(t, f))
			}
			assert.Equal(t, []string{"m0", "m1"}, sorted(again), "%v", tc.typ)
		}
	})
}
