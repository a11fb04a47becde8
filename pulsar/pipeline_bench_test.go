package pulsar

import (
	"context"
	"encoding/json"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"
)

// nopSettler and nopProducer implement the narrow interfaces with no work, so that the
// benchmarks below measure the SDK's own cost per message.
type nopSettler struct{}

func (nopSettler) Ack(apulsar.Message) error { return nil }
func (nopSettler) Nack(apulsar.Message)      {}

type nopProducer struct{}

func (nopProducer) Send(context.Context, *apulsar.ProducerMessage) (apulsar.MessageID, error) {
	return apulsar.EarliestMessageID(), nil
}

func (nopProducer) SendAsync(_ context.Context, m *apulsar.ProducerMessage, f func(apulsar.MessageID, *apulsar.ProducerMessage, error)) {
	f(apulsar.EarliestMessageID(), m, nil)
}

func (nopProducer) FlushWithCtx(context.Context) error { return nil }

// BenchmarkPipelineSuccess: gate, classify, reconcile, route, dispatch and ack of one
// message, without a broker.
func BenchmarkPipelineSuccess(b *testing.B) {
	cfg, err := consumerSetup([]ConsumerOption{Handle(testURN, handlerReturning(nil))})
	require.NoError(b, err)
	c := newConsumer(cfg, nil, nopSettler{}, nil)
	msg, _ := newMessage(b, testURN, 0, 0)
	ctx := withConsumerInfo(b.Context(), c.eng.info) // as Run derives it, once
	b.ReportAllocs()
	for b.Loop() {
		c.process(ctx, msg)
	}
}

// BenchmarkPublishPath: build, encode and project one message, without a broker: for a
// wrapped producer, and with the reuse of outgoing messages that NewPublisher enables for
// the producers it creates.
func BenchmarkPublishPath(b *testing.B) {
	data := json.RawMessage(`{"order":42,"customer":"c-1","amount":12.5}`)
	for _, recycle := range []bool{false, true} {
		name := "wrapped"
		if recycle {
			name = "recycled"
		}
		b.Run(name, func(b *testing.B) {
			p, err := wrapMessageProducer(nopProducer{}, "orders", nil)
			require.NoError(b, err)
			p.recycle = recycle
			done := func(string, error) {}
			b.ReportAllocs()
			for b.Loop() {
				if err := p.PublishAsync(b.Context(), testURN, data, done); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
