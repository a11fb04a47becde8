package connector_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// stalledSubscriber requests everything and settles nothing: the worst case for the
// Source's memory (RUNTIME.md §12.4: Request(Unbounded) with a stalled stage).
type stalledSubscriber struct {
	got  atomic.Int64
	msgs []bytesMsg // only touched by OnNext, serialised by the Outlet
}

func (*stalledSubscriber) OnSubscribe(sub reactive.Subscription) { sub.Request(reactive.Unbounded) }

func (s *stalledSubscriber) OnNext(m bytesMsg) { s.msgs = append(s.msgs, m); s.got.Add(1) }
func (*stalledSubscriber) OnError(error)       {}
func (*stalledSubscriber) OnComplete()         {}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkSourceHeapBacklog measures the heap a Source holds for a subscription whose
// backlog is 10,000 or 200,000 messages of 1 KiB, with Request(Unbounded) and a stage
// that settles nothing: once max-inflight messages are delivered the source stops
// receiving, so the heap in use (HeapInuse after GC, minus the same before subscribing)
// is bounded by max-inflight plus the client's receiver queue, not by the backlog. The
// embedded broker runs in the process; its copy of the backlog is in both readings.
//
//	go test -run '^$' -bench BenchmarkSourceHeapBacklog -benchtime 5x ./pulsar
func BenchmarkSourceHeapBacklog(b *testing.B) {
	const maxInflight = 256
	for _, backlog := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			broker := pulsartest.NewBroker(b)
			client := newClient(b, broker)
			topic := fmt.Sprintf("persistent://public/default/heap-%d-%d", backlog, time.Now().UnixNano())
			publishPayloads(b, client, topic, backlog, 1024)
			var delta, peak float64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				before := heapInuse()
				b.StartTimer()
				src, err := connector.NewSource(client, connector.SourceOptions{
					Consumer: apulsar.ConsumerOptions{
						Topic: topic, SubscriptionName: fmt.Sprintf("heap-%d", i), Type: apulsar.Shared,
						SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
					},
					MaxInflight: maxInflight,
				})
				if err != nil {
					b.Fatal(err)
				}
				sub := &stalledSubscriber{}
				src.Subscribe(sub)
				for sub.got.Load() < maxInflight {
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				time.Sleep(50 * time.Millisecond) // let the client fill its receiver queue
				after := heapInuse()
				if got := sub.got.Load(); got != maxInflight || src.InFlight() != maxInflight {
					b.Fatalf("delivered %d, in flight %d: the max-inflight bound %d was exceeded", got, src.InFlight(), maxInflight)
				}
				d := float64(after) - float64(before)
				delta += d
				peak = max(peak, d)
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				_ = src.Close(ctx) // nothing was settled: give up at once; the broker keeps the backlog
				cancel()
				b.StartTimer()
			}
			b.ReportMetric(delta/float64(b.N), "heap-inuse-delta-B")
			b.ReportMetric(peak, "heap-inuse-delta-max-B")
			b.ReportMetric(maxInflight, "max-inflight")
		})
	}
}

func publishPayloads(b *testing.B, client apulsar.Client, topic string, n, size int) {
	b.Helper()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic, MaxPendingMessages: 10_000})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	payload := make([]byte, size)
	var failed atomic.Int64
	for range n {
		p.SendAsync(context.Background(), &apulsar.ProducerMessage{Payload: payload},
			func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		b.Fatal(err)
	}
	if failed.Load() > 0 {
		b.Fatalf("%d sends failed", failed.Load())
	}
}
