package pulsartest_test

import (
	"net/http"
	"strings"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// The errors of refused operations, as the client shows them (err.Error() is "server error: <code>: <text>")
// and as they travel (ERROR's code and message), are the same on both brokers: Apache Pulsar 4.0.7's codes and
// texts. A refused PRODUCER names the broker's exception class first, a refused SUBSCRIBE does not.

const brokerExceptionPrefix = "org.apache.pulsar.broker.service.BrokerServiceException$"

// requireServerError checks that err is the client's rendering of a broker error with code and text.
func requireServerError(t *testing.T, err error, code, text string) {
	t.Helper()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "server error: "+code+": "+text)
}

// Refused consumers through pulsar-client-go: a second Exclusive consumer, a consumer of another type, an
// unsubscribe while another consumer is connected, a compacted read on Shared or Key_Shared.
func TestErrorsOfRefusedConsumers(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ex", Type: apulsar.Exclusive})
		_, err := c.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ex", Type: apulsar.Exclusive})
		requireServerError(t, err, "ConsumerBusy", "Exclusive consumer is already connected")

		opts := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sh", Type: apulsar.Shared}
		k := subscribe(t, c, opts)
		subscribe(t, c, opts)
		_, err = c.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sh", Type: apulsar.Failover})
		requireServerError(t, err, "ConsumerBusy", "Subscription is of different type. Active subscription type of "+
			"'Shared' is different than the connecting consumer's type 'Failover'.")
		_, err = c.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ex", Type: apulsar.KeyShared})
		requireServerError(t, err, "ConsumerBusy", "Subscription is of different type. Active subscription type of "+
			"'Exclusive' is different than the connecting consumer's type 'Key_Shared'.")
		requireServerError(t, k.Unsubscribe(), "MetadataError", "Unconnected or shared consumer attempting to unsubscribe")

		for _, typ := range []apulsar.SubscriptionType{apulsar.Shared, apulsar.KeyShared} {
			_, err = c.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "compacted", Type: typ, ReadCompacted: true})
			requireServerError(t, err, "NotAllowedError", "readCompacted only allowed on failover or exclusive subscriptions")
		}
		subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "compacted", Type: apulsar.Failover, ReadCompacted: true})

		ks := apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ks", Type: apulsar.KeyShared}
		subscribe(t, c, ks)
		ks.KeySharedPolicy = &apulsar.KeySharedPolicy{Mode: apulsar.KeySharedPolicyModeSticky, HashRanges: []int{0, 100}}
		_, err = c.Subscribe(ks)
		requireServerError(t, err, "ConsumerBusy", "Subscription is of different type. Active subscription key_shared "+
			"mode of 'AUTO_SPLIT' is different than the connecting consumer's key_shared mode 'STICKY'.")
	})
}

// Refused producers through pulsar-client-go: a name already connected, a second exclusive producer, a shared
// one next to an exclusive one, a producer on a terminated topic.
func TestErrorsOfRefusedProducers(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "terminating a topic")
		fq := "persistent://public/default/" + topic
		newProducer(t, c, apulsar.ProducerOptions{Topic: topic, Name: "the-producer"})
		_, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic, Name: "the-producer"})
		requireServerError(t, err, "ProducerBusy", brokerExceptionPrefix+"NamingException: "+
			"Producer with name 'the-producer' is already connected to topic '"+fq+"'")

		ex := topic + "-exclusive"
		newProducer(t, c, apulsar.ProducerOptions{Topic: ex, Name: "owner", ProducerAccessMode: apulsar.ProducerAccessModeExclusive})
		_, err = c.CreateProducer(apulsar.ProducerOptions{Topic: ex, ProducerAccessMode: apulsar.ProducerAccessModeExclusive})
		requireServerError(t, err, "ProducerFenced", brokerExceptionPrefix+"ProducerFencedException: "+
			"Topic has an existing exclusive producer: owner")
		_, err = c.CreateProducer(apulsar.ProducerOptions{Topic: ex})
		requireServerError(t, err, "ProducerBusy", brokerExceptionPrefix+"ProducerBusyException: "+
			"Topic has an existing exclusive producer: owner")
		_, err = c.CreateProducer(apulsar.ProducerOptions{Topic: topic, ProducerAccessMode: apulsar.ProducerAccessModeExclusive})
		requireServerError(t, err, "ProducerFenced", brokerExceptionPrefix+"ProducerFencedException: "+
			"Topic has existing shared producers")

		term := topic + "-terminated"
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: term}), "x")
		code, body := brokertest.AdminDo(t, http.MethodPost, brokertest.TopicURL(admin, term)+"/terminate", "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		_, err = c.CreateProducer(apulsar.ProducerOptions{Topic: term})
		requireServerError(t, err, "TopicTerminatedError", brokerExceptionPrefix+"TopicTerminatedException: "+
			"Topic was already terminated")
	})
}

// rawError is the code and message of an ERROR frame, or the frame's type when it is not one.
func rawError(f wire.Frame) (string, string) {
	if f.Cmd.GetType() != wire.BaseCommand_ERROR {
		return f.Cmd.GetType().String(), ""
	}
	return f.Cmd.GetError().GetError().String(), f.Cmd.GetError().GetMessage()
}

// Refusals that pulsar-client-go cannot provoke, over a raw connection: STICKY Key_Shared hash ranges,
// out-of-order delivery that differs from the subscription's, invalid topic names, commands for a consumer
// the connection does not have, a payload with a wrong checksum, GET_LAST_MESSAGE_ID on a non-persistent topic.
func TestErrorsOfRawCommands(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.lookup(fq)
		id := uint64(0)
		keyShared := func(sub string, mode wire.KeySharedMode, outOfOrder bool, ranges ...int32) (string, string) {
			var hr []*wire.IntRange
			for i := 0; i+1 < len(ranges); i += 2 {
				hr = append(hr, &wire.IntRange{Start: proto.Int32(ranges[i]), End: proto.Int32(ranges[i+1])})
			}
			id++
			fc.send(&wire.BaseCommand{Type: wire.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &wire.CommandSubscribe{
				Topic: proto.String(fq), Subscription: proto.String(sub), SubType: wire.CommandSubscribe_Key_Shared.Enum(),
				ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(fc.nextRequestID()), ConsumerName: proto.String("k"),
				Durable: proto.Bool(true), KeySharedMeta: &wire.KeySharedMeta{
					KeySharedMode: mode.Enum(), HashRanges: hr, AllowOutOfOrderDelivery: proto.Bool(outOfOrder),
				},
			}})
			return rawError(fc.await(wire.BaseCommand_SUCCESS, wire.BaseCommand_ERROR))
		}
		sticky := wire.KeySharedMode_STICKY
		for _, tc := range []struct {
			ranges     []int32
			code, text string
		}{
			{nil, "ConsumerAssignError", "Ranges for KeyShared policy must not be empty."},
			{[]int32{200, 100}, "ConsumerAssignError", "Fixed hash range start > end for range: [200,100]"},
			{[]int32{50, 60, 55, 70}, "ConsumerAssignError", "Consumer's own ranges conflict: [50,60] overlaps with [55,70]"},
			{[]int32{-5, 10}, "SUCCESS", ""}, // a range may reach outside 0..65535
			{[]int32{60000, 70000}, "SUCCESS", ""},
			{[]int32{10, 20}, "ConsumerAssignError", "Range conflict with consumer Consumer{subscription=" +
				"PersistentSubscription{topic=" + fq + ", name=sticky}, consumerId=4, consumerName=k, address="},
		} {
			code, text := keyShared("sticky", sticky, false, tc.ranges...)
			assert.Equal(t, tc.code, code, "ranges %v: %s", tc.ranges, text)
			assert.True(t, strings.HasPrefix(text, tc.text), "ranges %v: %q, want %q", tc.ranges, text, tc.text)
		}
		auto := wire.KeySharedMode_AUTO_SPLIT
		_, _ = keyShared("ordered", auto, false)
		_, text := keyShared("ordered", auto, true)
		assert.Equal(t, "Subscription is of different type. Active subscription does not allow out of order delivery "+
			"while the connecting consumer allows it.", text)
		_, _ = keyShared("unordered", auto, true)
		_, text = keyShared("unordered", auto, false)
		assert.Equal(t, "Subscription is of different type. Active subscription allows out of order delivery while "+
			"the connecting consumer does not allow it.", text)

		for name, want := range map[string]string{
			"bogus://public/default/x":     "Invalid topic name: Invalid topic domain: 'bogus'",
			"persistent://public/default/": "Invalid topic name: Invalid topic name: persistent://public/default/. Topic local name must not be blank.",
			"persistent://public/x":        "Invalid topic name: Invalid topic name: persistent://public/x",
			// A tenant and a namespace are named entities: letters, digits and _-=:. only.
			"persistent://pub$lic/default/x": "Invalid topic name: Invalid named entity: pub$lic",
			"persistent://public/def ault/x": "Invalid topic name: Invalid named entity: def ault",
			"persistent:///default/x":        "Invalid topic name: Invalid namespace format. namespace: /default",
			"persistent://public//x":         "Invalid topic name: Invalid namespace format. namespace: public/",
		} {
			fc.send(&wire.BaseCommand{Type: wire.BaseCommand_LOOKUP.Enum(), LookupTopic: &wire.CommandLookupTopic{
				Topic: proto.String(name), RequestId: proto.Uint64(fc.nextRequestID()),
			}})
			lr := fc.await(wire.BaseCommand_LOOKUP_RESPONSE).Cmd.GetLookupTopicResponse()
			assert.Equal(t, wire.ServerError_InvalidTopicName, lr.GetError(), "lookup %s", name)
			assert.Equal(t, want, lr.GetMessage(), "lookup %s", name)
			id++
			code, text := rawError(fc.subscribe(id, rawSub{topic: name, sub: "s", typ: wire.CommandSubscribe_Shared}))
			assert.Equal(t, "InvalidTopicName", code, "subscribe %s", name)
			assert.Equal(t, want, text, "subscribe %s", name)
		}

		const unknown = 999
		for _, cmd := range []*wire.BaseCommand{
			{Type: wire.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &wire.CommandGetLastMessageId{
				ConsumerId: proto.Uint64(unknown), RequestId: proto.Uint64(fc.nextRequestID()),
			}},
			{Type: wire.BaseCommand_SEEK.Enum(), Seek: &wire.CommandSeek{
				ConsumerId: proto.Uint64(unknown), RequestId: proto.Uint64(fc.nextRequestID()), MessagePublishTime: proto.Uint64(1),
			}},
			{Type: wire.BaseCommand_UNSUBSCRIBE.Enum(), Unsubscribe: &wire.CommandUnsubscribe{
				ConsumerId: proto.Uint64(unknown), RequestId: proto.Uint64(fc.nextRequestID()),
			}},
		} {
			fc.send(cmd)
			code, text := rawError(fc.await(wire.BaseCommand_SUCCESS, wire.BaseCommand_ERROR, wire.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE))
			assert.Equal(t, "MetadataError", code, "%v", cmd.GetType())
			assert.Equal(t, "Consumer not found", text, "%v", cmd.GetType())
		}

		// An ACK for an unknown consumer goes unanswered, even with a request id.
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_ACK.Enum(), Ack: &wire.CommandAck{
			ConsumerId: proto.Uint64(unknown), AckType: wire.CommandAck_Individual.Enum(), RequestId: proto.Uint64(fc.nextRequestID()),
			MessageId: []*wire.MessageIdData{{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(1)}},
		}})
		if f, ok := fc.next(rawQuiet); ok {
			t.Errorf("an ACK for an unknown consumer was answered: %v", f.Cmd)
		}

		// A payload whose checksum does not match is refused.
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
			Topic: proto.String(fq), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		fc.await(wire.BaseCommand_PRODUCER_SUCCESS)
		fc.sendFrame(corruptSend(t, 1))
		se := fc.await(wire.BaseCommand_SEND_ERROR, wire.BaseCommand_SEND_RECEIPT).Cmd.GetSendError()
		assert.Equal(t, wire.ServerError_ChecksumError, se.GetError())
		assert.Equal(t, "Checksum failed on the broker", se.GetMessage())

		np := "non-persistent://public/default/" + topic
		fc.lookup(np)
		id++
		fc.mustSubscribe(id, rawSub{topic: np, sub: "s", typ: wire.CommandSubscribe_Shared})
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &wire.CommandGetLastMessageId{
			ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		code, text := rawError(fc.await(wire.BaseCommand_ERROR, wire.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE))
		assert.Equal(t, "UnknownError", code, "GET_LAST_MESSAGE_ID on a non-persistent topic")
		assert.Equal(t, "Failed to recover Transaction Buffer.", text)
	})
}

// A partition beyond a partitioned topic's count does not exist: Pulsar answers its partitioned metadata, a
// PRODUCER and a SUBSCRIBE with TopicNotFound (the lookup succeeds), and creates nothing. The Go client fails
// CreateProducer and Subscribe on such a name.
func TestErrorsOfAPartitionBeyondTheCount(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		tg.CreatePartitionedTopic(t, topic, 2)
		beyond := "persistent://public/default/" + topic + "-partition-2"
		fc := dialFrames(t, tg.ServiceURL())
		fc.lookup(beyond)
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &wire.CommandPartitionedTopicMetadata{
			Topic: proto.String(beyond), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		pm := fc.await(wire.BaseCommand_PARTITIONED_METADATA_RESPONSE).Cmd.GetPartitionMetadataResponse()
		assert.Equal(t, wire.CommandPartitionedTopicMetadataResponse_Failed, pm.GetResponse())
		assert.Equal(t, wire.ServerError_TopicNotFound, pm.GetError())
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
			Topic: proto.String(beyond), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		code, text := rawError(fc.await(wire.BaseCommand_PRODUCER_SUCCESS, wire.BaseCommand_ERROR))
		assert.Equal(t, "TopicNotFound", code, "PRODUCER")
		assert.Equal(t, "Topic not found "+beyond, text, "PRODUCER")
		code, text = rawError(fc.subscribe(1, rawSub{topic: beyond, sub: "s", typ: wire.CommandSubscribe_Shared}))
		assert.Equal(t, "TopicNotFound", code, "SUBSCRIBE")
		assert.Equal(t, "Topic "+beyond+" does not exist", text, "SUBSCRIBE")

		_, err := c.CreateProducer(apulsar.ProducerOptions{Topic: beyond})
		require.Error(t, err, "CreateProducer")
		_, err = c.Subscribe(apulsar.ConsumerOptions{Topic: beyond, SubscriptionName: "s"})
		require.Error(t, err, "Subscribe")
		sendAll(t, newProducer(t, c, apulsar.ProducerOptions{Topic: topic + "-partition-1"}), "within the count")
	})
}

// A SEND for a producer that the broker closed itself (here by terminating its topic) is dropped
// without an answer and the connection stays open; only a SEND for a producer that never existed
// closes the connection. Fixed for the flake of the client's own TestTopicTermination on the
// embedded broker: a SEND that the client wrote before it read the CLOSE_PRODUCER closed the
// whole connection, or, a moment earlier, was answered TopicTerminatedError, on which
// pulsar-client-go forgets the producer, ignores the CLOSE_PRODUCER and lets its sends time out.
func TestSendToAProducerTheBrokerClosed(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target, _ apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "terminating a topic")
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.lookup(fq)
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
			Topic: proto.String(fq), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		fc.await(wire.BaseCommand_PRODUCER_SUCCESS)

		code, body := brokertest.AdminDo(t, http.MethodPost, brokertest.TopicURL(admin, topic)+"/terminate", "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		closed := fc.await(wire.BaseCommand_CLOSE_PRODUCER).Cmd.GetCloseProducer()
		assert.Equal(t, uint64(1), closed.GetProducerId())

		fc.sendFrame(rawSend(t, 1, []byte("late")))
		fc.sync() // answered: the connection is open
		for {
			f, ok := fc.next(rawQuiet)
			if !ok {
				break
			}
			switch f.Cmd.GetType() {
			case wire.BaseCommand_SEND_RECEIPT, wire.BaseCommand_SEND_ERROR:
				t.Errorf("a SEND for the closed producer was answered: %v", f.Cmd)
			default:
			}
		}

		fc.sendFrame(rawSend(t, 77, []byte("nobody")))
		fc.awaitClose()
	})
}

// rawSend is a SEND frame of one message with body for producer id.
func rawSend(t *testing.T, id uint64, body []byte) []byte {
	t.Helper()
	payload, err := wire.BuildPayload(&wire.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1),
	}, body)
	require.NoError(t, err)
	frame, err := wire.EncodePayloadCommand(&wire.BaseCommand{Type: wire.BaseCommand_SEND.Enum(), Send: &wire.CommandSend{
		ProducerId: proto.Uint64(id), SequenceId: proto.Uint64(0),
	}}, nil, payload)
	require.NoError(t, err)
	return frame
}

// corruptSend is a SEND frame for producer id whose payload's last byte is flipped, so that
// its checksum does not match.
func corruptSend(t *testing.T, id uint64) []byte {
	t.Helper()
	frame := rawSend(t, id, []byte("body"))
	frame[len(frame)-1] ^= 0xff
	return frame
}
