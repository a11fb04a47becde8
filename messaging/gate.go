package messaging

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// gate is a unicast 1:1 Processor built on an Inlet and an Outlet: it
// requests upstream exactly what its downstream requested (minus what it
// holds), applies fn to every element (fn may drop an element after settling
// it) and can be stopped: Stop cancels upstream and completes downstream once
// the queue was delivered, so nothing received is lost. The runtime puts one
// at every entry of the graph (sources, Produce, Generate) and at every
// codec boundary.
type gate[I, O any] struct {
	in     *reactive.Inlet
	credit reactive.Demand // requested upstream, not yet received
	fn     func(I) (O, bool)
	drop   func(O, error) // settles queued elements dropped by an error; may be nil
	obs    *chanState     // may be nil

	out        atomic.Pointer[reactive.Outlet[O]]
	subscribed atomic.Bool

	mu       sync.Mutex
	queue    []O
	ended    bool // no more elements will be accepted from upstream
	finished bool // the terminal signal was produced or the downstream cancelled
	err      error
}

var _ reactive.Processor[int, int] = (*gate[int, int])(nil)

func newGate[I, O any](fn func(I) (O, bool), drop func(O, error), obs *chanState) *gate[I, O] {
	return &gate[I, O]{in: reactive.NewInlet(0), fn: fn, drop: drop, obs: obs}
}

// popFront removes and returns q[0]. A queue that becomes empty keeps its
// backing array, so a queue that holds one element at a time does not
// allocate per element.
func popFront[T any](q []T) (T, []T) {
	var zero T
	v := q[0]
	q[0] = zero
	if len(q) == 1 {
		return v, q[:0]
	}
	return v, q[1:]
}

// identityGate passes elements unchanged.
func identityGate[T any](obs *chanState) *gate[T, T] {
	return newGate(func(v T) (T, bool) { return v, true }, nil, obs)
}

// Subscribe implements reactive.Publisher; the gate is unicast.
func (g *gate[I, O]) Subscribe(s reactive.Subscriber[O]) {
	if s == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	if !g.subscribed.CompareAndSwap(false, true) {
		reactive.Failed[O](fmt.Errorf("%w: messaging stage", reactive.ErrAlreadySubscribed)).Subscribe(s)
		return
	}
	o := reactive.NewOutlet(s, g.poll, g.cancel)
	g.out.Store(o)
	o.Start()
}

func (g *gate[I, O]) signal() {
	if o := g.out.Load(); o != nil {
		o.Signal()
	}
}

// OnSubscribe implements reactive.Subscriber.
func (g *gate[I, O]) OnSubscribe(s reactive.Subscription) {
	if g.in.OnSubscribe(s) {
		g.obs.subscribed()
		g.signal()
	}
}

// OnNext implements reactive.Subscriber.
func (g *gate[I, O]) OnNext(v I) {
	reactive.MustNotBeNil(v)
	if g.credit.Take(1) == 0 {
		g.in.Cancel()
		g.end(fmt.Errorf("%w: upstream of a messaging stage", reactive.ErrMissingDemand))
		return
	}
	o, ok := g.fn(v)
	if ok {
		g.mu.Lock()
		if !g.finished && g.err == nil {
			g.queue = append(g.queue, o)
			ok = false
		}
		g.mu.Unlock()
		if ok && g.drop != nil { // the stream already ended
			g.drop(o, ErrClosed)
		}
	}
	g.signal()
}

// OnError implements reactive.Subscriber.
func (g *gate[I, O]) OnError(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	g.in.Terminated()
	g.obs.failed(err)
	g.end(err)
}

// OnComplete implements reactive.Subscriber.
func (g *gate[I, O]) OnComplete() {
	g.in.Terminated()
	g.obs.completed()
	g.end(nil)
}

// Stop cuts the upstream: nothing new is requested or accepted, and the
// downstream completes once the queue was delivered.
func (g *gate[I, O]) Stop() {
	g.in.Cancel()
	g.end(nil)
}

func (g *gate[I, O]) end(err error) {
	g.mu.Lock()
	if !g.ended {
		g.ended, g.err = true, err
	}
	g.mu.Unlock()
	g.signal()
}

// cancel is the Outlet's onCancel: the downstream cancelled.
func (g *gate[I, O]) cancel() {
	g.obs.cancelled("downstream")
	g.in.Cancel()
	g.mu.Lock()
	q := g.queue
	g.queue = nil
	g.ended, g.finished = true, true
	g.mu.Unlock()
	g.dropAll(q, ErrClosed)
}

func (g *gate[I, O]) dropAll(q []O, err error) {
	if g.drop == nil {
		return
	}
	for _, o := range q {
		g.drop(o, err)
	}
}

func (g *gate[I, O]) poll(canEmit bool) (O, reactive.PollStatus, error) {
	var zero O
	g.mu.Lock()
	if g.ended && g.err != nil {
		q, err := g.queue, g.err
		g.queue = nil
		g.finished = true
		g.mu.Unlock()
		g.dropAll(q, err)
		return zero, reactive.PollDone, err
	}
	if len(g.queue) > 0 {
		if !canEmit {
			g.mu.Unlock()
			return zero, reactive.PollEmpty, nil
		}
		var v O
		v, g.queue = popFront(g.queue)
		g.mu.Unlock()
		return v, reactive.PollReady, nil
	}
	if g.ended {
		g.finished = true
		g.mu.Unlock()
		return zero, reactive.PollDone, nil
	}
	g.mu.Unlock()
	if canEmit {
		if o := g.out.Load(); o != nil {
			if n := g.credit.TopUp(o.Requested()); n > 0 {
				g.in.Request(n)
			}
		}
	}
	return zero, reactive.PollEmpty, nil
}
