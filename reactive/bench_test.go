package reactive_test

import (
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// sumSink requests `batch` up front (Unbounded: everything) and, for a finite
// batch, one more per element; it sums what it receives.
type sumSink struct {
	batch int64
	sub   reactive.Subscription
	sum   int
	done  bool
}

func (s *sumSink) OnSubscribe(sub reactive.Subscription) { s.sub = sub; sub.Request(s.batch) }

func (s *sumSink) OnNext(v int) {
	s.sum += v
	if s.batch != reactive.Unbounded {
		s.sub.Request(1)
	}
}
func (*sumSink) OnError(err error) { panic(err) }
func (s *sumSink) OnComplete()     { s.done = true }

func plusOne(v int) (int, error) { return v + 1, nil }

// BenchmarkPipeline measures the per-element cost (ns/op = per element) of
// FromSlice → Map(+1) → sink against the same three stages connected by Go
// channels, in one run so the ratio reads off directly.
func BenchmarkPipeline(b *testing.B) {
	input := func(n int) []int {
		vs := make([]int, n)
		for i := range vs {
			vs[i] = i
		}
		return vs
	}
	run := func(b *testing.B, batch int64) {
		b.Helper()
		vs := input(b.N)
		b.ReportAllocs()
		b.ResetTimer()
		sink := &sumSink{batch: batch}
		reactive.Map(reactive.FromSlice(vs...), plusOne).Subscribe(sink)
		b.StopTimer()
		if !sink.done {
			b.Fatal("pipeline did not complete")
		}
	}
	b.Run("reactive/request=unbounded", func(b *testing.B) { run(b, reactive.Unbounded) })
	b.Run("reactive/request=1", func(b *testing.B) { run(b, 1) })
	b.Run("reactive/request=32+1", func(b *testing.B) { run(b, 32) })

	channels := func(b *testing.B, buffer int) {
		b.Helper()
		vs := input(b.N)
		b.ReportAllocs()
		b.ResetTimer()
		src := make(chan int, buffer)
		mapped := make(chan int, buffer)
		go func() {
			for _, v := range vs {
				src <- v
			}
			close(src)
		}()
		go func() {
			for v := range src {
				r, _ := plusOne(v)
				mapped <- r
			}
			close(mapped)
		}()
		sum := 0
		for v := range mapped {
			sum += v
		}
		b.StopTimer()
		if b.N > 0 && sum == 0 && b.N > 1 {
			b.Fatal("no values")
		}
	}
	b.Run("channel/unbuffered", func(b *testing.B) { channels(b, 0) })
	b.Run("channel/buffer=32", func(b *testing.B) { channels(b, 32) })
}
