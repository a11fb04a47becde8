package reactive

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// pipeWindow bounds what Map and Filter request upstream ahead of emission:
// unbounded downstream demand becomes batches of at most pipeWindow, so their
// queues never exceed it.
const pipeWindow int64 = 32

// mergeWindow is Merge's per-source window: min(downstream demand, 16).
const mergeWindow int64 = 16

// Map returns a Publisher applying f to every element of p (1:1; demand passes
// through in batches of at most 32). An error or a panic of f cancels upstream
// and signals OnError (a panic wrapped in [ErrPanic]) after the elements that f
// mapped before it, so Map(FromSlice(1, 2, 3), f) with f failing on 3 emits 1
// and 2, then the error.
func Map[T, R any](p Publisher[T], f func(T) (R, error)) Publisher[R] {
	if p == nil {
		nilArg("publisher")
	}
	if f == nil {
		nilArg("map function")
	}
	return pipePublisher[T, R]{up: p, fn: func(v T) (R, bool, error) {
		r, err := f(v)
		return r, true, err
	}}
}

// Filter returns a Publisher of the elements of p for which keep returns true.
// Every dropped element is replaced by a request of one more upstream, so
// downstream demand is preserved. A panic of keep fails the stream, after the
// elements kept before it.
func Filter[T any](p Publisher[T], keep func(T) bool) Publisher[T] {
	if p == nil {
		nilArg("publisher")
	}
	if keep == nil {
		nilArg("filter function")
	}
	return pipePublisher[T, T]{up: p, fn: func(v T) (T, bool, error) {
		return v, keep(v), nil
	}}
}

type pipePublisher[T, R any] struct {
	up Publisher[T]
	fn func(T) (R, bool, error)
}

func (p pipePublisher[T, R]) Subscribe(s Subscriber[R]) {
	if s == nil {
		nilArg("subscriber")
	}
	st := &pipe[T, R]{in: NewInlet(0), fn: p.fn, nilc: newNilCheck[T]()}
	st.out = NewOutlet(s, st.poll, st.in.Cancel)
	p.up.Subscribe(st)
	st.out.Start()
}

// pipe is the state of one Map/Filter subscription: an Inlet upstream, an
// Outlet downstream, a queue bounded by pipeWindow in between.
type pipe[T, R any] struct {
	in     *Inlet
	credit Demand // requested upstream, not yet received
	out    *Outlet[R]
	fn     func(T) (R, bool, error)
	nilc   nilCheck[T]

	mu    sync.Mutex
	queue fifo[R]
	ended bool
	err   error
}

func (st *pipe[T, R]) OnSubscribe(s Subscription) { st.in.OnSubscribe(s) }

func (st *pipe[T, R]) OnNext(v T) {
	st.nilc.check(v)
	if st.credit.Take(1) == 0 {
		st.fail(fmt.Errorf("%w: upstream of Map/Filter", ErrMissingDemand))
		return
	}
	r, keep, err := st.apply(v)
	switch {
	case err != nil:
		st.fail(err)
		return
	case keep:
		st.mu.Lock()
		if !st.ended {
			st.queue.push(r)
		}
		st.mu.Unlock()
	}
	st.out.Signal() // emits r, or tops up upstream for a dropped element
}

func (st *pipe[T, R]) apply(v T) (r R, keep bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError("operator function", p, debug.Stack())
		}
	}()
	return st.fn(v)
}

func (st *pipe[T, R]) fail(err error) {
	st.in.Cancel()
	st.end(err)
}

func (st *pipe[T, R]) end(err error) {
	st.mu.Lock()
	if !st.ended {
		st.ended, st.err = true, err
	}
	st.mu.Unlock()
	st.out.Signal()
}

func (st *pipe[T, R]) OnError(err error) {
	if err == nil {
		nilArg("error")
	}
	st.in.Terminated()
	st.end(err)
}

func (st *pipe[T, R]) OnComplete() {
	st.in.Terminated()
	st.end(nil)
}

func (st *pipe[T, R]) poll(canEmit bool) (R, PollStatus, error) {
	var zero R
	st.mu.Lock()
	if st.ended && st.err != nil && (st.queue.len() == 0 || !canEmit) {
		// An error goes after the elements queued before it: the queue holds no more
		// than the subscriber's outstanding demand, so they never wait for a Request.
		// Without that demand (which the queue's bound rules out) it goes at once.
		st.queue.clear()
		st.mu.Unlock()
		return zero, PollDone, st.err
	}
	if st.queue.len() > 0 {
		if !canEmit {
			st.mu.Unlock()
			return zero, PollEmpty, nil
		}
		v := st.queue.pop()
		st.mu.Unlock()
		return v, PollReady, nil
	}
	ended := st.ended
	st.mu.Unlock()
	if ended {
		return zero, PollDone, nil
	}
	if canEmit {
		if n := st.credit.TopUp(min(st.out.Requested(), pipeWindow)); n > 0 {
			st.in.Request(n)
		}
	}
	return zero, PollEmpty, nil
}

// FlatMap returns a Publisher that maps every element of p to a Publisher with
// f and concatenates their elements (MP RM flattening): the next element of p
// is requested only after the current inner publisher completed, and unused
// downstream demand carries over to the next inner. An inner error, or a panic
// or nil result of f, cancels upstream and signals OnError, after the elements
// received before it; upstream completion signals OnComplete after the last
// inner completed.
func FlatMap[T, R any](p Publisher[T], f func(T) Publisher[R]) Publisher[R] {
	if p == nil {
		nilArg("publisher")
	}
	if f == nil {
		nilArg("flatMap function")
	}
	return flatMapPublisher[T, R]{up: p, f: f}
}

type flatMapPublisher[T, R any] struct {
	up Publisher[T]
	f  func(T) Publisher[R]
}

func (p flatMapPublisher[T, R]) Subscribe(s Subscriber[R]) {
	if s == nil {
		nilArg("subscriber")
	}
	st := &flatMap[T, R]{outer: NewInlet(0), f: p.f, nilc: newNilCheck[T]()}
	st.out = NewOutlet(s, st.poll, st.cancel)
	p.up.Subscribe(st)
	st.out.Start()
}

type flatMap[T, R any] struct {
	outer  *Inlet
	credit Demand // outer elements requested, not yet received (0 or 1)
	out    *Outlet[R]
	f      func(T) Publisher[R]
	nilc   nilCheck[T]

	mu         sync.Mutex
	pending    T
	hasPending bool
	outerDone  bool
	err        error
	inner      *flatInner[T, R]
	queue      fifo[R]
}

type flatInner[T, R any] struct {
	parent *flatMap[T, R]
	in     *Inlet
	credit Demand
	nilc   nilCheck[R]
}

func (st *flatMap[T, R]) OnSubscribe(s Subscription) { st.outer.OnSubscribe(s) }

func (st *flatMap[T, R]) OnNext(v T) {
	st.nilc.check(v)
	if st.credit.Take(1) == 0 {
		st.fail(fmt.Errorf("%w: upstream of FlatMap", ErrMissingDemand))
		return
	}
	st.mu.Lock()
	st.pending, st.hasPending = v, true
	st.mu.Unlock()
	st.out.Signal()
}

func (st *flatMap[T, R]) OnError(err error) {
	if err == nil {
		nilArg("error")
	}
	st.outer.Terminated()
	st.fail(err)
}

func (st *flatMap[T, R]) OnComplete() {
	st.outer.Terminated()
	st.mu.Lock()
	st.outerDone = true
	st.mu.Unlock()
	st.out.Signal()
}

// fail records the first error and cancels upstream and the current inner.
func (st *flatMap[T, R]) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	st.cancel()
	st.out.Signal()
}

func (st *flatMap[T, R]) cancel() {
	st.outer.Cancel()
	st.mu.Lock()
	cur := st.inner
	st.mu.Unlock()
	if cur != nil {
		cur.in.Cancel()
	}
}

func (st *flatMap[T, R]) poll(canEmit bool) (R, PollStatus, error) {
	var zero R
	st.mu.Lock()
	if st.err != nil && (st.queue.len() == 0 || !canEmit) {
		// An error goes after the elements queued before it: the queue holds no more
		// than the subscriber's outstanding demand, so they never wait for a Request.
		// Without that demand (which the queue's bound rules out) it goes at once.
		st.queue.clear()
		st.mu.Unlock()
		return zero, PollDone, st.err
	}
	if st.queue.len() > 0 {
		if !canEmit {
			st.mu.Unlock()
			return zero, PollEmpty, nil
		}
		v := st.queue.pop()
		st.mu.Unlock()
		return v, PollReady, nil
	}
	if cur := st.inner; cur != nil {
		st.mu.Unlock()
		if canEmit {
			if n := cur.credit.TopUp(min(st.out.Requested(), pipeWindow)); n > 0 {
				cur.in.Request(n)
			}
		}
		return zero, PollEmpty, nil
	}
	if st.hasPending {
		v := st.pending
		var none T
		st.pending, st.hasPending = none, false
		st.mu.Unlock()
		st.startInner(v)
		return zero, PollEmpty, nil
	}
	done := st.outerDone
	st.mu.Unlock()
	if done {
		return zero, PollDone, nil
	}
	if canEmit && st.credit.TopUp(1) > 0 {
		st.outer.Request(1)
	}
	return zero, PollEmpty, nil
}

func (st *flatMap[T, R]) startInner(v T) {
	pub, err := st.mapElement(v)
	if err != nil {
		st.fail(err)
		return
	}
	in := &flatInner[T, R]{parent: st, in: NewInlet(0), nilc: newNilCheck[R]()}
	st.mu.Lock()
	st.inner = in
	st.mu.Unlock()
	pub.Subscribe(in)
	st.out.Signal() // top up the new inner
}

func (st *flatMap[T, R]) mapElement(v T) (pub Publisher[R], err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError("FlatMap function", p, debug.Stack())
		}
	}()
	pub = st.f(v)
	if pub == nil {
		return nil, fmt.Errorf("%w: FlatMap function returned a nil publisher", ErrNilArgument)
	}
	return pub, nil
}

func (in *flatInner[T, R]) OnSubscribe(s Subscription) {
	if in.in.OnSubscribe(s) {
		in.parent.out.Signal()
	}
}

func (in *flatInner[T, R]) OnNext(v R) {
	in.nilc.check(v)
	st := in.parent
	if in.credit.Take(1) == 0 {
		st.fail(fmt.Errorf("%w: inner publisher of FlatMap", ErrMissingDemand))
		return
	}
	st.mu.Lock()
	if st.inner == in && st.err == nil {
		st.queue.push(v)
	}
	st.mu.Unlock()
	st.out.Signal()
}

func (in *flatInner[T, R]) OnError(err error) {
	if err == nil {
		nilArg("error")
	}
	in.in.Terminated()
	in.parent.fail(err)
}

func (in *flatInner[T, R]) OnComplete() {
	in.in.Terminated()
	st := in.parent
	st.mu.Lock()
	if st.inner == in {
		st.inner = nil
	}
	st.mu.Unlock()
	st.out.Signal()
}

// Merge returns a Publisher that subscribes to all ps in order and emits their
// elements serially, round-robin over the sources that have elements ready.
// Each source gets a window of min(downstream demand, 16), topped up once 75%
// of it was consumed; its queue never exceeds that window. The stream
// completes when all sources completed; the first error cancels the others and
// is signalled. Merge() with no sources is [Empty].
func Merge[T any](ps ...Publisher[T]) Publisher[T] {
	if len(ps) == 0 {
		return Empty[T]()
	}
	for _, p := range ps {
		if p == nil {
			nilArg("publisher")
		}
	}
	return mergePublisher[T](append([]Publisher[T](nil), ps...))
}

type mergePublisher[T any] []Publisher[T]

func (p mergePublisher[T]) Subscribe(s Subscriber[T]) {
	if s == nil {
		nilArg("subscriber")
	}
	st := &merge[T]{}
	st.srcs = make([]*mergeSource[T], len(p))
	for i := range p {
		st.srcs[i] = &mergeSource[T]{parent: st, in: NewInlet(0), nilc: newNilCheck[T]()}
	}
	st.out = NewOutlet(s, st.poll, st.cancel)
	for i, up := range p {
		up.Subscribe(st.srcs[i])
	}
	st.out.Start()
}

type merge[T any] struct {
	out  *Outlet[T]
	srcs []*mergeSource[T]

	mu   sync.Mutex
	next int
	err  error
}

type mergeSource[T any] struct {
	parent *merge[T]
	in     *Inlet
	credit Demand
	nilc   nilCheck[T]
	queue  fifo[T] // guarded by parent.mu
	done   bool    // guarded by parent.mu
}

func (st *merge[T]) cancel() {
	for _, src := range st.srcs {
		src.in.Cancel()
	}
}

func (st *merge[T]) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	st.cancel()
	st.out.Signal()
}

func (st *merge[T]) poll(canEmit bool) (T, PollStatus, error) {
	var zero T
	st.mu.Lock()
	if st.err != nil {
		for _, src := range st.srcs {
			src.queue.clear()
		}
		st.mu.Unlock()
		return zero, PollDone, st.err
	}
	n := len(st.srcs)
	allDone := true
	for k := range n {
		src := st.srcs[(st.next+k)%n]
		if src.queue.len() > 0 {
			if !canEmit {
				st.mu.Unlock()
				return zero, PollEmpty, nil
			}
			v := src.queue.pop()
			st.next = (st.next + k + 1) % n
			st.mu.Unlock()
			return v, PollReady, nil
		}
		allDone = allDone && src.done
	}
	if allDone {
		st.mu.Unlock()
		return zero, PollDone, nil
	}
	st.mu.Unlock()
	if canEmit {
		window := min(st.out.Requested(), mergeWindow)
		for _, src := range st.srcs {
			// queues are empty here; top up a source once 75% of its window was consumed
			if src.in.Active() && src.credit.Outstanding() <= window/4 {
				if k := src.credit.TopUp(window); k > 0 {
					src.in.Request(k)
				}
			}
		}
	}
	return zero, PollEmpty, nil
}

func (src *mergeSource[T]) OnSubscribe(s Subscription) {
	if src.in.OnSubscribe(s) {
		src.parent.out.Signal()
	}
}

func (src *mergeSource[T]) OnNext(v T) {
	src.nilc.check(v)
	st := src.parent
	if src.credit.Take(1) == 0 {
		st.fail(fmt.Errorf("%w: source of Merge", ErrMissingDemand))
		return
	}
	st.mu.Lock()
	if st.err == nil {
		src.queue.push(v)
	}
	st.mu.Unlock()
	st.out.Signal()
}

func (src *mergeSource[T]) OnError(err error) {
	if err == nil {
		nilArg("error")
	}
	src.in.Terminated()
	src.parent.fail(err)
}

func (src *mergeSource[T]) OnComplete() {
	src.in.Terminated()
	st := src.parent
	st.mu.Lock()
	src.done = true
	st.mu.Unlock()
	st.out.Signal()
}
