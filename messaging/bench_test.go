package messaging_test

import (
	"context"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/cputime"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
)

// work is the per-message function of both pipelines.
func work(_ context.Context, p []byte) ([]byte, error) {
	out := make([]byte, len(p))
	copy(out, p)
	return out, nil
}

// BenchmarkPipeline measures the per-message overhead of the runtime: an
// in-memory source → Process(work) → in-memory sink (Post ack chain,
// settlement recorded by the in-memory connector), against a plain channel
// pipeline producer → goroutine running work → consumer doing the same work
// without acknowledgement. Run with -benchmem; the ratio of the ns/op is
// the runtime's cost per message.
func BenchmarkPipeline(b *testing.B) {
	payload := []byte(`{"id":"order-1","amount":42}`)
	b.Run("runtime", func(b *testing.B) { benchRuntime(b, payload) })
	b.Run("runtime-prefetch64", func(b *testing.B) { benchRuntime(b, payload, messaging.WithPrefetch(64)) })
	b.Run("chan", func(b *testing.B) { benchChan(b, payload) })
}

// BenchmarkPipelineCPU interleaves the runtime and the plain-channel
// baseline (runtime, chan, runtime, chan, ... with -count) and reports
// allocs/op and cpu-ns/msg for both.
func BenchmarkPipelineCPU(b *testing.B) {
	payload := []byte(`{"id":"order-1","amount":42}`)
	for _, prefetch := range []int64{1, 64} {
		b.Run("runtime-prefetch"+itoa(prefetch), func(b *testing.B) {
			benchRuntime(b, payload, messaging.WithPrefetch(prefetch))
		})
		b.Run("chan", func(b *testing.B) { benchChan(b, payload) })
	}
}

func itoa(n int64) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func benchChan(b *testing.B, payload []byte) {
	b.Helper()
	{
		ctx := b.Context()
		in, out := make(chan []byte, 256), make(chan []byte, 256)
		go func() {
			defer close(out)
			for p := range in {
				v, _ := work(ctx, p)
				out <- v
			}
		}()
		b.ReportAllocs()
		b.ResetTimer()
		n := 0
		cputime.Report(b, func() {
			go func() {
				defer close(in)
				for range b.N {
					in <- payload
				}
			}()
			for range out {
				n++
			}
		})
		b.StopTimer()
		if n != b.N {
			b.Fatalf("got %d of %d", n, b.N)
		}
	}
}

func benchRuntime(b *testing.B, payload []byte, opts ...messaging.StageOption) {
	b.Helper()
	conn := inmemory.New()
	cfg, err := messaging.LoadConfig(messaging.FromMap(map[string]string{
		"mp.messaging.incoming.in.connector":  "in-memory",
		"mp.messaging.outgoing.out.connector": "in-memory",
	}))
	if err != nil {
		b.Fatal(err)
	}
	rt := messaging.New(cfg, messaging.WithConnector(conn))
	messaging.Process(rt, "in", "out", work, opts...)
	ctx := b.Context()
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	src, sink := conn.Source("in"), conn.Sink("out")
	b.ReportAllocs()
	b.ResetTimer()
	cputime.Report(b, func() {
		for range b.N {
			src.Send(payload)
		}
		if err := src.WaitSettled(ctx, b.N); err != nil {
			b.Fatal(err)
		}
	})
	b.StopTimer()
	if got := len(sink.Messages()); got != b.N {
		b.Fatalf("sink got %d of %d", got, b.N)
	}
	if err := rt.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}
