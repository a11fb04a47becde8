package reactive_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive/tck"
)

// The TCK runs of package reactive: every shipped publisher and subscriber. Timeouts: a
// generous DefaultTimeout (it is only waited out on failure) and short
// no-signal waits, which suffice for in-process publishers.
var tckOptions = tck.Options{
	DefaultTimeout:   2 * time.Second,
	NoSignalsTimeout: 25 * time.Millisecond,
	PollTimeout:      10 * time.Millisecond,
	GCTimeout:        50 * time.Millisecond,
}

func withOptions(f func(o *tck.Options)) tck.Options {
	o := tckOptions
	f(&o)
	return o
}

var errTCKFailed = errors.New("publisher in failed state")

const sliceLimit = 4096

// counter returns n ints 0..n-1 (endless for Unbounded) from a FromFunc
// source: streams too long for a slice.
func counter(n int64, start, step int) reactive.Publisher[int] {
	return coldCounter{n: n, start: start, step: step}
}

// coldCounter gives every subscriber its own count.
type coldCounter struct {
	n           int64
	start, step int
}

func (c coldCounter) Subscribe(s reactive.Subscriber[int]) {
	var i int64
	reactive.FromFunc(func(context.Context) (int, error) {
		if c.n != reactive.Unbounded && i >= c.n {
			return 0, io.EOF
		}
		v := c.start + int(i)*c.step
		i++
		return v, nil
	}).Subscribe(s)
}

func intSlice(n int64, start, step int) []int {
	vs := make([]int, n)
	for i := range vs {
		vs[i] = start + i*step
	}
	return vs
}

// ints returns 0..n-1 from FromSlice when it fits, else from counter.
func ints(n int64) reactive.Publisher[int] {
	if n <= sliceLimit {
		return reactive.FromSlice(intSlice(n, 0, 1)...)
	}
	return counter(n, 0, 1)
}

func failedInts(*testing.T) reactive.Publisher[int] { return reactive.Failed[int](errTCKFailed) }

func TestTCKFromSlice(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[int] {
			return reactive.FromSlice(intSlice(n, 0, 1)...)
		},
		CreateFailed: failedInts,
	}, withOptions(func(o *tck.Options) { o.MaxElements = 1 << 16 }))
}

// TestTCKFromSliceZeroSize covers the tests that need MaxInt32 elements: a
// slice of zero-size elements costs no memory.
func TestTCKFromSliceZeroSize(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[struct{}]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[struct{}] {
			return reactive.FromSlice(make([]struct{}, n)...)
		},
		CreateFailed: func(*testing.T) reactive.Publisher[struct{}] { return reactive.Failed[struct{}](errTCKFailed) },
	}, withOptions(func(o *tck.Options) { o.MaxElements = 1 << 40 }))
}

func TestTCKFromFunc(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create:       func(_ *testing.T, n int64) reactive.Publisher[int] { return counter(n, 0, 1) },
		CreateFailed: failedInts,
	}, tckOptions)
}

func TestTCKFromChan(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create: func(t *testing.T, n int64) reactive.Publisher[int] {
			t.Helper()
			if n <= sliceLimit {
				ch := make(chan int, n)
				for i := range n {
					ch <- int(i)
				}
				close(ch)
				return reactive.FromChan(ch)
			}
			// a feeder goroutine for long streams, stopped at the end of the test
			ch := make(chan int)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				defer close(ch)
				for i := int64(0); n == reactive.Unbounded || i < n; i++ {
					select {
					case ch <- int(i):
					case <-stop:
						return
					}
				}
			})
			t.Cleanup(func() { close(stop); wg.Wait() })
			return reactive.FromChan(ch)
		},
		CreateFailed: failedInts,
	}, withOptions(func(o *tck.Options) { o.MaxSubscribers = 1 }))
}

func TestTCKEmpty(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create:       func(*testing.T, int64) reactive.Publisher[int] { return reactive.Empty[int]() },
		CreateFailed: failedInts,
	}, withOptions(func(o *tck.Options) { o.MaxElements = tck.NoElements }))
}

func identity(v int) (int, error) { return v, nil }

func TestTCKMap(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[int] { return reactive.Map(ints(n), identity) },
		CreateFailed: func(*testing.T) reactive.Publisher[int] {
			return reactive.Map(reactive.Failed[int](errTCKFailed), identity)
		},
	}, tckOptions)
}

func TestTCKFilter(t *testing.T) {
	t.Parallel()
	even := func(v int) bool { return v%2 == 0 }
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[int] {
			// every other element is dropped: 2n upstream elements make n
			if n <= sliceLimit {
				return reactive.Filter(reactive.FromSlice(intSlice(2*n, 0, 1)...), even)
			}
			if n == reactive.Unbounded {
				return reactive.Filter(counter(reactive.Unbounded, 0, 1), even)
			}
			return reactive.Filter(counter(2*n, 0, 1), even)
		},
		CreateFailed: func(*testing.T) reactive.Publisher[int] {
			return reactive.Filter(reactive.Failed[int](errTCKFailed), even)
		},
	}, tckOptions)
}

// chunk is one outer element of the FlatMap factory: an inner FromSlice of
// size 0, 1 or 2 starting at start.
type chunk struct{ start, size int }

// chunks splits n elements into inner sizes cycling 1, 0, 2.
func chunks(n int64) reactive.Publisher[chunk] {
	pattern := []int{1, 0, 2}
	var emitted int64
	k := 0
	next := func() (chunk, bool) {
		if n != reactive.Unbounded && emitted >= n {
			return chunk{}, false
		}
		size := pattern[k%len(pattern)]
		k++
		if n != reactive.Unbounded {
			size = int(min(int64(size), n-emitted))
		}
		c := chunk{start: int(emitted), size: size}
		emitted += int64(size)
		return c, true
	}
	if n <= sliceLimit {
		var cs []chunk
		for c, ok := next(); ok; c, ok = next() {
			cs = append(cs, c)
		}
		return reactive.FromSlice(cs...)
	}
	return reactive.FromFunc(func(context.Context) (chunk, error) {
		if c, ok := next(); ok {
			return c, nil
		}
		return chunk{}, io.EOF
	})
}

func expand(c chunk) reactive.Publisher[int] {
	return reactive.FromSlice(intSlice(int64(c.size), c.start, 1)...)
}

func TestTCKFlatMap(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[int] { return reactive.FlatMap(chunks(n), expand) },
		CreateFailed: func(*testing.T) reactive.Publisher[int] {
			return reactive.FlatMap(reactive.Failed[chunk](errTCKFailed), expand)
		},
	}, tckOptions)
}

func TestTCKMerge(t *testing.T) {
	t.Parallel()
	tck.VerifyPublisher(t, tck.PublisherFactory[int]{
		Create: func(_ *testing.T, n int64) reactive.Publisher[int] {
			// n split over 3 sources; source k emits k, k+3, k+6, …
			srcs := make([]reactive.Publisher[int], 3)
			for k := range srcs {
				size := n
				if n != reactive.Unbounded {
					size = n / 3
					if int64(k) < n%3 {
						size++
					}
				}
				if size <= sliceLimit {
					srcs[k] = reactive.FromSlice(intSlice(size, k, 3)...)
				} else {
					srcs[k] = counter(size, k, 3)
				}
			}
			return reactive.Merge(srcs...)
		},
		CreateFailed: func(*testing.T) reactive.Publisher[int] {
			return reactive.Merge(reactive.Failed[int](errTCKFailed))
		},
	}, tckOptions)
}

// capture is a Publisher that only hands out the subscriber given to it.
type capture[T any] struct{ sub chan reactive.Subscriber[T] }

func (c capture[T]) Subscribe(s reactive.Subscriber[T]) { c.sub <- s }

func TestTCKToChanSubscriber(t *testing.T) {
	t.Parallel()
	tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[int]{
		Create: func(t *testing.T) reactive.Subscriber[int] {
			t.Helper()
			ctx, cancel := context.WithCancel(context.Background())
			c := capture[int]{sub: make(chan reactive.Subscriber[int], 1)}
			vals, errc := reactive.ToChan(ctx, c, 4)
			var wg sync.WaitGroup
			wg.Go(func() {
				for range vals {
				}
			})
			t.Cleanup(func() {
				cancel()
				wg.Wait()
				for range errc {
				}
			})
			return <-c.sub
		},
		Element: func(i int) int { return i },
	}, tckOptions)
}

// TestTCKToChanSubscriberNillable runs the blackbox verification with a
// pointer element type, so the rule 2.13 onNext(nil) test applies.
func TestTCKToChanSubscriberNillable(t *testing.T) {
	t.Parallel()
	tck.VerifySubscriberBlackbox(t, tck.BlackboxFactory[*int]{
		Create: func(t *testing.T) reactive.Subscriber[*int] {
			t.Helper()
			ctx, cancel := context.WithCancel(context.Background())
			c := capture[*int]{sub: make(chan reactive.Subscriber[*int], 1)}
			vals, errc := reactive.ToChan(ctx, c, 4)
			var wg sync.WaitGroup
			wg.Go(func() {
				for range vals {
				}
			})
			t.Cleanup(func() {
				cancel()
				wg.Wait()
				for range errc {
				}
			})
			return <-c.sub
		},
		Element: func(i int) *int { return &i },
	}, tckOptions)
}
