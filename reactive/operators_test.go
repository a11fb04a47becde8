package reactive_test

import (
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

func TestMap(t *testing.T) {
	p := reactive.Map(reactive.FromSlice(1, 2, 3), func(v int) (string, error) { return strconv.Itoa(v * 10), nil })
	r := newRecorder[string](0)
	p.Subscribe(r)
	r.subscription().Request(1)
	vals, _, _ := r.snapshot()
	assert.Equal(t, []string{"10"}, vals)
	r.subscription().Request(5)
	vals, done, err := r.snapshot()
	assert.Equal(t, []string{"10", "20", "30"}, vals)
	require.NoError(t, err)
	assert.True(t, done)
}

// countingSource counts what was requested from it.
func countingSource(n int, requested *atomic.Int64) reactive.Publisher[int] {
	var i atomic.Int64
	return reactive.FromFunc(func(context.Context) (int, error) {
		requested.Add(1)
		if v := i.Add(1); v <= int64(n) {
			return int(v), nil
		}
		return 0, io.EOF
	})
}

func TestMapErrorAndPanicCancelUpstream(t *testing.T) {
	var pulled atomic.Int64
	p := reactive.Map(countingSource(1000, &pulled), func(v int) (int, error) {
		if v == 3 {
			return 0, errBoom
		}
		return v, nil
	})
	r := newRecorder[int](reactive.Unbounded)
	p.Subscribe(r)
	r.wait(t)
	vals, _, err := r.snapshot()
	require.ErrorIs(t, err, errBoom)
	assert.Equal(t, []int{1, 2}, vals)
	assert.Less(t, pulled.Load(), int64(100), "upstream was cancelled")

	p = reactive.Map(reactive.FromSlice(1, 2), func(v int) (int, error) {
		if v == 2 {
			panic("map bug")
		}
		return v, nil
	})
	r = newRecorder[int](reactive.Unbounded)
	p.Subscribe(r)
	_, _, err = r.snapshot()
	require.ErrorIs(t, err, reactive.ErrPanic)
}

// failOn returns a Map function that passes its element through, except want, on which it
// fails with errBoom.
func failOn(want int) func(int) (int, error) {
	return func(v int) (int, error) {
		if v == want {
			return 0, errBoom
		}
		return v, nil
	}
}

// An error goes after the elements that came before it, whether it is the operator's own
// or upstream's. FromSlice emits synchronously, inside the operator's Request, so every
// element before the failing one is still queued when the error arrives: the order here
// does not depend on timing.
func TestErrorFollowsTheElementsBeforeIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    reactive.Publisher[int]
		want []int
		err  error
	}{
		{"Map, its function's error", reactive.Map(reactive.FromSlice(1, 2, 3, 4, 5), failOn(3)), []int{1, 2}, errBoom},
		{"Map, its function's panic", reactive.Map(reactive.FromSlice(1, 2, 3), func(v int) (int, error) {
			if v == 2 {
				panic("map bug")
			}
			return v, nil
		}), []int{1}, reactive.ErrPanic},
		{"Map, upstream's error", reactive.Map(reactive.Map(reactive.FromSlice(1, 2, 3, 4), failOn(3)), failOn(-1)), []int{1, 2}, errBoom},
		{"Filter, its function's panic", reactive.Filter(reactive.FromSlice(1, 2, 3, 4, 5), func(v int) bool {
			if v == 4 {
				panic("filter bug")
			}
			return v%2 == 1
		}), []int{1, 3}, reactive.ErrPanic},
		{"Filter, upstream's error", reactive.Filter(reactive.Map(reactive.FromSlice(1, 2, 3, 4), failOn(4)), func(v int) bool { return v != 2 }), []int{1, 3}, errBoom},
		{"FlatMap, an inner's error", reactive.FlatMap(reactive.FromSlice(0), func(int) reactive.Publisher[int] {
			return reactive.Map(reactive.FromSlice(1, 2, 3), failOn(3))
		}), []int{1, 2}, errBoom},
		{"FlatMap, upstream's error", reactive.FlatMap(reactive.Map(reactive.FromSlice(1, 2, 3), failOn(3)), func(v int) reactive.Publisher[int] {
			return reactive.FromSlice(v*10, v*10+1)
		}), []int{10, 11, 20, 21}, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder[int](reactive.Unbounded)
			tc.p.Subscribe(r)
			r.wait(t)
			vals, completed, err := r.snapshot()
			assert.Equal(t, tc.want, vals)
			require.ErrorIs(t, err, tc.err)
			assert.False(t, completed)
		})
	}
}

// With demand of one at a time, the error comes with no further Request once the failing
// element arrives: nothing is queued then.
func TestMapErrorNeedsNoFurtherDemand(t *testing.T) {
	r := newRecorder[int](0)
	reactive.Map(reactive.FromSlice(1, 2, 3, 4), failOn(3)).Subscribe(r)
	for range 3 {
		r.subscription().Request(1)
	}
	vals, _, err := r.snapshot()
	assert.Equal(t, []int{1, 2}, vals)
	require.ErrorIs(t, err, errBoom)
}

func TestMapBoundsUpstreamDemand(t *testing.T) {
	var pulled atomic.Int64
	p := reactive.Map(countingSource(1<<20, &pulled), func(v int) (int, error) { return v, nil })
	r := newRecorder[int](0)
	p.Subscribe(r)
	r.subscription().Request(reactive.Unbounded)
	testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) >= 100 }, "100 values")
	r.subscription().Cancel()
	vals, _, err := r.snapshot()
	require.NoError(t, err)
	for i, v := range vals {
		require.Equal(t, i+1, v)
	}
}

func TestFilterPreservesDemand(t *testing.T) {
	p := reactive.Filter(reactive.FromSlice(1, 2, 3, 4, 5, 6, 7), func(v int) bool { return v%3 == 0 })
	r := newRecorder[int](0)
	p.Subscribe(r)
	r.subscription().Request(1)
	vals, done, _ := r.snapshot()
	assert.Equal(t, []int{3}, vals, "two dropped elements were replaced by upstream requests")
	assert.False(t, done)
	r.subscription().Request(1)
	vals, _, _ = r.snapshot()
	assert.Equal(t, []int{3, 6}, vals)
	r.subscription().Request(1)
	vals, done, err := r.snapshot()
	assert.Equal(t, []int{3, 6}, vals)
	require.NoError(t, err)
	assert.True(t, done)
}

func TestFlatMapConcat(t *testing.T) {
	var outerPulled atomic.Int64
	p := reactive.FlatMap(countingSource(3, &outerPulled), func(v int) reactive.Publisher[string] {
		out := make([]string, v)
		for i := range out {
			out[i] = strconv.Itoa(v) + "." + strconv.Itoa(i)
		}
		return reactive.FromSlice(out...)
	})
	r := newRecorder[string](0)
	p.Subscribe(r)
	r.subscription().Request(2)
	testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == 2 }, "two values")
	assert.Equal(t, int64(2), outerPulled.Load(), "outer requested one at a time, after the inner completed")
	r.subscription().Request(10)
	r.wait(t)
	vals, done, err := r.snapshot()
	assert.Equal(t, []string{"1.0", "2.0", "2.1", "3.0", "3.1", "3.2"}, vals)
	require.NoError(t, err)
	assert.True(t, done)
}

func TestFlatMapInnerErrorAndNilPublisher(t *testing.T) {
	p := reactive.FlatMap(reactive.FromSlice(1, 2), func(v int) reactive.Publisher[int] {
		if v == 2 {
			return reactive.Failed[int](errBoom)
		}
		return reactive.FromSlice(v)
	})
	r := newRecorder[int](reactive.Unbounded)
	p.Subscribe(r)
	vals, _, err := r.snapshot()
	assert.Equal(t, []int{1}, vals)
	require.ErrorIs(t, err, errBoom)

	p = reactive.FlatMap(reactive.FromSlice(1), func(int) reactive.Publisher[int] { return nil })
	r = newRecorder[int](1)
	p.Subscribe(r)
	_, _, err = r.snapshot()
	require.ErrorIs(t, err, reactive.ErrNilArgument)
}

func TestMergeRoundRobinAndCompletion(t *testing.T) {
	p := reactive.Merge(reactive.FromSlice(1, 2, 3), reactive.FromSlice(10, 20), reactive.Empty[int]())
	r := newRecorder[int](0)
	p.Subscribe(r)
	r.subscription().Request(100)
	vals, done, err := r.snapshot()
	assert.ElementsMatch(t, []int{1, 2, 3, 10, 20}, vals)
	require.NoError(t, err)
	assert.True(t, done)

	r = newRecorder[int](reactive.Unbounded)
	reactive.Merge[int]().Subscribe(r)
	_, done, _ = r.snapshot()
	assert.True(t, done, "no sources: empty")
}

func TestMergeErrorCancelsOthers(t *testing.T) {
	var pulled atomic.Int64
	p := reactive.Merge(countingSource(1<<20, &pulled), reactive.Failed[int](errBoom))
	r := newRecorder[int](reactive.Unbounded)
	p.Subscribe(r)
	r.wait(t)
	_, _, err := r.snapshot()
	require.ErrorIs(t, err, errBoom)
}

func TestMergeWindowBoundsPerSourceRequests(t *testing.T) {
	var a, b atomic.Int64
	p := reactive.Merge(countingSource(1<<20, &a), countingSource(1<<20, &b))
	r := newRecorder[int](0)
	p.Subscribe(r)
	r.subscription().Request(1)
	testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == 1 }, "one value")
	// demand 1: each source gets a window of 1
	assert.LessOrEqual(t, a.Load(), int64(1))
	assert.LessOrEqual(t, b.Load(), int64(1))
	r.subscription().Cancel()
}

// requestLog is an upstream that emits only what the test pushes; it records every
// Request(n) it receives.
type requestLog struct {
	mu       sync.Mutex
	sub      reactive.Subscriber[int]
	requests []int64
	pushed   int64
}

func (p *requestLog) Subscribe(s reactive.Subscriber[int]) {
	p.mu.Lock()
	p.sub = s
	p.mu.Unlock()
	s.OnSubscribe(p)
}

func (p *requestLog) Request(n int64) {
	p.mu.Lock()
	p.requests = append(p.requests, n)
	p.mu.Unlock()
}

func (*requestLog) Cancel() {}

// log returns the requests received so far, in order.
func (p *requestLog) log() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.requests...)
}

// outstanding returns what was requested and not pushed yet (reactive.Unbounded once the
// requests add up to it).
func (p *requestLog) outstanding() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sum int64
	for _, n := range p.requests {
		if n >= reactive.Unbounded-sum {
			return reactive.Unbounded
		}
		sum += n
	}
	return sum - p.pushed
}

// push emits v; the test pushes only within the outstanding demand.
func (p *requestLog) push(v int) {
	p.mu.Lock()
	s := p.sub
	p.pushed++
	p.mu.Unlock()
	s.OnNext(v)
}

// Map, Filter and FlatMap (its inner publishers) request upstream at most 32 elements ahead
// of emission (package doc, "Bounded buffers"): unbounded downstream demand becomes a window
// of 32, topped up as elements go downstream, so what is requested and not yet received
// never exceeds 32, and so neither does the queue it fills.
func TestPipeOperatorsRequestAtMost32Ahead(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(reactive.Publisher[int]) reactive.Publisher[int]
		want int // values downstream of the 100 pushed
	}{
		{"Map", func(p reactive.Publisher[int]) reactive.Publisher[int] {
			return reactive.Map(p, func(v int) (int, error) { return v, nil })
		}, 100},
		{"Filter", func(p reactive.Publisher[int]) reactive.Publisher[int] {
			return reactive.Filter(p, func(v int) bool { return v%2 == 0 })
		}, 50},
		{"FlatMap", func(p reactive.Publisher[int]) reactive.Publisher[int] {
			return reactive.FlatMap(reactive.FromSlice(0), func(int) reactive.Publisher[int] { return p })
		}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &requestLog{}
			r := newRecorder[int](reactive.Unbounded)
			tc.op(up).Subscribe(r)
			testwait.Eventually(t, eventuallyWithin, func() bool { return up.outstanding() > 0 }, "nothing requested upstream")
			r.subscription().Request(1) // the window is full: nothing more to request upstream
			require.Equal(t, []int64{32}, up.log(), "unbounded demand becomes a window of 32")
			for v := 1; v <= 100; v++ {
				testwait.Eventually(t, eventuallyWithin, func() bool { return up.outstanding() > 0 }, "the window was not topped up after %d", v-1)
				up.push(v)
				require.LessOrEqual(t, up.outstanding(), int64(32), "requested ahead after %d", v)
			}
			testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == tc.want }, "values downstream")
			for _, n := range up.log() {
				require.LessOrEqual(t, n, int64(32))
			}
			r.subscription().Cancel()
		})
	}
}

// Merge gives each source a window of min(downstream demand, 16), and tops a source up once
// 75% of its window was consumed (12 of 16), not before.
func TestMergeWindowIsMinOfDemandAnd16ToppedUpAt75Percent(t *testing.T) {
	t.Run("demand below 16", func(t *testing.T) {
		a, b := &requestLog{}, &requestLog{}
		r := newRecorder[int](0)
		reactive.Merge[int](a, b).Subscribe(r)
		r.subscription().Request(3)
		testwait.Eventually(t, eventuallyWithin, func() bool { return a.outstanding() > 0 && b.outstanding() > 0 }, "nothing requested")
		assert.Equal(t, []int64{3}, a.log())
		assert.Equal(t, []int64{3}, b.log())
		r.subscription().Cancel()
	})
	t.Run("unbounded demand", func(t *testing.T) {
		a, b := &requestLog{}, &requestLog{}
		r := newRecorder[int](reactive.Unbounded)
		reactive.Merge[int](a, b).Subscribe(r)
		testwait.Eventually(t, eventuallyWithin, func() bool { return a.outstanding() > 0 && b.outstanding() > 0 }, "nothing requested")
		require.Equal(t, []int64{16}, a.log())
		require.Equal(t, []int64{16}, b.log())
		for v := 1; v <= 11; v++ {
			a.push(v)
		}
		testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == 11 }, "11 values")
		assert.Equal(t, []int64{16}, a.log(), "11 of 16 consumed: no top-up yet")
		a.push(12)
		testwait.Eventually(t, eventuallyWithin, func() bool { return len(a.log()) == 2 }, "no top-up at 12 of 16 consumed")
		assert.Equal(t, []int64{16, 12}, a.log(), "topped up to the window")
		assert.Equal(t, []int64{16}, b.log(), "the other source's window is untouched")
		r.subscription().Cancel()
	})
}

// Merge emits round-robin over the sources that have elements ready: FromSlice emits inside
// the request Merge makes, so every source's elements are queued before the first emission,
// and the order alternates between the sources, skipping one that has run out.
func TestMergeIsRoundRobinOverReadySources(t *testing.T) {
	p := reactive.Merge(reactive.FromSlice(1, 2, 3), reactive.FromSlice(10), reactive.FromSlice(100, 200, 300))
	r := newRecorder[int](0)
	p.Subscribe(r)
	r.subscription().Request(100)
	vals, done, err := r.snapshot()
	assert.Equal(t, []int{1, 10, 100, 2, 200, 3, 300}, vals)
	require.NoError(t, err)
	assert.True(t, done)
}

func TestOperatorsRejectNilArguments(t *testing.T) {
	src := reactive.FromSlice(1)
	for name, f := range map[string]func(){
		"Map nil publisher": func() { reactive.Map[int, int](nil, func(v int) (int, error) { return v, nil }) },
		"Map nil function":  func() { reactive.Map[int, int](src, nil) },
		"Filter nil":        func() { reactive.Filter(src, nil) },
		"FlatMap nil":       func() { reactive.FlatMap[int, int](src, nil) },
		"Merge nil source":  func() { reactive.Merge(src, nil) },
		"FromFunc nil":      func() { reactive.FromFunc[int](nil) },
		"FromChan nil":      func() { reactive.FromChan[int](nil) },
		"ToChan nil":        func() { reactive.ToChan[int](t.Context(), nil, 1) },
		"NewOutlet nil sub": func() { reactive.NewOutlet[int](nil, nil, nil) },
		"Inlet nil":         func() { reactive.NewInlet(1).OnSubscribe(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				err, ok := recover().(error)
				require.True(t, ok)
				require.ErrorIs(t, err, reactive.ErrNilArgument)
			}()
			f()
		})
	}
}

// FlatMap requests its upstream one element at a time (package doc: the next element only
// after the current inner completed), however often downstream asks.
func TestFlatMapRequestsItsUpstreamOneAtATime(t *testing.T) {
	up := &requestLog{}
	r := newRecorder[int](0)
	reactive.FlatMap[int, int](up, func(v int) reactive.Publisher[int] { return reactive.FromSlice(v, v) }).Subscribe(r)
	r.subscription().Request(1)
	testwait.Eventually(t, eventuallyWithin, func() bool { return up.outstanding() > 0 }, "nothing requested upstream")
	r.subscription().Request(5)
	r.subscription().Request(5)
	assert.Equal(t, []int64{1}, up.log(), "one element while none arrived")
	up.push(7)
	testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == 2 }, "the inner's two values")
	testwait.Eventually(t, eventuallyWithin, func() bool { return up.outstanding() > 0 }, "the next element requested")
	assert.Equal(t, []int64{1, 1}, up.log(), "the next one only after the inner completed")
	r.subscription().Cancel()
}

// emitOnCancel is an inner publisher with one element in flight: it sends v when it is
// cancelled, as a publisher may until the cancel takes effect (rule 2.8).
type emitOnCancel struct {
	v   int
	sub reactive.Subscriber[int]
}

func (p *emitOnCancel) Subscribe(s reactive.Subscriber[int]) {
	p.sub = s
	s.OnSubscribe(p)
}

func (*emitOnCancel) Request(int64) {}

func (p *emitOnCancel) Cancel() { p.sub.OnNext(p.v) }

// An element that FlatMap's inner sends after the stream failed came after the error: it is
// dropped, not emitted before the error. Here the upstream fails and the inner sends its
// element from within the cancel that the failure makes.
func TestFlatMapDropsAnInnerElementAfterTheError(t *testing.T) {
	up := &requestLog{}
	inner := &emitOnCancel{v: 7}
	r := newRecorder[int](reactive.Unbounded)
	reactive.FlatMap[int, int](up, func(int) reactive.Publisher[int] { return inner }).Subscribe(r)
	require.Equal(t, int64(1), up.outstanding())
	up.push(1)
	up.sub.OnError(errBoom)
	vals, _, err := r.snapshot()
	assert.Empty(t, vals)
	require.ErrorIs(t, err, errBoom)
}
