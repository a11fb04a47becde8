package messaging_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
)

// A 1:1 processor holds at most min(downstream demand, prefetch) messages (package doc): it
// requests upstream only what brings what it holds, queued or running, up to that bound.
// The upstream of the processor records what it is asked for; the stage's function holds
// the messages it is given until the test releases them, and its outputs are not settled.
func TestProcessor_HoldsAtMostMinOfDemandAndPrefetch(t *testing.T) {
	for _, tc := range []struct {
		name             string
		demand, prefetch int64
		held             int64 // min(demand, prefetch)
		next             int64 // requested once the held messages went downstream
	}{
		{name: "downstream demand above the prefetch", demand: 10, prefetch: 3, held: 3, next: 3},
		{name: "downstream demand below the prefetch", demand: 2, prefetch: 3, held: 2, next: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := newRuntime(t, nil)
			up := &demandLog{}
			messaging.Produce[string](rt, "in", up)
			var running atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			releaseAll := func() { once.Do(func() { close(release) }) }
			t.Cleanup(releaseAll) // runs before the runtime's shutdown: cleanups run last in, first out
			messaging.Process(rt, "in", "out", func(ctx context.Context, p string) (string, error) {
				running.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return p, nil
			}, messaging.WithPrefetch(tc.prefetch))
			down := &subscriberOf[string]{n: tc.demand}
			messaging.Subscribe[string](rt, "out", down)
			start(t, rt)

			testwait.Eventually(t, waitTimeout, func() bool { return up.outstanding(0) > 0 }, "nothing requested upstream")
			assert.Equal(t, tc.held, up.outstanding(0), "requested upstream before anything arrived")
			c := newCounter()
			for i := range tc.held {
				up.s.OnNext(c.msg(strconv.FormatInt(i, 10)))
			}
			testwait.Eventually(t, waitTimeout, func() bool { return running.Load() == 1 }, "the function did not start")
			assert.Zero(t, up.outstanding(int(tc.held)), "more requested while the processor holds its bound")

			releaseAll()
			testwait.Eventually(t, waitTimeout, func() bool { return int64(len(down.received())) == tc.held }, "outputs not delivered")
			if tc.next > 0 {
				testwait.Eventually(t, waitTimeout, func() bool { return up.outstanding(int(tc.held)) > 0 }, "no request once the outputs went")
				assert.Equal(t, tc.next, up.outstanding(int(tc.held)), "topped up to min(remaining demand, prefetch)")
			}
		})
	}
}
