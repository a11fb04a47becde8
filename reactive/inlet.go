package reactive

import (
	"sync/atomic"
)

// Inlet is the upstream half of every shipped Subscriber and Processor: it
// holds the upstream Subscription, requests a window and replenishes it, and
// enforces rules 2.5 (a second subscription is cancelled), 2.6 (Cancel drops
// the subscription) and 2.3/2.4 (Terminated drops it without calling it).
//
// Request and Cancel may be called before OnSubscribe: requests are kept and
// forwarded when the subscription arrives; a cancel cancels it on arrival.
// All methods are safe for concurrent use and never hold a lock while calling
// the upstream Subscription.
type Inlet struct {
	window   int64
	sub      atomic.Pointer[subscriptionBox]
	state    atomic.Int32 // inletActive, inletCancelled, inletTerminated
	early    Demand       // requests made before OnSubscribe
	hasBad   atomic.Bool  // a non-positive request came before OnSubscribe
	earlyBad atomic.Int64 // its value
	consumed Demand       // consumed and not yet replenished
}

type subscriptionBox struct{ s Subscription }

const (
	inletActive int32 = iota
	inletCancelled
	inletTerminated
)

// NewInlet returns an Inlet. window 0 means explicit [Inlet.Request] calls
// only; a positive window is requested at OnSubscribe and topped up by
// [Inlet.Consumed] once 75% of it was consumed, so at most window elements are
// outstanding. A negative window is treated as 0.
func NewInlet(window int64) *Inlet {
	return &Inlet{window: max(window, 0)}
}

// OnSubscribe stores s and requests the window (and any early requests). It
// panics with [ErrNilArgument] for a nil s (rule 2.13). A second subscription,
// or one arriving after Cancel or Terminated, is cancelled and OnSubscribe
// returns false (rule 2.5).
func (in *Inlet) OnSubscribe(s Subscription) bool {
	if s == nil {
		nilArg("subscription")
	}
	if !in.sub.CompareAndSwap(nil, &subscriptionBox{s: s}) {
		s.Cancel()
		return false
	}
	if in.state.Load() != inletActive {
		in.sub.Store(&subscriptionBox{}) // keep later OnSubscribe calls rejected
		s.Cancel()
		return false
	}
	if in.hasBad.Load() {
		s.Request(in.earlyBad.Load())
	}
	if in.window > 0 {
		s.Request(in.window)
	}
	in.flushEarly(s)
	return true
}

func (in *Inlet) flushEarly(s Subscription) {
	if n := in.early.Outstanding(); n > 0 {
		if taken := in.early.Take(n); taken > 0 {
			s.Request(taken)
		}
	}
}

// current returns the live subscription or nil.
func (in *Inlet) current() Subscription {
	if in.state.Load() != inletActive {
		return nil
	}
	if b := in.sub.Load(); b != nil {
		return b.s
	}
	return nil
}

// Consumed records that n elements were processed and, with a window, tops
// the upstream demand up once 75% of the window was consumed.
func (in *Inlet) Consumed(n int64) {
	if in.window == 0 || n <= 0 {
		return
	}
	if _, err := in.consumed.Add(n); err != nil {
		return
	}
	threshold := max(in.window-in.window/4, 1)
	if in.consumed.Outstanding() < threshold {
		return
	}
	if k := in.consumed.Take(Unbounded - 1); k > 0 {
		in.Request(k)
	}
}

// Request forwards n to the upstream subscription (n <= 0 included: the
// upstream answers it per rule 3.9). Before OnSubscribe it is remembered;
// after Cancel or Terminated it is a no-op.
func (in *Inlet) Request(n int64) {
	if s := in.current(); s != nil {
		s.Request(n)
		return
	}
	if in.state.Load() != inletActive {
		return
	}
	if n <= 0 {
		in.earlyBad.Store(n)
		in.hasBad.Store(true)
	} else if _, err := in.early.Add(n); err != nil {
		return
	}
	// OnSubscribe may have run meanwhile: forward what it did not flush.
	if s := in.current(); s != nil {
		in.flushEarly(s)
	}
}

// Cancel cancels the upstream subscription once and drops it (rule 2.6);
// idempotent. A subscription arriving later is cancelled on arrival.
func (in *Inlet) Cancel() {
	if !in.state.CompareAndSwap(inletActive, inletCancelled) {
		return
	}
	if b := in.sub.Swap(&subscriptionBox{}); b != nil && b.s != nil {
		b.s.Cancel()
	}
}

// Terminated drops the subscription without calling it, after OnComplete or
// OnError (rules 2.3, 2.4).
func (in *Inlet) Terminated() {
	if in.state.CompareAndSwap(inletActive, inletTerminated) {
		in.sub.Swap(&subscriptionBox{})
	}
}

// Active reports whether the Inlet has neither been cancelled nor terminated.
func (in *Inlet) Active() bool { return in.state.Load() == inletActive }
