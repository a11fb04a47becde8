package reactive

import (
	"errors"
	"fmt"
	"math"
	"reflect"
)

// Unbounded is the demand that means "effectively unbounded" (rule 3.17): a
// Subscription whose outstanding demand reaches Unbounded never decrements it.
const Unbounded int64 = math.MaxInt64

// Errors of the package. They are matched with [errors.Is]; the concrete errors
// carry more context.
var (
	// ErrNilArgument is the panic value (wrapped) for a nil Subscriber,
	// Subscription, error or nillable element (rules 1.9, 2.13).
	ErrNilArgument = errors.New("reactive: nil argument (rules 1.9, 2.13)")
	// ErrNonPositiveRequest is signalled through OnError when Request is called
	// with n <= 0 (rule 3.9). Its message contains "3.9".
	ErrNonPositiveRequest = errors.New("reactive: rule 3.9 non-positive subscription request")
	// ErrAlreadySubscribed is signalled through OnError by unicast publishers
	// (FromChan) to every subscriber but the first (rules 1.9, 1.11).
	ErrAlreadySubscribed = errors.New("reactive: unicast publisher already has a subscriber")
	// ErrMissingDemand is signalled when an element is produced without demand:
	// by an [Outlet] whose PollFunc answers PollReady to poll(false), and by
	// [ToChan] when its upstream overflows the requested buffer.
	ErrMissingDemand = errors.New("reactive: element produced without demand")
	// ErrPanic wraps a recovered panic of a callback (a Subscriber method or a
	// user function given to an operator); the error text carries the stack.
	ErrPanic = errors.New("reactive: callback panicked")
)

// Publisher is a provider of a potentially unbounded number of sequenced
// elements, published according to the demand received from its Subscribers.
//
// Subscribe calls OnSubscribe on s first, never blocks, and panics (with an
// error wrapping [ErrNilArgument]) only for a nil s.
type Publisher[T any] interface {
	Subscribe(s Subscriber[T])
}

// Subscriber receives the signals of one subscription: OnSubscribe once, then
// OnNext up to the requested number of times, then at most one of OnError and
// OnComplete. The calls never overlap (rule 1.3).
type Subscriber[T any] interface {
	OnSubscribe(s Subscription)
	OnNext(v T)
	OnError(err error)
	OnComplete()
}

// Subscription is the one-to-one life cycle of a Subscriber subscribed to a
// Publisher. Both methods may be called from any goroutine, also from within
// the Subscriber's own callbacks.
type Subscription interface {
	// Request adds n to the outstanding demand, saturating at Unbounded;
	// n <= 0 ends the subscription with OnError(ErrNonPositiveRequest).
	Request(n int64)
	// Cancel asks the Publisher to stop signalling. It is idempotent, safe
	// from any goroutine and returns promptly.
	Cancel()
}

// Processor is a processing stage: a Subscriber of T and a Publisher of R.
type Processor[T, R any] interface {
	Subscriber[T]
	Publisher[R]
}

// nilArg panics with ErrNilArgument for the named argument.
func nilArg(what string) {
	panic(fmt.Errorf("%w: %s", ErrNilArgument, what))
}

// MustNotBeNil panics with an error wrapping ErrNilArgument when v is a nil
// pointer, interface, map, chan or func (rule 2.13). Slices are exempt: a nil
// []byte is a valid empty payload. Subscribers call it at the top of OnNext.
func MustNotBeNil[T any](v T) {
	if isNil(v) {
		nilArg("onNext element")
	}
}

// nillable reports whether values of T can be nil in the sense of rule 2.13.
func nillable[T any]() bool {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	default:
		return false
	}
}

func isNil[T any](v T) bool {
	a := any(v)
	if a == nil {
		return true
	}
	switch rv := reflect.ValueOf(a); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return rv.IsNil()
	default:
		return false
	}
}

// nilCheck is a per-type OnNext nil check: zero cost for value kinds.
type nilCheck[T any] struct{ on bool }

func newNilCheck[T any]() nilCheck[T] { return nilCheck[T]{on: nillable[T]()} }

func (c nilCheck[T]) check(v T) {
	if c.on && isNil(v) {
		nilArg("onNext element")
	}
}

// panicError converts a recovered panic value into an error wrapping ErrPanic
// and carrying the stack.
func panicError(where string, r any, stack []byte) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w in %s: %w\n%s", ErrPanic, where, err, stack)
	}
	return fmt.Errorf("%w in %s: %v\n%s", ErrPanic, where, r, stack)
}
