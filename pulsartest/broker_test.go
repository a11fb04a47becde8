package pulsartest_test

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// rawConn is a hand-driven protocol connection for tests that the real client cannot express.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, b *pulsartest.Broker) *rawConn {
	t.Helper()
	var d net.Dialer
	nc, err := d.DialContext(t.Context(), "tcp", b.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	rc := &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
	rc.send(&wire.BaseCommand{Type: wire.BaseCommand_CONNECT.Enum(), Connect: &wire.CommandConnect{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20),
	}})
	f := rc.read()
	require.Equal(t, wire.BaseCommand_CONNECTED, f.Cmd.GetType())
	return rc
}

func (rc *rawConn) send(cmd *wire.BaseCommand) {
	rc.t.Helper()
	f, err := wire.EncodeCommand(cmd)
	require.NoError(rc.t, err)
	_, err = rc.nc.Write(f)
	require.NoError(rc.t, err)
}

func (rc *rawConn) read() wire.Frame {
	rc.t.Helper()
	require.NoError(rc.t, rc.nc.SetReadDeadline(time.Now().Add(receiveTimeout)))
	f, err := wire.ReadFrame(rc.r, 64<<20)
	require.NoError(rc.t, err)
	return f
}

// A consumer that never reads its socket must not stall anybody else: its broker writer blocks on TCP, while
// the producer and a consumer on another connection go on at full speed.
func TestSlowConsumerDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	topic := uniqueName(t, "t")

	slow := dialRaw(t, b)
	slow.send(&wire.BaseCommand{Type: wire.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &wire.CommandSubscribe{
		Topic: proto.String(topic), Subscription: proto.String("slow"), SubType: wire.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
	}})
	require.Equal(t, wire.BaseCommand_SUCCESS, slow.read().Cmd.GetType())
	slow.send(&wire.BaseCommand{Type: wire.BaseCommand_FLOW.Enum(), Flow: &wire.CommandFlow{
		ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(1 << 20),
	}})
	// From here on the slow connection is never read.

	c := newClient(t, b.URL())
	fast := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "fast", Type: apulsar.Shared})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	body := bytes.Repeat([]byte("x"), 256*1024)
	const n = 120 // 30 MiB: far beyond any socket buffer of the slow connection
	for range n {
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: body})
		require.NoError(t, err)
	}
	for range n {
		m := receive(t, fast)
		require.Len(t, m.Payload(), len(body))
		require.NoError(t, fast.Ack(m))
	}
	st := b.Stats(topic)
	assert.Equal(t, n, st.Subscriptions["slow"].Pending, "everything was dispatched to the slow consumer")
	assert.Equal(t, n, st.Subscriptions["slow"].Backlog)
}

func TestPauseDispatchAndBacklog(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	require.NoError(t, b.CreatePartitionedTopic(topic, 2))
	k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	b.PauseDispatch(topic)
	sendAll(t, p, numbered(6)...)
	expectNone(t, k, 200*time.Millisecond)
	assert.Equal(t, 6, b.Backlog(topic, "s"))
	assert.Equal(t, 6, b.Stats(topic).Messages)
	b.ResumeDispatch(topic)
	ms := receiveN(t, k, 6)
	assert.Equal(t, numbered(6), sorted(payloads(ms)))
	for _, m := range ms {
		require.NoError(t, k.Ack(m))
	}
	testwait.Eventually(t, eventuallyWithin, func() bool { return b.Backlog(topic, "s") == 0 }, "backlog 0")
	assert.Equal(t, []string{"s"}, b.Subscriptions(topic))
}

func TestUnloadTopicReconnectsClients(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", AckWithResponse: true})
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
	sendAll(t, p, "before")
	require.NoError(t, k.Ack(receive(t, k)))
	b.UnloadTopic(topic)
	sendAll(t, p, "after")
	assert.Equal(t, "after", string(receive(t, k).Payload()))
}

func TestFailNextLookups(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	b.FailNextLookups(1, pulsartest.TopicNotFound)
	_, err := c.CreateProducer(apulsar.ProducerOptions{Topic: uniqueName(t, "t")})
	require.Error(t, err)
	assert.Equal(t, 1, b.Faults().LookupErrors)
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: uniqueName(t, "t")})
	sendAll(t, p, "ok")
}

// FailNextAttaches refuses the next n SUBSCRIBEs and PRODUCERs of a topic, each with the code given and the text
// of a topic being unloaded; n <= 0 clears what is left.
func TestFailNextAttaches(t *testing.T) {
	t.Parallel()
	tg := newEmbedded(t)
	b, topic := tg.Broker(), tg.UniqueTopic(t)
	fq := "persistent://public/default/" + topic
	fc := dialFrames(t, tg.ServiceURL())
	produce := func(id uint64) (string, string) {
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
			Topic: proto.String(fq), ProducerId: proto.Uint64(id), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		return rawError(fc.await(wire.BaseCommand_PRODUCER_SUCCESS, wire.BaseCommand_ERROR))
	}
	b.FailNextAttaches(topic, 2, pulsartest.ServiceNotReady)
	code, text := produce(1)
	assert.Equal(t, "ServiceNotReady", code)
	assert.Equal(t, "Topic is temporarily unavailable", text)
	code, text = rawError(fc.subscribe(1, rawSub{topic: fq, sub: "s", typ: wire.CommandSubscribe_Shared}))
	assert.Equal(t, "ServiceNotReady", code)
	assert.Equal(t, "Topic is temporarily unavailable", text)
	code, _ = produce(2)
	assert.Equal(t, "PRODUCER_SUCCESS", code, "two attaches failed, the third passes")

	b.FailNextAttaches(topic, 5, pulsartest.ServiceNotReady)
	b.FailNextAttaches(topic, 0, pulsartest.ServiceNotReady)
	fc.mustSubscribe(2, rawSub{topic: fq, sub: "s", typ: wire.CommandSubscribe_Shared})
}

// StrandConsumers forgets a subscription's consumers without a CLOSE_CONSUMER: the broker answers a command
// naming one "Consumer not found", and its unacknowledged messages go to the next consumer.
func TestStrandConsumers(t *testing.T) {
	t.Parallel()
	tg := newEmbedded(t)
	b, topic := tg.Broker(), tg.UniqueTopic(t)
	fq := "persistent://public/default/" + topic
	fc := dialFrames(t, tg.ServiceURL())
	fc.mustSubscribe(1, rawSub{topic: fq, sub: "s", name: "stranded", typ: wire.CommandSubscribe_Shared})
	fc.flow(1, 10)
	fc.sync()
	sendAll(t, newProducer(t, newClient(t, tg.ServiceURL()), apulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "unacked")
	assert.Equal(t, map[uint64][]string{1: {"unacked"}}, fc.messagesByConsumer(1))

	require.Equal(t, 1, b.StrandConsumers(topic, "s"))
	assert.Zero(t, b.StrandConsumers(topic, "s"), "none left to forget")
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_GET_LAST_MESSAGE_ID.Enum(), GetLastMessageId: &wire.CommandGetLastMessageId{
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(fc.nextRequestID()),
	}})
	code, text := rawError(fc.await(wire.BaseCommand_ERROR, wire.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE, wire.BaseCommand_CLOSE_CONSUMER))
	assert.Equal(t, "MetadataError", code, "no CLOSE_CONSUMER, and the consumer is gone")
	assert.Equal(t, "Consumer not found", text)
	fc.mustSubscribe(2, rawSub{topic: fq, sub: "s", name: "next", typ: wire.CommandSubscribe_Shared})
	fc.flow(2, 10)
	assert.Equal(t, map[uint64][]string{2: {"unacked"}}, fc.messagesByConsumer(1))
}

func TestUnsupportedFeaturesAnswerAnError(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	rc := dialRaw(t, b)
	rc.send(&wire.BaseCommand{Type: wire.BaseCommand_NEW_TXN.Enum(), NewTxn: &wire.CommandNewTxn{RequestId: proto.Uint64(7)}})
	f := rc.read()
	require.Equal(t, wire.BaseCommand_ERROR, f.Cmd.GetType())
	assert.Equal(t, uint64(7), f.Cmd.GetError().GetRequestId())
	assert.Equal(t, wire.ServerError_NotAllowedError, f.Cmd.GetError().GetError())
	assert.Contains(t, f.Cmd.GetError().GetMessage(), "transactions are not supported")

	rc.send(&wire.BaseCommand{Type: wire.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &wire.CommandSubscribe{
		Topic: proto.String("t"), Subscription: proto.String("s"), SubType: wire.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(8), ReplicateSubscriptionState: proto.Bool(true),
	}})
	f = rc.read()
	require.Equal(t, wire.BaseCommand_ERROR, f.Cmd.GetType())
	assert.Contains(t, f.Cmd.GetError().GetMessage(), "geo-replication")

	// The connection is still usable.
	rc.send(&wire.BaseCommand{Type: wire.BaseCommand_PING.Enum(), Ping: &wire.CommandPing{}})
	assert.Equal(t, wire.BaseCommand_PONG, rc.read().Cmd.GetType())
}

func TestChecksumMismatchIsASendError(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	rc := dialRaw(t, b)
	rc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
		Topic: proto.String("t"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
	}})
	f := rc.read()
	require.Equal(t, wire.BaseCommand_PRODUCER_SUCCESS, f.Cmd.GetType())
	assert.Equal(t, "standalone-0-1", f.Cmd.GetProducerSuccess().GetProducerName())
	_, err := rc.nc.Write(corruptSend(t, 1))
	require.NoError(t, err)
	f = rc.read()
	require.Equal(t, wire.BaseCommand_SEND_ERROR, f.Cmd.GetType())
	assert.Equal(t, wire.ServerError_ChecksumError, f.Cmd.GetSendError().GetError())
	assert.Equal(t, 0, b.Stats("t").Entries)
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	require.NoError(t, b.CreateTopic("plain"))
	require.ErrorIs(t, b.CreateTopic("public/default/plain"), pulsartest.ErrTopicExists)
	require.NoError(t, b.CreatePartitionedTopic("persistent://acme/ns/orders", 2))
	require.ErrorIs(t, b.CreatePartitionedTopic("x", 0), pulsartest.ErrInvalidTopic)
	require.ErrorIs(t, b.CreateTopic("kafka://public/default/x"), pulsartest.ErrInvalidTopic)
	assert.Equal(t, []string{
		"persistent://acme/ns/orders-partition-0",
		"persistent://acme/ns/orders-partition-1",
		"persistent://public/default/plain",
	}, b.Topics())
	require.NoError(t, b.DeleteTopic("acme/ns/orders"))
	require.ErrorIs(t, b.DeleteTopic("acme/ns/orders"), pulsartest.ErrTopicNotFound)
	assert.Equal(t, []string{"persistent://public/default/plain"}, b.Topics())
	assert.Equal(t, 0, b.Backlog("plain", "nope"))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")
	assert.True(t, strings.HasPrefix(b.URL(), "pulsar://127.0.0.1:"))
}

func TestTopicBusyWhileClientsAreConnected(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
	sendAll(t, p, "x")
	require.ErrorIs(t, b.DeleteTopic(topic), pulsartest.ErrTopicBusy)
	p.Close()
	testwait.Eventually(t, eventuallyWithin, func() bool { return b.Stats(topic).Producers == 0 }, "producer gone")
	require.NoError(t, b.DeleteTopic(topic))
}

func TestStartFailsOnBadAddress(t *testing.T) {
	t.Parallel()
	_, err := pulsartest.Start(t.Context(), pulsartest.WithAddr("256.0.0.1:0"))
	require.Error(t, err)
	var opErr *net.OpError
	assert.True(t, errors.As(err, &opErr) || strings.Contains(err.Error(), "pulsartest"), err)
}

func TestManualClock(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	clk := pulsartest.NewManualClock(start)
	var fired []int
	clk.AfterFunc(2*time.Second, func() { fired = append(fired, 2) })
	stop := clk.AfterFunc(time.Second, func() { fired = append(fired, 1) })
	clk.AfterFunc(3*time.Second, func() { fired = append(fired, 3) })
	assert.True(t, stop())
	assert.False(t, stop())
	clk.Advance(2 * time.Second)
	assert.Equal(t, []int{2}, fired)
	clk.Set(start.Add(5 * time.Second))
	assert.Equal(t, []int{2, 3}, fired)
	assert.Equal(t, start.Add(5*time.Second), clk.Now())
}

func TestAuthToken(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAuthToken("secret"))
	connect := func(tok string) error {
		c, err := apulsar.NewClient(apulsar.ClientOptions{
			URL: b.URL(), Authentication: apulsar.NewAuthenticationToken(tok),
			OperationTimeout: time.Second, ConnectionTimeout: time.Second, Logger: plog.DefaultNopLogger(),
		})
		require.NoError(t, err)
		defer c.Close()
		_, err = c.TopicPartitions("t")
		return err
	}
	require.NoError(t, connect("secret"))
	require.Error(t, connect("wrong"))
}

func TestCommandHookDropsAReceipt(t *testing.T) {
	t.Parallel()
	var dropped atomic.Int32
	b := pulsartest.NewBroker(t, pulsartest.WithCommandHook(func(ci pulsartest.CommandInfo) pulsartest.Verdict {
		if !ci.Inbound && ci.Type == "SEND_RECEIPT" && dropped.CompareAndSwap(0, 1) {
			return pulsartest.Drop
		}
		return pulsartest.Pass
	}))
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, SendTimeout: 300 * time.Millisecond, DisableBatching: true})
	_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("receipt lost")})
	require.Error(t, err, "the lost receipt surfaces as a send timeout")
	assert.Equal(t, 1, b.Stats(topic).Entries, "the broker stored it anyway")
}

// TestLookupsAnswerTheirChecks pins what a lookup and a partitioned-metadata request answer
// when they are refused, on the wire: an injected lookup fault, an invalid name, a role that
// is not granted the topic's namespace. A client reaches the producer's and the consumer's
// own checks only after a lookup, so this is the one place these answers are seen.
func TestLookupsAnswerTheirChecks(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t, pulsartest.WithAuth(pulsartest.Auth{
		Anonymous: "anon",
		Grants:    map[string][]string{"acme/private": {"alice"}},
	}))
	rc := dialRaw(t, b)
	var req uint64
	type answer struct {
		err wire.ServerError
		msg string
		ok  bool
	}
	// ask sends both requests for topic and returns their answers, the lookup's first.
	ask := func(topic string) []answer {
		t.Helper()
		req++
		rc.send(&wire.BaseCommand{Type: wire.BaseCommand_LOOKUP.Enum(), LookupTopic: &wire.CommandLookupTopic{
			Topic: proto.String(topic), RequestId: proto.Uint64(req),
		}})
		f := rc.read()
		require.Equal(t, wire.BaseCommand_LOOKUP_RESPONSE, f.Cmd.GetType())
		lr := f.Cmd.GetLookupTopicResponse()
		req++
		rc.send(&wire.BaseCommand{Type: wire.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &wire.CommandPartitionedTopicMetadata{
			Topic: proto.String(topic), RequestId: proto.Uint64(req),
		}})
		f = rc.read()
		require.Equal(t, wire.BaseCommand_PARTITIONED_METADATA_RESPONSE, f.Cmd.GetType())
		pr := f.Cmd.GetPartitionMetadataResponse()
		return []answer{
			{lr.GetError(), lr.GetMessage(), lr.GetResponse() == wire.CommandLookupTopicResponse_Connect},
			{pr.GetError(), pr.GetMessage(), pr.GetResponse() == wire.CommandPartitionedTopicMetadataResponse_Success},
		}
	}

	for i, a := range ask("persistent://public/default/t") {
		assert.True(t, a.ok, "answer %d to a granted topic: %+v", i, a)
	}
	for i, a := range ask("persistent://acme/private/t") {
		assert.False(t, a.ok, "answer %d to a topic not granted", i)
		assert.Equal(t, wire.ServerError_AuthorizationError, a.err, "answer %d", i)
		assert.Equal(t, `pulsartest: role "anon" may not use persistent://acme/private/t`, a.msg, "answer %d", i)
	}
	for i, a := range ask("bogus://public/default/t") {
		assert.False(t, a.ok, "answer %d to an invalid name", i)
		assert.Equal(t, wire.ServerError_InvalidTopicName, a.err, "answer %d", i)
		assert.Equal(t, "Invalid topic name: Invalid topic domain: 'bogus'", a.msg, "answer %d", i)
	}
	b.FailNextLookups(2, pulsartest.ServiceNotReady)
	for i, a := range ask("persistent://public/default/t") {
		assert.False(t, a.ok, "answer %d under an injected fault", i)
		assert.Equal(t, wire.ServerError_ServiceNotReady, a.err, "answer %d", i)
		assert.Equal(t, "pulsartest: injected lookup failure", a.msg, "answer %d", i)
	}
	assert.Equal(t, 2, b.Faults().LookupErrors)
	for i, a := range ask("persistent://public/default/t") {
		assert.True(t, a.ok, "answer %d once the faults are spent: %+v", i, a)
	}
}
