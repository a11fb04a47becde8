package reactive

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// PollStatus is the answer of a [PollFunc].
type PollStatus int

// The answers of a PollFunc. The RUNTIME specification calls them Ready, Empty
// and Done; they carry a Poll prefix because [Empty] is a source.
const (
	// PollReady: v is the next element (only allowed when canEmit is true).
	PollReady PollStatus = iota + 1
	// PollEmpty: nothing to emit now; call [Outlet.Signal] when that changes.
	PollEmpty
	// PollDone: the stream ended; err nil means OnComplete, else OnError(err).
	PollDone
)

// PollFunc is the source side of an [Outlet]. The Outlet calls it from its
// drain loop, never concurrently: poll(true) while there is demand, poll(false)
// otherwise. poll(false) may only answer PollEmpty or PollDone: terminal
// signals need no demand (rules 1.5, 2.9).
type PollFunc[T any] func(canEmit bool) (v T, st PollStatus, err error)

// Outlet is the downstream half of every shipped Publisher: it implements the
// Subscription handed to one Subscriber and owns the signals sent to it.
//
// It calls OnSubscribe exactly once and first, emits only against demand, sends
// at most one terminal signal, turns Request(n <= 0) into OnError wrapping
// [ErrNonPositiveRequest], recovers Subscriber panics (treating the
// subscription as cancelled and reporting the error through [Outlet.Err]) and
// drops its Subscriber on cancel or terminal (rule 3.13). All signals come out
// of one [Trampoline] drain loop, so they never overlap and recursion stays
// bounded.
type Outlet[T any] struct {
	demand   Demand
	tramp    Trampoline
	poll     PollFunc[T]
	onCancel func()
	started  atomic.Bool
	badReq   atomic.Pointer[error]
	failure  atomic.Pointer[error]
	holds    atomic.Int32
	done     chan struct{}
	drainFn  func() // o.drain, bound once: a method value per call would allocate

	// drain-only state, guarded by the trampoline
	sub        Subscriber[T]
	subscribed bool
	finished   bool
}

var _ Subscription = (*Outlet[int])(nil)

// NewOutlet returns an Outlet that serves s from poll. onCancel (may be nil) is
// called once, from the drain loop, when the subscription ends for any reason
// other than poll answering PollDone: Cancel, a rule 3.9 violation, a
// Subscriber panic or an element without demand. It must not block. Nil s or
// poll panic with [ErrNilArgument].
func NewOutlet[T any](s Subscriber[T], poll PollFunc[T], onCancel func()) *Outlet[T] {
	if s == nil {
		nilArg("subscriber")
	}
	if poll == nil {
		nilArg("poll function")
	}
	o := &Outlet[T]{sub: s, poll: poll, onCancel: onCancel, done: make(chan struct{})}
	o.drainFn = o.drain
	o.holds.Store(1)
	return o
}

// Start signals OnSubscribe(o) and then drains once. Call it exactly once.
func (o *Outlet[T]) Start() {
	o.started.Store(true)
	o.tramp.Run(o.drainFn)
}

// Signal tells the Outlet that data or a terminal state became available: it
// schedules a drain (running it now unless one is running). Signals before
// Start are absorbed by Start's drain.
func (o *Outlet[T]) Signal() { o.tramp.Run(o.drainFn) }

// Requested returns the outstanding demand, for pumps deciding whether to fetch.
func (o *Outlet[T]) Requested() int64 { return o.demand.Outstanding() }

// Done is closed once the subscription ended (cancel or terminal signal) and
// every hold of the source was released.
func (o *Outlet[T]) Done() <-chan struct{} { return o.done }

// Err returns the error wrapping [ErrPanic] recorded when the Subscriber
// panicked, or nil.
func (o *Outlet[T]) Err() error {
	if p := o.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Request implements [Subscription].
func (o *Outlet[T]) Request(n int64) {
	if _, err := o.demand.Add(n); err != nil {
		o.reject(err)
	}
	o.tramp.Run(o.drainFn)
}

// reject records a rule 3.9 violation; a separate function keeps the error
// from escaping to the heap on every Request.
func (o *Outlet[T]) reject(err error) { o.badReq.CompareAndSwap(nil, &err) }

// Cancel implements [Subscription].
func (o *Outlet[T]) Cancel() {
	if o.demand.Cancel() {
		o.tramp.Run(o.drainFn)
	}
}

// hold delays closing Done until a matching release (used by sources whose
// goroutine must have exited before Done closes). Call before Start.
func (o *Outlet[T]) hold() { o.holds.Add(1) }

func (o *Outlet[T]) release() {
	if o.holds.Add(-1) == 0 {
		close(o.done)
	}
}

func (o *Outlet[T]) drain() {
	if o.finished || !o.started.Load() {
		return
	}
	if !o.subscribed {
		o.subscribed = true
		if !o.call("OnSubscribe", func(s Subscriber[T]) { s.OnSubscribe(o) }) {
			return
		}
	}
	for {
		if o.demand.Cancelled() {
			o.finish(true)
			return
		}
		if p := o.badReq.Load(); p != nil {
			o.terminate(*p, true)
			return
		}
		canEmit := o.demand.Outstanding() > 0
		v, st, err := o.poll(canEmit)
		switch st {
		case PollReady:
			if !canEmit {
				o.terminate(fmt.Errorf("%w: the source produced an element while demand was 0", ErrMissingDemand), true)
				return
			}
			o.demand.Take(1)
			if !o.next(v) {
				return
			}
		case PollDone:
			o.terminate(err, false)
			return
		default:
			return
		}
	}
}

// finish ends the subscription: drops the subscriber, optionally cancels the
// source, releases the Outlet's hold on Done.
func (o *Outlet[T]) finish(cancelSource bool) {
	o.demand.Cancel()
	o.sub = nil
	o.finished = true
	if cancelSource && o.onCancel != nil {
		o.onCancel()
	}
	o.release()
}

func (o *Outlet[T]) terminate(err error, cancelSource bool) {
	s := o.sub
	o.demand.Cancel()
	o.sub = nil
	o.finished = true
	if cancelSource && o.onCancel != nil {
		o.onCancel()
	}
	o.deliver(s, err)
	o.release()
}

func (o *Outlet[T]) deliver(s Subscriber[T], err error) {
	defer func() {
		if r := recover(); r != nil {
			perr := panicError("subscriber terminal signal", r, debug.Stack())
			o.failure.CompareAndSwap(nil, &perr)
		}
	}()
	if err != nil {
		s.OnError(err)
	} else {
		s.OnComplete()
	}
}

// next delivers v; like call, without a closure per element.
func (o *Outlet[T]) next(v T) (ok bool) {
	defer func() {
		if !ok {
			o.recovered("OnNext", recover())
		}
	}()
	o.sub.OnNext(v)
	return true
}

func (o *Outlet[T]) recovered(where string, r any) {
	perr := panicError("subscriber "+where, r, debug.Stack())
	o.failure.CompareAndSwap(nil, &perr)
	o.finish(true)
}

// call runs f on the subscriber; a panic cancels the subscription and the
// source and is recorded (rule 2.13 violation). It reports whether f returned.
func (o *Outlet[T]) call(where string, f func(Subscriber[T])) (ok bool) {
	defer func() {
		if !ok {
			o.recovered(where, recover())
		}
	}()
	f(o.sub)
	return true
}
