package messaging

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// nopSubscription is an upstream that the test drives by hand.
type nopSubscription struct{}

func (nopSubscription) Request(int64) {}
func (nopSubscription) Cancel()       {}

// heldSubscriber requests two elements and holds the first in OnNext until
// released.
type heldSubscriber struct {
	entered chan int
	release chan struct{}
	err     chan error
}

func (*heldSubscriber) OnSubscribe(sub reactive.Subscription) { sub.Request(2) }
func (s *heldSubscriber) OnNext(v int)                        { s.entered <- v; <-s.release }
func (s *heldSubscriber) OnError(err error)                   { s.err <- err }
func (s *heldSubscriber) OnComplete()                         { s.err <- nil }

// An upstream failure settles, through drop, what the gate received but had not
// delivered yet: nothing is left in flight until the shutdown deadline.
func TestGate_UpstreamErrorDropsTheQueue(t *testing.T) {
	type drop struct {
		v   int
		err error
	}
	dropped := make(chan drop, 2)
	g := newGate(func(v int) (int, bool) { return v, true }, func(v int, err error) { dropped <- drop{v, err} }, nil)
	down := &heldSubscriber{entered: make(chan int), release: make(chan struct{}), err: make(chan error, 1)}
	g.Subscribe(down)
	g.OnSubscribe(nopSubscription{})

	go g.OnNext(1) // delivered: the downstream holds it
	require.Equal(t, 1, <-down.entered)
	g.OnNext(2) // queued behind it
	boom := errors.New("boom")
	g.OnError(boom)
	close(down.release)

	require.ErrorIs(t, <-down.err, boom)
	require.Len(t, dropped, 1)
	assert.Equal(t, drop{2, boom}, <-dropped)
}
