package reactive_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// fakeSub records requests and cancels.
type fakeSub struct {
	mu        sync.Mutex
	requests  []int64
	cancelled int
}

func (f *fakeSub) Request(n int64) {
	f.mu.Lock()
	f.requests = append(f.requests, n)
	f.mu.Unlock()
}

func (f *fakeSub) Cancel() {
	f.mu.Lock()
	f.cancelled++
	f.mu.Unlock()
}

func TestInletWindowTopsUpAt75Percent(t *testing.T) {
	in := reactive.NewInlet(8)
	s := &fakeSub{}
	assert.True(t, in.OnSubscribe(s))
	assert.Equal(t, []int64{8}, s.requests)
	in.Consumed(5)
	assert.Equal(t, []int64{8}, s.requests, "5 of 8 is below 75%")
	in.Consumed(1)
	assert.Equal(t, []int64{8, 6}, s.requests, "6 of 8 reaches 75%: replenish what was consumed")

	explicit := reactive.NewInlet(0)
	s0 := &fakeSub{}
	assert.True(t, explicit.OnSubscribe(s0))
	explicit.Consumed(5)
	assert.Empty(t, s0.requests, "without a window, only explicit requests go upstream")
}

func TestInletRejectsSecondSubscription(t *testing.T) {
	in := reactive.NewInlet(0)
	first, second := &fakeSub{}, &fakeSub{}
	assert.True(t, in.OnSubscribe(first))
	assert.False(t, in.OnSubscribe(second))
	assert.Equal(t, 1, second.cancelled)
	assert.Empty(t, second.requests)
	assert.Equal(t, 0, first.cancelled)
}

func TestInletEarlyRequestsAndCancel(t *testing.T) {
	in := reactive.NewInlet(0)
	in.Request(3)
	in.Request(2)
	s := &fakeSub{}
	assert.True(t, in.OnSubscribe(s))
	assert.Equal(t, []int64{5}, s.requests)

	in2 := reactive.NewInlet(4)
	in2.Cancel()
	s2 := &fakeSub{}
	assert.False(t, in2.OnSubscribe(s2), "a subscription arriving after Cancel is cancelled")
	assert.Equal(t, 1, s2.cancelled)
	assert.Empty(t, s2.requests)

	in3 := reactive.NewInlet(0)
	s3 := &fakeSub{}
	in3.OnSubscribe(s3)
	in3.Cancel()
	in3.Cancel()
	in3.Request(1)
	assert.Equal(t, 1, s3.cancelled, "cancel is forwarded once")
	assert.Empty(t, s3.requests, "requests after Cancel are dropped")

	in4 := reactive.NewInlet(0)
	s4 := &fakeSub{}
	in4.OnSubscribe(s4)
	in4.Terminated()
	in4.Cancel()
	in4.Request(1)
	assert.Equal(t, 0, s4.cancelled, "after a terminal signal the subscription is not called (rule 2.4)")
	assert.Empty(t, s4.requests)
	assert.False(t, in4.Active())
}

// TestInletForwardsAnEarlyNonPositiveRequest: a request of 0 or less before OnSubscribe is
// kept, as any request is, and reaches the subscription, which answers it per rule 3.9.
func TestInletForwardsAnEarlyNonPositiveRequest(t *testing.T) {
	for _, n := range []int64{0, -1} {
		in := reactive.NewInlet(0)
		in.Request(2)
		in.Request(n)
		s := &fakeSub{}
		assert.True(t, in.OnSubscribe(s))
		assert.Equal(t, []int64{n, 2}, s.requests, "request(%d)", n)
	}
}
