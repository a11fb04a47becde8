package pulsar_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The benchmarks compare the SDK with the raw client in one process, on one embedded
// broker, in the same run, and report the SDK/raw throughput ratio (1 = as fast as raw):
//
//	go test -run='^$' -bench='Publish|Consume' -benchtime=20000x ./pulsar

// benchData is pre-encoded JSON, as the raw baseline's payload is: both sides pay for the
// envelope, not for encoding/json.
var benchData = json.RawMessage(`{"order":42,"customer":"c-1","amount":12.5}`)

// rounds interleaves the raw and SDK phases in chunks, so that noise from the machine (the
// broker runs in the same process, on the same cores) hits both sides alike.
const rounds = 40

func chunks(n int) []int {
	out := make([]int, 0, rounds)
	for i := range rounds {
		c := n/rounds + btoi(i < n%rounds)
		if c > 0 {
			out = append(out, c)
		}
	}
	return out
}

// alternate runs the two phases, raw first in even rounds and SDK first in odd ones, so
// that neither always runs second (after the other's garbage).
func alternate(round int, raw, sdk func()) {
	if round%2 == 0 {
		raw()
		sdk()
		return
	}
	sdk()
	raw()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func benchTopic(b *testing.B, base string) string {
	b.Helper()
	return "persistent://public/default/bench-" + base + "-" + time.Now().Format("150405.000000000")
}

// rawMessage is what the raw baseline sends: an envelope encoded once, with its
// properties, so that the baseline pays only for the client.
func rawMessage(b *testing.B) *apulsar.ProducerMessage {
	b.Helper()
	env, err := envelope.Make(okURN, benchData)
	require.NoError(b, err)
	payload, err := env.Encode()
	require.NoError(b, err)
	return &apulsar.ProducerMessage{Payload: payload, Properties: bqpulsar.ProjectProperties(env)}
}

func reportRatio(b *testing.B, raw, sdk time.Duration, n int) {
	b.Helper()
	b.ReportMetric(float64(raw.Nanoseconds())/float64(n), "raw-ns/msg")
	b.ReportMetric(float64(sdk.Nanoseconds())/float64(n), "sdk-ns/msg")
	b.ReportMetric(float64(raw)/float64(sdk), "sdk/raw")
}

// BenchmarkPublishSync: one synchronous send at a time, batching off on both sides.
func BenchmarkPublishSync(b *testing.B) {
	broker := pulsartest.NewBroker(b)
	client := newClient(b, broker)
	noBatch := func(o *apulsar.ProducerOptions) { o.DisableBatching = true }
	rawP, err := client.CreateProducer(apulsar.ProducerOptions{Topic: benchTopic(b, "raw-sync"), DisableBatching: true})
	require.NoError(b, err)
	defer rawP.Close()
	pub, err := bqpulsar.NewPublisher(client, benchTopic(b, "sdk-sync"), bqpulsar.WithProducerOptions(noBatch))
	require.NoError(b, err)
	defer func() { require.NoError(b, pub.Close()) }()
	msg := rawMessage(b)
	ctx := context.Background()

	b.ResetTimer()
	var raw, sdk time.Duration
	for i, k := range chunks(b.N) {
		rawPhase := func() {
			start := time.Now()
			for range k {
				if _, err := rawP.Send(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			raw += time.Since(start)
		}
		sdkPhase := func() {
			start := time.Now()
			for range k {
				if _, err := pub.Publish(ctx, okURN, benchData); err != nil {
					b.Fatal(err)
				}
			}
			sdk += time.Since(start)
		}
		alternate(i, rawPhase, sdkPhase)
	}
	b.StopTimer()
	reportRatio(b, raw, sdk, b.N)
}

// BenchmarkPublishAsync: asynchronous sends with the default batching on both sides (the
// SDK's key-based batch builder on both, so that only the SDK's own work differs).
func BenchmarkPublishAsync(b *testing.B) {
	broker := pulsartest.NewBroker(b)
	client := newClient(b, broker)
	rawP, err := client.CreateProducer(apulsar.ProducerOptions{
		Topic: benchTopic(b, "raw-async"), BatcherBuilderType: apulsar.KeyBasedBatchBuilder,
	})
	require.NoError(b, err)
	defer rawP.Close()
	pub, err := bqpulsar.NewPublisher(client, benchTopic(b, "sdk-async"))
	require.NoError(b, err)
	defer func() { require.NoError(b, pub.Close()) }()
	msg := rawMessage(b)
	ctx := context.Background()
	var failed atomic.Int64

	b.ResetTimer()
	var wg sync.WaitGroup
	var raw, sdk time.Duration
	for i, k := range chunks(b.N) {
		rawPhase := func() {
			start := time.Now()
			wg.Add(k)
			for range k {
				rawP.SendAsync(ctx, msg, func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
					if err != nil {
						failed.Add(1)
					}
					wg.Done()
				})
			}
			wg.Wait()
			raw += time.Since(start)
		}
		sdkPhase := func() {
			start := time.Now()
			wg.Add(k)
			for range k {
				if err := pub.PublishAsync(ctx, okURN, benchData, func(_ string, err error) {
					if err != nil {
						failed.Add(1)
					}
					wg.Done()
				}); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
			sdk += time.Since(start)
		}
		alternate(i, rawPhase, sdkPhase)
	}
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d sends failed", failed.Load())
	}
	reportRatio(b, raw, sdk, b.N)
}

// fill publishes n copies of msg to topic and waits for the receipts.
func fill(b *testing.B, client apulsar.Client, topic string, msg *apulsar.ProducerMessage, n int) {
	b.Helper()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
	require.NoError(b, err)
	defer p.Close()
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		p.SendAsync(context.Background(), msg, func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
}

// BenchmarkConsume: receive and ack messages with the raw client, then receive, gate,
// classify, route, handle (a no-op handler) and ack as many with the SDK. Each round fills
// both topics while their dispatch is paused, so that neither side starts with prefetched
// messages.
func BenchmarkConsume(b *testing.B) {
	broker := pulsartest.NewBroker(b)
	client := newClient(b, broker)
	rawTopic, sdkTopic := benchTopic(b, "raw-consume"), benchTopic(b, "sdk-consume")
	msg := rawMessage(b)
	sub := func(topic string) apulsar.Consumer {
		c, err := client.Subscribe(apulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "bench", Type: apulsar.Exclusive,
			SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		})
		require.NoError(b, err)
		return c
	}
	rawC := sub(rawTopic)
	defer rawC.Close()
	sdkPC := sub(sdkTopic)
	defer sdkPC.Close()
	var handled atomic.Int64
	var target atomic.Int64
	reached := make(chan struct{}, 1)
	c, err := bqpulsar.WrapConsumer(client, sdkPC, bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
		if handled.Add(1) == target.Load() {
			reached <- struct{}{}
		}
		return nil
	}))
	require.NoError(b, err)
	defer func() { require.NoError(b, c.Close()) }()
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			b.Error(err)
		}
	}()

	b.ResetTimer()
	var raw, sdk time.Duration
	for i, k := range chunks(b.N) {
		b.StopTimer()
		broker.PauseDispatch(rawTopic)
		broker.PauseDispatch(sdkTopic)
		fill(b, client, rawTopic, msg, k)
		fill(b, client, sdkTopic, msg, k)
		target.Add(int64(k))
		b.StartTimer()

		rawPhase := func() {
			start := time.Now()
			broker.ResumeDispatch(rawTopic)
			for range k {
				m, err := rawC.Receive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := rawC.Ack(m); err != nil {
					b.Fatal(err)
				}
			}
			raw += time.Since(start)
		}
		sdkPhase := func() {
			start := time.Now()
			broker.ResumeDispatch(sdkTopic)
			<-reached
			sdk += time.Since(start)
		}
		alternate(i, rawPhase, sdkPhase)
	}
	b.StopTimer()
	reportRatio(b, raw, sdk, b.N)
}
