package reactive_test

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

func TestDemandAddSaturatesAndRejectsNonPositive(t *testing.T) {
	var d reactive.Demand
	prev, err := d.Add(3)
	require.NoError(t, err)
	assert.Equal(t, int64(0), prev)

	for _, n := range []int64{0, -1, math.MinInt64} {
		_, err = d.Add(n)
		require.ErrorIs(t, err, reactive.ErrNonPositiveRequest)
		assert.Contains(t, err.Error(), "3.9")
	}
	assert.Equal(t, int64(3), d.Outstanding(), "a rejected request leaves demand unchanged")

	_, err = d.Add(math.MaxInt64 / 2)
	require.NoError(t, err)
	_, err = d.Add(math.MaxInt64 / 2)
	require.NoError(t, err)
	assert.Equal(t, reactive.Unbounded, d.Outstanding(), "additions saturate instead of wrapping")
	_, err = d.Add(math.MaxInt64)
	require.NoError(t, err)
	assert.Equal(t, reactive.Unbounded, d.Outstanding())
}

func TestDemandTake(t *testing.T) {
	var d reactive.Demand
	assert.Equal(t, int64(0), d.Take(1), "nothing to take")
	_, _ = d.Add(5)
	assert.Equal(t, int64(2), d.Take(2))
	assert.Equal(t, int64(3), d.Take(10))
	assert.Equal(t, int64(0), d.Outstanding())

	_, _ = d.Add(reactive.Unbounded)
	assert.Equal(t, int64(7), d.Take(7))
	assert.Equal(t, reactive.Unbounded, d.Outstanding(), "unbounded demand is never decremented")
}

func TestDemandTopUp(t *testing.T) {
	var d reactive.Demand
	assert.Equal(t, int64(4), d.TopUp(4))
	assert.Equal(t, int64(0), d.TopUp(2))
	d.Take(3)
	assert.Equal(t, int64(3), d.TopUp(4))
	d.Cancel()
	assert.Equal(t, int64(0), d.TopUp(10))
}

func TestDemandCancel(t *testing.T) {
	var d reactive.Demand
	_, _ = d.Add(2)
	assert.True(t, d.Cancel())
	assert.False(t, d.Cancel(), "only the first cancel reports true")
	assert.True(t, d.Cancelled())
	assert.Equal(t, int64(0), d.Outstanding())
	_, err := d.Add(0)
	require.NoError(t, err, "requests after cancel are no-ops (rule 3.6)")
	assert.Equal(t, int64(0), d.Take(1))
}

func TestDemandConcurrentAddTake(t *testing.T) {
	var d reactive.Demand
	var wg sync.WaitGroup
	var taken sync.Map
	for g := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 1000 {
				_, _ = d.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			var n int64
			for range 2000 {
				n += d.Take(1)
			}
			taken.Store(g, n)
		}()
	}
	wg.Wait()
	var sum int64
	taken.Range(func(_, v any) bool {
		n, ok := v.(int64)
		require.True(t, ok)
		sum += n
		return true
	})
	assert.Equal(t, int64(8000), sum+d.Outstanding(), "no unit lost or duplicated")
}

func TestTrampolineSerializesAndLosesNoWakeUp(t *testing.T) {
	var tr reactive.Trampoline
	var mu sync.Mutex
	active, runs := 0, 0
	var pending int
	drain := func() {
		mu.Lock()
		active++
		if active > 1 {
			mu.Unlock()
			panic("overlapping drains")
		}
		runs++
		pending = 0
		mu.Unlock()
		mu.Lock()
		active--
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				mu.Lock()
				pending++
				mu.Unlock()
				tr.Run(drain)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 0, pending, "every scheduled wake-up was drained")
	assert.Positive(t, runs)
}

func TestTrampolineRecursionDepthOne(t *testing.T) {
	var tr reactive.Trampoline
	depth, maxDepth, calls := 0, 0, 0
	var drain func()
	drain = func() {
		depth++
		maxDepth = max(maxDepth, depth)
		calls++
		if calls < 10 {
			tr.Run(drain) // re-entrant call only marks "run again"
		}
		depth--
	}
	tr.Run(drain)
	assert.Equal(t, 1, maxDepth)
	assert.Equal(t, 10, calls)
}

func TestMustNotBeNil(t *testing.T) {
	assertNilPanic := func(t *testing.T, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			err, ok := r.(error)
			require.True(t, ok, "panic value is an error: %v", r)
			require.ErrorIs(t, err, reactive.ErrNilArgument)
		}()
		f()
	}
	assertNilPanic(t, func() { reactive.MustNotBeNil[*int](nil) })
	assertNilPanic(t, func() { reactive.MustNotBeNil[error](nil) })
	assertNilPanic(t, func() { reactive.MustNotBeNil[map[string]int](nil) })
	assertNilPanic(t, func() { reactive.MustNotBeNil[func()](nil) })
	assert.NotPanics(t, func() { reactive.MustNotBeNil[[]byte](nil) }, "slices are exempt")
	assert.NotPanics(t, func() { reactive.MustNotBeNil(0) })
	assert.True(t, strings.HasPrefix(reactive.ErrNilArgument.Error(), "reactive:"))
	assert.NotErrorIs(t, reactive.ErrPanic, reactive.ErrNilArgument)
}
