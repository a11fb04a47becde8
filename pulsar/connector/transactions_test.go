package connector_test

import (
	"context"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// holdQuiet is how long a held settlement is watched for an output that must not appear.
const holdQuiet = time.Second

// TestConnector_TransactionsCommitTheWriteWithTheAck (on both brokers): with SourceOptions.Transactions, a sink
// that sends a message derived from an incoming one sends it inside the incoming delivery's
// transaction. The derived message's acknowledgement, which the sink calls once the broker
// has the write, is held: while it is, the write is not visible to a consumer of the
// outgoing topic, and once the incoming message is acknowledged (the commit) it is. Without
// transactions the same write is visible during the hold, which is what the first case
// would see if the sink sent outside the transaction.
func TestConnector_TransactionsCommitTheWriteWithTheAck(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		for _, txn := range []bool{true, false} {
			name := map[bool]string{true: "transactional", false: "plain"}[txn]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				client := tg.TxnClient(t)
				in, out := tg.Topic(t, "ctx-in"), tg.Topic(t, "ctx-out")
				sunk := collect(t, client, out)
				o := connector.SourceOptions{
					Consumer:  apulsar.ConsumerOptions{Topic: in, SubscriptionName: "svc", Type: apulsar.Shared},
					Envelopes: true,
				}
				if txn {
					o.Transactions = 30 * time.Second
				}
				src, err := connector.NewSource(client, o)
				require.NoError(t, err)
				t.Cleanup(func() { closeWithin(t, src.Close) })
				sink, err := connector.NewSink(client, connector.SinkOptions{Producer: apulsar.ProducerOptions{Topic: out}})
				require.NoError(t, err)
				t.Cleanup(func() { closeWithin(t, sink.Close) })

				written, release := make(chan struct{}, 1), make(chan struct{})
				reactive.Map(reactive.Publisher[bytesMsg](src), func(m bytesMsg) (bytesMsg, error) {
					return messaging.NewMessage(m.Payload(), messaging.WithMetadata(m.Metadata()),
						messaging.WithAckFunc(func(ctx context.Context) error {
							written <- struct{}{}
							<-release
							return m.Ack(ctx)
						}),
						messaging.WithNackFunc(func(ctx context.Context, reason error, _ messaging.NackOptions) error {
							return m.Nack(ctx, reason)
						})), nil
				}).Subscribe(sink)

				publishEnvelopes(t, client, in, 1)
				select {
				case <-written:
				case <-time.After(waitLong):
					t.Fatal("the sink never had the broker's receipt")
				}
				if txn {
					assert.Never(t, func() bool { return sunk.count() > 0 }, holdQuiet, 50*time.Millisecond,
						"a write inside the open transaction was visible")
				} else {
					sunk.wait(t, 1)
				}
				close(release)
				require.Len(t, sunk.wait(t, 1), 1)
				testwait.Eventually(t, brokertest.WaitLong, func() bool {
					return brokertest.Backlog(t, tg.AdminURL, in, "svc") == 0
				}, "the incoming message acknowledged")
				assert.Never(t, func() bool { return sunk.count() > 1 }, holdQuiet, 50*time.Millisecond, "written once")
			})
		}
	}, pulsartest.WithTransactions())
}

// TestConnector_TransactionalProcess: a Process stage between two Pulsar channels, the
// incoming one with transactions=30s, configured by attributes alone: the connector makes a
// transactional client for it, every output is written once and every input acknowledged.
func TestConnector_TransactionalProcess(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		in, out := tg.Topic(t, "proc-in"), tg.Topic(t, "proc-out")
		sunk := collect(t, client, out)
		cfg := incoming(tg.URL, in, "codec", connector.CodecBabelQueue, "transactions", "30s")
		cfg["mp.messaging.outgoing.out.connector"] = connector.Name
		cfg["mp.messaging.outgoing.out.serviceUrl"] = tg.URL
		cfg["mp.messaging.outgoing.out.topic"] = out
		cfg["mp.messaging.outgoing.out.codec"] = connector.CodecBabelQueue
		runtimeOf(t, cfg, func(rt *messaging.Runtime) {
			messaging.Process(rt, "in", "out", func(_ context.Context, e *envelope.Envelope) (*envelope.Envelope, error) {
				return envelope.Make("urn:babel:invoices:issued", map[string]any{"from": e.Meta.ID}, envelope.WithQueue("invoices"))
			})
		})
		const n = 5
		publishEnvelopes(t, client, in, n)
		require.Len(t, sunk.wait(t, n), n)
		testwait.Eventually(t, brokertest.WaitLong, func() bool {
			return brokertest.Backlog(t, tg.AdminURL, in, "svc") == 0
		}, "every input acknowledged")
		assert.Never(t, func() bool { return sunk.count() > n }, holdQuiet, 50*time.Millisecond, "each output written once")
	}, pulsartest.WithTransactions())
}

// closeWithin calls a Close that takes a context, bounded by a few seconds.
func closeWithin(t *testing.T, closeFn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NoError(t, closeFn(ctx))
}
