package pulsartest_test

import (
	"context"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

const benchPayloadSize = 1024

func benchClient(b *testing.B) apulsar.Client {
	b.Helper()
	br := pulsartest.NewBroker(b)
	c, err := apulsar.NewClient(apulsar.ClientOptions{URL: br.URL(), Logger: plog.DefaultNopLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

func benchProduce(b *testing.B, c apulsar.Client, topic string, n int) {
	b.Helper()
	p, err := c.CreateProducer(apulsar.ProducerOptions{Topic: topic, SendTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	payload := make([]byte, benchPayloadSize)
	for range n {
		p.SendAsync(b.Context(), &apulsar.ProducerMessage{Payload: payload},
			func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
				if err != nil {
					b.Error(err)
				}
			})
	}
	if err := p.FlushWithCtx(b.Context()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkProduceBatched measures batched asynchronous publishing of 1 KiB messages through the broker.
func BenchmarkProduceBatched(b *testing.B) {
	c := benchClient(b)
	b.SetBytes(benchPayloadSize)
	b.ReportAllocs()
	b.ResetTimer()
	benchProduce(b, c, "bench-produce", b.N)
}

// BenchmarkConsumeAck measures receiving and acknowledging 1 KiB messages (Shared subscription) through the
// broker; the messages are published before the timer starts.
func BenchmarkConsumeAck(b *testing.B) {
	c := benchClient(b)
	k, err := c.Subscribe(apulsar.ConsumerOptions{
		Topic: "bench-consume", SubscriptionName: "s", Type: apulsar.Shared,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	benchProduce(b, c, "bench-consume", b.N)
	b.SetBytes(benchPayloadSize)
	b.ReportAllocs()
	b.ResetTimer()
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	for range b.N {
		m, err := k.Receive(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := k.Ack(m); err != nil {
			b.Fatal(err)
		}
	}
}
