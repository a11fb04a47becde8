package pulsar_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// BenchmarkConsumeTransactions: what WithTransactions costs per message on a real Apache
// Pulsar (PULSAR_URL; the embedded broker's coordinator says nothing of its cost). Two consumers of the SDK,
// one plain and one with WithTransactions, each with a no-op handler, concurrency 1, on
// topics of their own; each round fills both topics and then lets the plain and the
// transactional consumer handle their messages in turn (alternating which goes first).
// Reported: plain-ns/msg, txn-ns/msg and txn/plain (how many times slower).
//
//	PULSAR_URL=pulsar://127.0.0.1:6650 go test -run='^$' -bench=ConsumeTransactions -benchtime=2000x ./pulsar
func BenchmarkConsumeTransactions(b *testing.B) {
	tg := brokertest.RealBroker(b)
	client := tg.TxnClient(b)
	msg := rawMessage(b)
	type side struct {
		topic   string
		handled atomic.Int64
		target  atomic.Int64
		open    atomic.Pointer[chan struct{}] // closed when the side's phase starts
		reached chan struct{}
		took    time.Duration
	}
	start := func(s *side, opts ...bqpulsar.ConsumerOption) {
		closed := make(chan struct{})
		s.open.Store(&closed)
		s.reached = make(chan struct{}, 1)
		c, err := bqpulsar.NewConsumer(client, append(opts, bqpulsar.WithTopic(s.topic),
			bqpulsar.WithSubscription("bench", apulsar.Shared),
			bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
				<-*s.open.Load()
				if s.handled.Add(1) == s.target.Load() {
					s.reached <- struct{}{}
				}
				return nil
			}))...)
		require.NoError(b, err)
		runConsumer(b, c)
	}
	plain := &side{topic: tg.Topic(b, "bench-plain")}
	txn := &side{topic: tg.Topic(b, "bench-txn")}
	start(plain)
	start(txn, bqpulsar.WithTransactions(30*time.Second))

	b.ResetTimer()
	for i, k := range chunks(b.N) {
		b.StopTimer()
		for _, s := range []*side{plain, txn} {
			gate := make(chan struct{})
			s.open.Store(&gate)
			fill(b, client, s.topic, msg, k)
			s.target.Add(int64(k))
		}
		b.StartTimer()
		phase := func(s *side) func() {
			return func() {
				began := time.Now()
				close(*s.open.Load())
				<-s.reached
				s.took += time.Since(began)
			}
		}
		alternate(i, phase(plain), phase(txn))
	}
	b.StopTimer()
	b.ReportMetric(float64(plain.took.Nanoseconds())/float64(b.N), "plain-ns/msg")
	b.ReportMetric(float64(txn.took.Nanoseconds())/float64(b.N), "txn-ns/msg")
	b.ReportMetric(float64(txn.took)/float64(plain.took), "txn/plain")
}
