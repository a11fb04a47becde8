package pulsartest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// eachTxnTarget is eachTarget with the transaction coordinator on (WithTransactions on the
// embedded broker; a real broker must run with transactionCoordinatorEnabled=true, as
// tools/pulsar does) and a client created with EnableTransaction.
func eachTxnTarget(t *testing.T, scenario func(t *testing.T, tg target, c apulsar.Client, topic string)) {
	t.Helper()
	t.Parallel()
	starts := map[string]func(t *testing.T) target{
		"embedded": func(t *testing.T) target {
			t.Helper()
			return newEmbedded(t, pulsartest.WithTransactions())
		},
		"real": func(t *testing.T) target {
			t.Helper()
			url, admin := brokertest.RealURLs(t)
			return &realTarget{url: url, admin: admin}
		},
	}
	for _, name := range []string{"embedded", "real"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tg := starts[name](t)
			scenario(t, tg, newTxnClient(t, tg.ServiceURL()), tg.UniqueTopic(t))
		})
	}
}

func newTxnClient(t *testing.T, url string) apulsar.Client {
	t.Helper()
	return newClientOf(t, url, true)
}

func newTxn(t *testing.T, c apulsar.Client, timeout time.Duration) apulsar.Transaction {
	t.Helper()
	txn, err := c.NewTransaction(timeout)
	require.NoError(t, err)
	return txn
}

// TestTxnSendsAreInvisibleUntilCommit: what a transaction publishes is stored (receipted) but
// not delivered while it is open, and messages published after it outside any transaction
// wait behind it too (a read stops before the first entry of the oldest open transaction);
// the commit releases everything, in publication order.
func TestTxnSendsAreInvisibleUntilCommit(t *testing.T) {
	eachTxnTarget(t, func(t *testing.T, _ target, c apulsar.Client, topic string) {
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		sendAll(t, p, "before")
		txn := newTxn(t, c, time.Minute)
		for _, s := range []string{"t1", "t2"} {
			_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte(s), Transaction: txn})
			require.NoError(t, err)
		}
		sendAll(t, p, "after")
		assert.Equal(t, "before", string(receive(t, k).Payload()))
		expectNone(t, k, time.Second)

		require.NoError(t, txn.Commit(t.Context()))
		assert.Equal(t, []string{"t1", "t2", "after"}, payloads(receiveN(t, k, 3)))
	})
}

// TestTxnAbortDeliversWhatTheGoClientSent: pulsar-client-go v0.21.0 (as v0.19.0 before it) puts
// the transaction id on CommandSend only, never in the message's metadata
// (apache/pulsar-client-go#1498), and Apache Pulsar tells an aborted entry by its metadata: after
// the abort the entries are delivered as if committed. The embedded broker follows the same rule,
// so both brokers agree; with the id in the metadata (TestTxnAbortFiltersByMetadata) an aborted
// entry is never delivered.
func TestTxnAbortDeliversWhatTheGoClientSent(t *testing.T) {
	eachTxnTarget(t, func(t *testing.T, _ target, c apulsar.Client, topic string) {
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		txn := newTxn(t, c, time.Minute)
		_, err := p.Send(t.Context(), &apulsar.ProducerMessage{Payload: []byte("aborted"), Transaction: txn})
		require.NoError(t, err)
		sendAll(t, p, "plain")
		expectNone(t, k, time.Second)

		require.NoError(t, txn.Abort(t.Context()))
		assert.Equal(t, []string{"aborted", "plain"}, payloads(receiveN(t, k, 2)))
	})
}

// TestTxnAbortFiltersByMetadata: an entry whose metadata carries the id of a transaction that
// was aborted is never delivered (Pulsar's dispatcher acknowledges it for the subscription and
// skips it); one of a committed transaction is delivered once the commit is in.
func TestTxnAbortFiltersByMetadata(t *testing.T) {
	eachTxnTarget(t, func(t *testing.T, tg target, _ apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.tcConnect(0)
		fc.lookup(fq)
		fc.mustSubscribe(1, rawSub{topic: fq, sub: "s", typ: wire.CommandSubscribe_Shared})
		fc.flow(1, 100)
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
			Topic: proto.String(fq), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(fc.nextRequestID()), TxnEnabled: proto.Bool(true),
		}})
		fc.await(wire.BaseCommand_PRODUCER_SUCCESS)

		aborted, committed := fc.newTxn(60000), fc.newTxn(60000)
		for _, x := range []rawTxn{aborted, committed} {
			r := fc.addPartition(x, fq)
			require.Nil(t, r.Error, "%v", r)
		}
		// One at a time: Pulsar may store a plain SEND before a transactional one sent ahead of it.
		for _, frame := range [][]byte{
			rawTxnSend(t, 1, 0, aborted, true, "aborted"), rawTxnSend(t, 1, 1, committed, true, "committed"), rawSend(t, 1, []byte("plain")),
		} {
			fc.sendFrame(frame)
			f := fc.await(wire.BaseCommand_SEND_RECEIPT, wire.BaseCommand_SEND_ERROR)
			require.Equal(t, wire.BaseCommand_SEND_RECEIPT, f.Cmd.GetType(), "%v", f.Cmd)
		}
		if f, ok := fc.next(rawQuiet); ok {
			t.Fatalf("delivered while both transactions are open: %v %q", f.Cmd, rawMessageBody(t, f))
		}
		r := fc.endTxn(aborted, wire.TxnAction_ABORT)
		require.Nil(t, r.Error, "%v", r)
		if f, ok := fc.next(rawQuiet); ok {
			t.Fatalf("delivered while the second transaction is open: %v", f.Cmd)
		}
		r = fc.endTxn(committed, wire.TxnAction_COMMIT)
		require.Nil(t, r.Error, "%v", r)
		assert.Equal(t, map[uint64][]string{1: {"committed", "plain"}}, fc.messagesByConsumer(2))
	})
}

// TestTxnAckIsPendingUntilCommit: a message acknowledged inside a transaction is neither
// acknowledged nor given to another consumer while the transaction is open; an abort gives it
// back (with its redelivery count raised, on a Shared subscription), and an acknowledgement
// in a later transaction that commits removes it for good.
func TestTxnAckIsPendingUntilCommit(t *testing.T) {
	eachTxnTarget(t, func(t *testing.T, _ target, c apulsar.Client, topic string) {
		k1 := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		sendAll(t, p, "m")
		m := receive(t, k1)
		txn := newTxn(t, c, time.Minute)
		require.NoError(t, k1.AckWithTxn(m, txn))
		k1.Close() // whatever k1 still held would go to k2 now
		k2 := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		expectNone(t, k2, time.Second)

		require.NoError(t, txn.Abort(t.Context()))
		again := receive(t, k2)
		assert.Equal(t, "m", string(again.Payload()))
		assert.Equal(t, uint32(1), again.RedeliveryCount())

		txn2 := newTxn(t, c, time.Minute)
		require.NoError(t, k2.AckWithTxn(again, txn2))
		require.NoError(t, txn2.Commit(t.Context()))
		k2.Close()
		k3 := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		sendAll(t, p, "next")
		assert.Equal(t, "next", string(receive(t, k3).Payload()), "the committed acknowledgement holds")
	})
}

// TestTxnTimeoutAborts: a transaction that outlives its timeout is aborted by the broker: what
// it acknowledged comes back, and ending it afterwards fails with TransactionNotFound.
func TestTxnTimeoutAborts(t *testing.T) {
	eachTxnTarget(t, func(t *testing.T, tg target, c apulsar.Client, topic string) {
		admin := needAdmin(t, tg, "a transaction's state")
		k := subscribe(t, c, apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: apulsar.Shared})
		p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic})
		sendAll(t, p, "m")
		m := receive(t, k)
		txn := newTxn(t, c, 2*time.Second)
		require.NoError(t, k.AckWithTxn(m, txn))
		// The broker aborts it at its timeout: its metadata goes, and the message comes back.
		testwait.Eventually(t, eventuallyWithin, func() bool {
			return txnStatus(t, admin, txn.GetTxnID()) == ""
		}, "the broker ends the transaction at its timeout")
		again := receive(t, k)
		assert.Equal(t, "m", string(again.Payload()))
		assert.Equal(t, uint32(1), again.RedeliveryCount())

		// Ending it afterwards: the coordinator no longer knows it.
		fc := dialFrames(t, tg.ServiceURL())
		fc.tcConnect(0)
		x := fc.newTxn(500)
		testwait.Eventually(t, eventuallyWithin, func() bool {
			return txnStatus(t, admin, apulsar.TxnID{MostSigBits: x.most, LeastSigBits: x.least}) == ""
		}, "the broker ends the transaction at its timeout")
		r := fc.endTxn(x, wire.TxnAction_COMMIT)
		assert.Equal(t, wire.ServerError_TransactionNotFound, r.GetError(), "%v", r)
		assert.Equal(t, "The transaction with this txdID `"+x.String()+"`not found ", r.GetMessage())
	})
}

// txnStatus returns a transaction's status from the admin API (GET
// /admin/v3/transactions/transactionMetadata/{most}/{least}), or "" when the coordinator does
// not know it (404: never opened, or ended).
func txnStatus(t *testing.T, admin string, id apulsar.TxnID) string {
	t.Helper()
	code, body := brokertest.AdminDo(t, http.MethodGet, fmt.Sprintf("%s/admin/v3/transactions/transactionMetadata/%d/%d",
		strings.TrimRight(admin, "/"), id.MostSigBits, id.LeastSigBits), "")
	if code == http.StatusNotFound {
		return ""
	}
	require.Equal(t, http.StatusOK, code, "%s", body)
	var md struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(body, &md), "%s", body)
	return md.Status
}

// TestTxnErrorCodes: the coordinator's answers to requests it cannot honour, with Apache
// Pulsar 4.0's codes and texts.
func TestTxnErrorCodes(t *testing.T) {
	eachTxnTarget(t, func(t *testing.T, tg target, _ apulsar.Client, topic string) {
		fq := "persistent://public/default/" + topic
		fc := dialFrames(t, tg.ServiceURL())
		fc.tcConnect(0)

		// A coordinator the broker does not run: no broker serves its partition.
		fc.send(&wire.BaseCommand{
			Type:                   wire.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(),
			TcClientConnectRequest: &wire.CommandTcClientConnectRequest{RequestId: proto.Uint64(fc.nextRequestID()), TcId: proto.Uint64(7)},
		})
		f := fc.await(wire.BaseCommand_TC_CLIENT_CONNECT_RESPONSE, wire.BaseCommand_ERROR)
		assert.Equal(t, wire.ServerError_ServiceNotReady, f.Cmd.GetTcClientConnectResponse().GetError(), "%v", f.Cmd)
		fc.send(&wire.BaseCommand{
			Type:   wire.BaseCommand_NEW_TXN.Enum(),
			NewTxn: &wire.CommandNewTxn{RequestId: proto.Uint64(fc.nextRequestID()), TcId: proto.Uint64(7), TxnTtlSeconds: proto.Uint64(60000)},
		})
		r := fc.await(wire.BaseCommand_NEW_TXN_RESPONSE).Cmd.GetNewTxnResponse()
		assert.Equal(t, wire.ServerError_TransactionCoordinatorNotFound, r.GetError(), "%v", r)
		assert.Equal(t, "Transaction coordinator with id 7 not found!", r.GetMessage())

		notFound := func(what string, x rawTxn, r *wire.CommandTxnResponse) {
			t.Helper()
			assert.Equal(t, wire.ServerError_TransactionNotFound, r.GetError(), "%s: %v", what, r)
			assert.Equal(t, "The transaction with this txdID `"+x.String()+"`not found ", r.GetMessage(), what)
			assert.Equal(t, []uint64{x.most, x.least}, []uint64{r.GetTxnidMostBits(), r.GetTxnidLeastBits()}, what)
		}
		unknown := rawTxn{most: 0, least: 1 << 40}
		notFound("add a partition to an unknown transaction", unknown, fc.addPartition(unknown, fq))
		notFound("add a subscription to an unknown transaction", unknown, fc.addSubscription(unknown, fq, "s"))
		notFound("commit an unknown transaction", unknown, fc.endTxn(unknown, wire.TxnAction_COMMIT))

		// An ended transaction is forgotten: whatever comes next is TransactionNotFound.
		x := fc.newTxn(60000)
		require.Nil(t, fc.endTxn(x, wire.TxnAction_COMMIT).Error)
		notFound("commit twice", x, fc.endTxn(x, wire.TxnAction_COMMIT))
		notFound("abort after the commit", x, fc.endTxn(x, wire.TxnAction_ABORT))
		notFound("add a partition after the commit", x, fc.addPartition(x, fq))
		y := fc.newTxn(60000)
		require.Nil(t, fc.endTxn(y, wire.TxnAction_ABORT).Error)
		notFound("commit after the abort", y, fc.endTxn(y, wire.TxnAction_COMMIT))

		// Acknowledging what another transaction holds, or what is acknowledged already.
		fc.lookup(fq)
		fc.mustSubscribe(1, rawSub{topic: fq, sub: "s", typ: wire.CommandSubscribe_Shared, earliest: true})
		fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PRODUCER.Enum(), Producer: &wire.CommandProducer{
			Topic: proto.String(fq), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(fc.nextRequestID()),
		}})
		fc.await(wire.BaseCommand_PRODUCER_SUCCESS)
		fc.sendFrame(rawSend(t, 1, []byte("m")))
		id := fc.await(wire.BaseCommand_SEND_RECEIPT).Cmd.GetSendReceipt().GetMessageId()
		fc.flow(1, 10)
		fc.await(wire.BaseCommand_MESSAGE)
		a, b := fc.newTxn(60000), fc.newTxn(60000)
		require.Nil(t, fc.addSubscription(a, fq, "s").Error)
		require.Nil(t, fc.addSubscription(b, fq, "s").Error)
		conflict := func(what string, x rawTxn, r *wire.CommandAckResponse, state string) {
			t.Helper()
			assert.Equal(t, wire.ServerError_TransactionConflict, r.GetError(), "%s: %v", what, r)
			assert.Equal(t, fmt.Sprintf("org.apache.pulsar.transaction.common.exception.TransactionConflictException: "+
				"[%s][s] Transaction:%s try to ack message:%d:%d (ackSet is null) %s", fq, x, id.GetLedgerId(), id.GetEntryId(), state),
				r.GetMessage(), what)
		}
		ack := fc.txnAck(1, a, id)
		require.Nil(t, ack.Error, "%v", ack)
		conflict("pending in another transaction", b, fc.txnAck(1, b, id), "in pending ack status.")
		require.Nil(t, fc.endTxn(a, wire.TxnAction_COMMIT).Error)
		conflict("acknowledged by a committed transaction", b, fc.txnAck(1, b, id), "already acked before.")
	})
}

// rawTxn is a transaction id on the wire.
type rawTxn struct{ most, least uint64 }

func (x rawTxn) String() string { return fmt.Sprintf("(%d,%d)", x.most, x.least) }

// tcConnect connects the raw connection to transaction coordinator id, as the client's
// transaction handler does before its first request.
func (fc *frameConn) tcConnect(id uint64) {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{
		Type:                   wire.BaseCommand_TC_CLIENT_CONNECT_REQUEST.Enum(),
		TcClientConnectRequest: &wire.CommandTcClientConnectRequest{RequestId: proto.Uint64(fc.nextRequestID()), TcId: proto.Uint64(id)},
	})
	f := fc.await(wire.BaseCommand_TC_CLIENT_CONNECT_RESPONSE, wire.BaseCommand_ERROR)
	require.Equal(fc.t, wire.BaseCommand_TC_CLIENT_CONNECT_RESPONSE, f.Cmd.GetType(), "%v", f.Cmd)
	require.Nil(fc.t, f.Cmd.GetTcClientConnectResponse().Error, "%v", f.Cmd)
}

// newTxn opens a transaction on coordinator 0 with a timeout of ttlMs milliseconds.
func (fc *frameConn) newTxn(ttlMs uint64) rawTxn {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_NEW_TXN.Enum(), NewTxn: &wire.CommandNewTxn{
		RequestId: proto.Uint64(fc.nextRequestID()), TcId: proto.Uint64(0), TxnTtlSeconds: proto.Uint64(ttlMs),
	}})
	r := fc.await(wire.BaseCommand_NEW_TXN_RESPONSE).Cmd.GetNewTxnResponse()
	require.Nil(fc.t, r.Error, "%v", r)
	return rawTxn{most: r.GetTxnidMostBits(), least: r.GetTxnidLeastBits()}
}

func (fc *frameConn) addPartition(x rawTxn, partitions ...string) *wire.CommandTxnResponse {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_ADD_PARTITION_TO_TXN.Enum(), AddPartitionToTxn: &wire.CommandAddPartitionToTxn{
		RequestId: proto.Uint64(fc.nextRequestID()), TxnidMostBits: proto.Uint64(x.most), TxnidLeastBits: proto.Uint64(x.least),
		Partitions: partitions,
	}})
	return fc.await(wire.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE).Cmd.GetAddPartitionToTxnResponse()
}

func (fc *frameConn) addSubscription(x rawTxn, topic, sub string) *wire.CommandTxnResponse {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_ADD_SUBSCRIPTION_TO_TXN.Enum(), AddSubscriptionToTxn: &wire.CommandAddSubscriptionToTxn{
		RequestId: proto.Uint64(fc.nextRequestID()), TxnidMostBits: proto.Uint64(x.most), TxnidLeastBits: proto.Uint64(x.least),
		Subscription: []*wire.Subscription{{Topic: proto.String(topic), Subscription: proto.String(sub)}},
	}})
	return fc.await(wire.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE).Cmd.GetAddSubscriptionToTxnResponse()
}

func (fc *frameConn) endTxn(x rawTxn, action wire.TxnAction) *wire.CommandTxnResponse {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_END_TXN.Enum(), EndTxn: &wire.CommandEndTxn{
		RequestId: proto.Uint64(fc.nextRequestID()), TxnidMostBits: proto.Uint64(x.most), TxnidLeastBits: proto.Uint64(x.least),
		TxnAction: action.Enum(),
	}})
	return fc.await(wire.BaseCommand_END_TXN_RESPONSE).Cmd.GetEndTxnResponse()
}

// txnAck acknowledges id for consumer inside x and returns the broker's ACK_RESPONSE.
func (fc *frameConn) txnAck(consumer uint64, x rawTxn, id *wire.MessageIdData) *wire.CommandAckResponse {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_ACK.Enum(), Ack: &wire.CommandAck{
		ConsumerId: proto.Uint64(consumer), AckType: wire.CommandAck_Individual.Enum(),
		MessageId:     []*wire.MessageIdData{{LedgerId: proto.Uint64(id.GetLedgerId()), EntryId: proto.Uint64(id.GetEntryId())}},
		TxnidMostBits: proto.Uint64(x.most), TxnidLeastBits: proto.Uint64(x.least), RequestId: proto.Uint64(fc.nextRequestID()),
	}})
	return fc.await(wire.BaseCommand_ACK_RESPONSE).Cmd.GetAckResponse()
}

// rawTxnSend is a SEND frame of one message with body for producer id inside x, with the
// transaction id in the message's metadata too when inMetadata (as the Java client writes it).
func rawTxnSend(t *testing.T, id, seq uint64, x rawTxn, inMetadata bool, body string) []byte {
	t.Helper()
	md := &wire.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1)}
	if inMetadata {
		md.TxnidMostBits, md.TxnidLeastBits = proto.Uint64(x.most), proto.Uint64(x.least)
	}
	payload, err := wire.BuildPayload(md, []byte(body))
	require.NoError(t, err)
	frame, err := wire.EncodePayloadCommand(&wire.BaseCommand{Type: wire.BaseCommand_SEND.Enum(), Send: &wire.CommandSend{
		ProducerId: proto.Uint64(id), SequenceId: proto.Uint64(seq), TxnidMostBits: proto.Uint64(x.most), TxnidLeastBits: proto.Uint64(x.least),
	}}, nil, payload)
	require.NoError(t, err)
	return frame
}
