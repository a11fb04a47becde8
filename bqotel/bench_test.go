package bqotel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// benchTelemetry is a Telemetry over the SDKs as an application runs them: every span
// sampled and recorded (with no exporter, so the export is not measured) and a manual
// metric reader.
func benchTelemetry(b *testing.B) *bqotel.Telemetry {
	b.Helper()
	return samplingTelemetry(b, sdktrace.AlwaysSample())
}

func benchClient(b *testing.B) apulsar.Client {
	b.Helper()
	br := pulsartest.NewBroker(b)
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL: br.URL(), OperationTimeout: 5 * time.Second, ConnectionTimeout: 5 * time.Second,
		Logger: bqpulsar.NewClientLogger(zap.NewNop()),
	})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	return c
}

// BenchmarkPublish measures a synchronous Publish on the embedded broker, without and with
// bqotel's publish hook.
func BenchmarkPublish(b *testing.B) {
	for _, instrumented := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "bqotel"}[instrumented], func(b *testing.B) {
			client := benchClient(b)
			var opts []bqpulsar.PublisherOption
			if instrumented {
				opts = benchTelemetry(b).PublisherOptions()
			}
			p, err := bqpulsar.NewPublisher(client, "persistent://public/default/bench-publish", opts...)
			require.NoError(b, err)
			defer func() { _ = p.Close() }()
			ctx := context.Background()
			data := map[string]any{"order_id": 1}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := p.Publish(ctx, "urn:babel:bench:order", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConsume measures receiving, handling and acknowledging b.N messages published
// beforehand on the embedded broker, without and with bqotel's delivery hook and observer
// (the messages then carry a traceparent, so each consumer span has a remote parent).
func BenchmarkConsume(b *testing.B) {
	for _, instrumented := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "bqotel"}[instrumented], func(b *testing.B) {
			client := benchClient(b)
			topic := fmt.Sprintf("persistent://public/default/bench-consume-%t", instrumented)
			var pubOpts []bqpulsar.PublisherOption
			var conOpts []bqpulsar.ConsumerOption
			if instrumented {
				tel := benchTelemetry(b)
				pubOpts, conOpts = tel.PublisherOptions(), tel.ConsumerOptions()
			}
			p, err := bqpulsar.NewPublisher(client, topic, pubOpts...)
			require.NoError(b, err)
			ctx := context.Background()
			for range b.N {
				require.NoError(b, p.PublishAsync(ctx, "urn:babel:bench:order", map[string]any{"order_id": 1}, nil))
			}
			require.NoError(b, p.Close())
			var handled atomic.Int64
			done := make(chan struct{})
			n := int64(b.N)
			c, err := bqpulsar.NewConsumer(client, append(conOpts,
				bqpulsar.WithTopic(topic),
				bqpulsar.WithSubscription("bench", apulsar.Shared),
				bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionEarliest),
				bqpulsar.Handle("urn:babel:bench:order", func(context.Context, *envelope.Envelope, apulsar.Message) error {
					if handled.Add(1) == n {
						close(done)
					}
					return nil
				}))...)
			require.NoError(b, err)
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			go func() { ran <- c.Run(runCtx) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				b.Fatalf("handled %d of %d", handled.Load(), n)
			}
			b.StopTimer()
			stop()
			if err := <-ran; !errors.Is(err, context.Canceled) {
				b.Fatal(err)
			}
			_ = c.Close()
		})
	}
}
