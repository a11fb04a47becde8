package reactive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

var errBoom = errors.New("boom")

func TestFromSliceDeliversInOrderAgainstDemand(t *testing.T) {
	p := reactive.FromSlice(1, 2, 3)
	r := newRecorder[int](0)
	p.Subscribe(r)
	vals, done, _ := r.snapshot()
	assert.Empty(t, vals, "nothing before a request")
	assert.False(t, done)

	r.subscription().Request(2)
	vals, done, _ = r.snapshot()
	assert.Equal(t, []int{1, 2}, vals)
	assert.False(t, done)

	r.subscription().Request(1)
	vals, done, err := r.snapshot()
	assert.Equal(t, []int{1, 2, 3}, vals)
	require.NoError(t, err)
	assert.True(t, done, "completion follows the last element")

	r2 := newRecorder[int](reactive.Unbounded)
	p.Subscribe(r2)
	vals, done, _ = r2.snapshot()
	assert.Equal(t, []int{1, 2, 3}, vals, "cold: a second subscriber gets everything")
	assert.True(t, done)
}

func TestNonPositiveRequestSignalsError(t *testing.T) {
	for _, n := range []int64{0, -5} {
		r := newRecorder[int](0)
		reactive.FromSlice(1, 2).Subscribe(r)
		r.subscription().Request(n)
		vals, _, err := r.snapshot()
		assert.Empty(t, vals)
		require.ErrorIs(t, err, reactive.ErrNonPositiveRequest)
		assert.Contains(t, err.Error(), "3.9")
		r.subscription().Request(1)
		vals, _, _ = r.snapshot()
		assert.Empty(t, vals, "the subscription is over")
	}
}

func TestSubscribeNilPanics(t *testing.T) {
	pubs := map[string]reactive.Publisher[int]{
		"FromSlice": reactive.FromSlice(1),
		"FromFunc":  reactive.FromFunc(func(context.Context) (int, error) { return 0, io.EOF }),
		"FromChan":  reactive.FromChan(make(chan int)),
		"Empty":     reactive.Empty[int](),
		"Failed":    reactive.Failed[int](errBoom),
		"Map":       reactive.Map(reactive.FromSlice(1), func(v int) (int, error) { return v, nil }),
		"Filter":    reactive.Filter(reactive.FromSlice(1), func(int) bool { return true }),
		"FlatMap":   reactive.FlatMap(reactive.FromSlice(1), func(v int) reactive.Publisher[int] { return reactive.FromSlice(v) }),
		"Merge":     reactive.Merge(reactive.FromSlice(1)),
	}
	for name, p := range pubs {
		t.Run(name, func(t *testing.T) {
			defer func() {
				err, ok := recover().(error)
				require.True(t, ok)
				require.ErrorIs(t, err, reactive.ErrNilArgument)
			}()
			p.Subscribe(nil)
		})
	}
	assert.Panics(t, func() { reactive.Failed[int](nil) })
}

func TestEmptyAndFailedNeedNoDemand(t *testing.T) {
	r := newRecorder[int](0)
	reactive.Empty[int]().Subscribe(r)
	_, done, err := r.snapshot()
	require.NoError(t, err)
	assert.True(t, done)

	r = newRecorder[int](0)
	reactive.Failed[int](errBoom).Subscribe(r)
	_, done, err = r.snapshot()
	require.ErrorIs(t, err, errBoom)
	assert.False(t, done)
}

func TestSubscriberPanicCancelsAndIsReported(t *testing.T) {
	var cancelled atomic.Bool
	r := newRecorder[int](0)
	r.onNext = func(*recorder[int], int) { panic("subscriber bug") }
	out := reactive.NewOutlet[int](r, func(canEmit bool) (int, reactive.PollStatus, error) {
		if canEmit {
			return 7, reactive.PollReady, nil
		}
		return 0, reactive.PollEmpty, nil
	}, func() { cancelled.Store(true) })
	out.Start()
	out.Request(3)
	vals, _, _ := r.snapshot()
	assert.Equal(t, []int{7}, vals, "no signal after the panic")
	assert.True(t, cancelled.Load(), "the source was cancelled")
	require.ErrorIs(t, out.Err(), reactive.ErrPanic)
	assert.Contains(t, out.Err().Error(), "subscriber bug")
	select {
	case <-out.Done():
	default:
		t.Fatal("Done not closed after the panic")
	}
}

func TestOutletRejectsElementWithoutDemand(t *testing.T) {
	r := newRecorder[int](0)
	out := reactive.NewOutlet[int](r, func(bool) (int, reactive.PollStatus, error) {
		return 1, reactive.PollReady, nil // broken source: ignores canEmit
	}, nil)
	out.Start()
	vals, _, err := r.snapshot()
	assert.Empty(t, vals)
	require.ErrorIs(t, err, reactive.ErrMissingDemand)
}

// The Outlet drains only between Start and the end of the subscription: a Signal before
// Start waits for Start's drain (no OnSubscribe before Start), and once the subscription
// ended a Request or a Signal runs nothing. So onCancel runs once for a cancel and never
// for a completion, which records no failure.
func TestOutletDrainsOnlyBetweenStartAndTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		complete bool
		cancels  int32
	}{
		{"cancelled", false, 1},
		{"completed", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cancels atomic.Int32
			r := newRecorder[int](0)
			out := reactive.NewOutlet[int](r, func(bool) (int, reactive.PollStatus, error) {
				if tc.complete {
					return 0, reactive.PollDone, nil
				}
				return 0, reactive.PollEmpty, nil
			}, func() { cancels.Add(1) })
			out.Signal()
			assert.Nil(t, r.subscription(), "no OnSubscribe before Start")
			out.Start()
			require.NotNil(t, r.subscription())
			if !tc.complete {
				out.Cancel()
			}
			out.Request(1)
			out.Signal()
			assert.Equal(t, tc.cancels, cancels.Load(), "onCancel calls")
			_, completed, err := r.snapshot()
			require.NoError(t, err)
			assert.Equal(t, tc.complete, completed)
			require.NoError(t, out.Err(), "nothing panicked")
			<-out.Done()
		})
	}
}

func TestOutletCancelFromOnNextStopsAtOnce(t *testing.T) {
	i := 0
	r := newRecorder[int](0)
	r.onNext = func(r *recorder[int], _ int) { r.subscription().Cancel() }
	out := reactive.NewOutlet[int](r, func(canEmit bool) (int, reactive.PollStatus, error) {
		if !canEmit {
			return 0, reactive.PollEmpty, nil
		}
		i++
		return i, reactive.PollReady, nil
	}, nil)
	out.Start()
	out.Request(10)
	vals, _, _ := r.snapshot()
	assert.Equal(t, []int{1}, vals)
	<-out.Done()
}

func TestFromFuncOnePerDemandAndEOF(t *testing.T) {
	var calls atomic.Int64
	p := reactive.FromFunc(func(context.Context) (int, error) {
		n := calls.Add(1)
		if n > 3 {
			return 0, fmt.Errorf("wrapped: %w", io.EOF)
		}
		return int(n), nil
	})
	r := newRecorder[int](0)
	p.Subscribe(r)
	r.subscription().Request(2)
	testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == 2 }, "two values")
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(2), calls.Load(), "next is called once per unit of demand")
	r.subscription().Request(5)
	r.wait(t)
	vals, done, err := r.snapshot()
	assert.Equal(t, []int{1, 2, 3}, vals)
	require.NoError(t, err)
	assert.True(t, done)
}

func TestFromFuncErrorAndCancel(t *testing.T) {
	r := newRecorder[int](1)
	reactive.FromFunc(func(context.Context) (int, error) { return 0, errBoom }).Subscribe(r)
	r.wait(t)
	_, _, err := r.snapshot()
	require.ErrorIs(t, err, errBoom)

	started := make(chan struct{})
	var sawCancel atomic.Bool
	r = newRecorder[int](1)
	reactive.FromFunc(func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return 0, ctx.Err()
	}).Subscribe(r)
	<-started
	out, ok := r.subscription().(interface{ Done() <-chan struct{} })
	require.True(t, ok)
	r.subscription().Cancel()
	<-out.Done()
	assert.True(t, sawCancel.Load(), "the goroutine exited before Done closed")
}

func TestFromChanUnicastAndLeavesValues(t *testing.T) {
	ch := make(chan int, 4)
	ch <- 1
	ch <- 2
	ch <- 3
	p := reactive.FromChan(ch)
	r := newRecorder[int](1)
	p.Subscribe(r)
	testwait.Eventually(t, eventuallyWithin, func() bool { v, _, _ := r.snapshot(); return len(v) == 1 }, "one value")

	r2 := newRecorder[int](1)
	p.Subscribe(r2)
	_, _, err := r2.snapshot()
	require.ErrorIs(t, err, reactive.ErrAlreadySubscribed)
	assert.Equal(t, 1, r2.subs, "OnSubscribe before OnError")

	out, ok := r.subscription().(interface{ Done() <-chan struct{} })
	require.True(t, ok)
	r.subscription().Cancel()
	<-out.Done()
	assert.Len(t, ch, 2, "values without demand stay in the channel")

	close(ch)
	ch2 := make(chan int, 1)
	ch2 <- 9
	close(ch2)
	r3 := newRecorder[int](5)
	reactive.FromChan(ch2).Subscribe(r3)
	r3.wait(t)
	vals, done, err := r3.snapshot()
	assert.Equal(t, []int{9}, vals)
	require.NoError(t, err)
	assert.True(t, done)
}

func TestToChan(t *testing.T) {
	ctx := t.Context()
	vals, errc := reactive.ToChan(ctx, reactive.FromSlice(1, 2, 3, 4, 5), 2)
	var got []int
	for v := range vals {
		got = append(got, v)
	}
	assert.Equal(t, []int{1, 2, 3, 4, 5}, got)
	require.NoError(t, <-errc)

	vals, errc = reactive.ToChan(ctx, reactive.Failed[int](errBoom), 1)
	for range vals {
		t.Fatal("no values expected")
	}
	require.ErrorIs(t, <-errc, errBoom)
	_, open := <-errc
	assert.False(t, open, "the error channel closes after one value")

	cctx, cancel := context.WithCancel(ctx)
	var cancelled atomic.Bool
	infinite := reactive.FromFunc(func(c context.Context) (int, error) {
		if c.Err() != nil {
			cancelled.Store(true)
		}
		return 1, nil
	})
	vals, errc = reactive.ToChan(cctx, infinite, 4)
	<-vals
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
}

func TestToChanBuffersAtMostBuffer(t *testing.T) {
	var calls atomic.Int64
	p := reactive.FromFunc(func(context.Context) (int, error) { return int(calls.Add(1)), nil })
	ctx, cancel := context.WithCancel(t.Context())
	vals, errc := reactive.ToChan(ctx, p, 3)
	testwait.Eventually(t, eventuallyWithin, func() bool { return calls.Load() >= 3 }, "buffer filled")
	time.Sleep(20 * time.Millisecond)
	assert.LessOrEqual(t, calls.Load(), int64(4), "3 buffered + at most 1 handed to the receiver")
	assert.Equal(t, 1, <-vals)
	cancel()
	for range vals {
		_ = 0 // drain until closed
	}
	require.ErrorIs(t, <-errc, context.Canceled)
}
