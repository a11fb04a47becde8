package tck

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// Puppet lets the TCK drive a whitebox subscriber: TriggerRequest asks it to
// eventually request at least n more elements, SignalCancel to cancel.
type Puppet interface {
	TriggerRequest(n int64)
	SignalCancel()
}

// Probe receives what a whitebox subscriber under test does; the subscriber
// forwards its signals to it and registers its Puppet in OnSubscribe. Its
// methods may be called from any goroutine.
type Probe[T any] struct {
	p      *probe[T]
	puppet *promise[Puppet]
}

func newWhiteboxProbe[T any](e *env) *Probe[T] {
	return &Probe[T]{p: newProbe[T](e), puppet: newPromise[Puppet](e)}
}

// RegisterOnSubscribe registers the subscriber's Puppet (first call wins).
func (p *Probe[T]) RegisterOnSubscribe(pp Puppet) {
	if !p.puppet.isCompleted() {
		p.puppet.complete(pp)
	}
}

// RegisterOnNext records an element the subscriber received.
func (p *Probe[T]) RegisterOnNext(v T) { p.p.registerOnNext(v) }

// RegisterOnError records the error the subscriber received.
func (p *Probe[T]) RegisterOnError(err error) { p.p.registerOnError(err) }

// RegisterOnComplete records the subscriber's completion.
func (p *Probe[T]) RegisterOnComplete() { p.p.registerOnComplete() }

// WhiteboxFactory creates the subscribers verified by [VerifySubscriberWhitebox].
type WhiteboxFactory[T any] struct {
	// Create returns a subscriber that calls p.RegisterOnSubscribe(puppet) in
	// OnSubscribe and forwards its signals to p. Required.
	Create func(t *testing.T, p *Probe[T]) reactive.Subscriber[T]
	// Element returns the i-th element the TCK sends. Required.
	Element func(i int) T
}

// VerifySubscriberWhitebox runs every test of the Java
// SubscriberWhiteboxVerification as a subtest named like the Java method.
func VerifySubscriberWhitebox[T any](t *testing.T, f WhiteboxFactory[T], o Options) {
	t.Helper()
	verifyWhitebox(realT{t: t}, f, o)
}

func verifyWhitebox[T any](r runner, f WhiteboxFactory[T], o Options, only ...string) {
	r.Helper()
	c, err := resolve(o)
	if err != nil {
		r.Errorf("%v", err)
		r.FailNow()
	}
	c.only = onlySet(only)
	if f.Create == nil || f.Element == nil {
		r.Errorf("tck: WhiteboxFactory.Create and Element are required")
		r.FailNow()
	}
	w := &wb[T]{element: f.Element, create: func(e *env, p *Probe[T]) reactive.Subscriber[T] { return f.Create(e.r.T(), p) }}
	runCases(r, c, w.cases())
}

// wb holds the whitebox verification; the identity processor verification
// reuses it with a processor behind create.
type wb[T any] struct {
	element func(i int) T
	create  func(e *env, p *Probe[T]) reactive.Subscriber[T]
}

type wbStage[T any] struct {
	*manualPublisher[T]
	tees  *manualSubscriber[T]
	probe *Probe[T]
	lastT T
}

func (w *wb[T]) stage(e *env, setup bool) *wbStage[T] {
	e.r.Helper()
	st := &wbStage[T]{manualPublisher: newManualPublisher[T](e)}
	if setup {
		st.tees = newSubscribedManual(e, helperPublisher(e, w.element, reactive.Unbounded))
		st.probe = newWhiteboxProbe[T](e)
		sub := w.create(e, st.probe)
		st.Subscribe(sub)
		st.probe.puppet.expectCompletion(e.c.timeout, fmt.Sprintf("subscriber %T did not `registerOnSubscribe`", sub))
		e.verifyNoAsyncErrorsNoDelay()
	}
	return st
}

func (st *wbStage[T]) puppet() Puppet { return st.probe.puppet.value() }

func (st *wbStage[T]) signalNext() T {
	st.lastT = st.tees.requestNextElement()
	st.sendNext(st.lastT)
	return st.lastT
}

func (w *wb[T]) cases() []tcase {
	return []tcase{
		{"required_exerciseWhiteboxHappyPath", w.happyPath},
		{"required_spec201_mustSignalDemandViaSubscriptionRequest", w.spec201},
		{"untested_spec202_shouldAsynchronouslyDispatch", untested("2.2")},
		{"required_spec203_mustNotCallMethodsOnSubscriptionOrPublisherInOnComplete", func(e *env) { w.spec203(e, false) }},
		{"required_spec203_mustNotCallMethodsOnSubscriptionOrPublisherInOnError", func(e *env) { w.spec203(e, true) }},
		{"untested_spec204_mustConsiderTheSubscriptionAsCancelledInAfterRecievingOnCompleteOrOnError", untested("2.4")},
		{"required_spec205_mustCallSubscriptionCancelIfItAlreadyHasAnSubscriptionAndReceivesAnotherOnSubscribeSignal", w.spec205},
		{"untested_spec206_mustCallSubscriptionCancelIfItIsNoLongerValid", untested("2.6")},
		{"untested_spec207_mustEnsureAllCallsOnItsSubscriptionTakePlaceFromTheSameThreadOrTakeCareOfSynchronization", untested("2.7")},
		{"required_spec208_mustBePreparedToReceiveOnNextSignalsAfterHavingCalledSubscriptionCancel", w.spec208},
		{"required_spec209_mustBePreparedToReceiveAnOnCompleteSignalWithPrecedingRequestCall", func(e *env) { w.spec209(e, true) }},
		{"required_spec209_mustBePreparedToReceiveAnOnCompleteSignalWithoutPrecedingRequestCall", func(e *env) { w.spec209(e, false) }},
		{"required_spec210_mustBePreparedToReceiveAnOnErrorSignalWithPrecedingRequestCall", func(e *env) { w.spec210(e, true) }},
		{"required_spec210_mustBePreparedToReceiveAnOnErrorSignalWithoutPrecedingRequestCall", func(e *env) { w.spec210(e, false) }},
		{"untested_spec211_mustMakeSureThatAllCallsOnItsMethodsHappenBeforeTheProcessingOfTheRespectiveEvents", untested("2.11")},
		{"untested_spec212_mustNotCallOnSubscribeMoreThanOnceBasedOnObjectEquality_specViolation", untested("2.12")},
		{"untested_spec213_failingOnSignalInvocation", untested("2.13")},
		{"required_spec213_onSubscribe_mustThrowNullPointerExceptionWhenParametersAreNull", w.spec213onSubscribe},
		{"required_spec213_onNext_mustThrowNullPointerExceptionWhenParametersAreNull", w.spec213onNext},
		{"required_spec213_onError_mustThrowNullPointerExceptionWhenParametersAreNull", w.spec213onError},
		{"untested_spec301_mustNotBeCalledOutsideSubscriberContext", untested("3.1")},
		{"required_spec308_requestMustRegisterGivenNumberElementsToBeProduced", w.spec308},
		{"untested_spec310_requestMaySynchronouslyCallOnNextOnSubscriber", untested("3.10")},
		{"untested_spec311_requestMaySynchronouslyCallOnCompleteOrOnError", untested("3.11")},
		{"untested_spec314_cancelMayCauseThePublisherToShutdownIfNoOtherSubscriptionExists", untested("3.14")},
		{"untested_spec315_cancelMustNotThrowExceptionAndMustSignalOnError", untested("3.15")},
		{"untested_spec316_requestMustNotThrowExceptionAndMustOnErrorTheSubscriber", untested("3.16")},
	}
}

func (w *wb[T]) happyPath(e *env) {
	st := w.stage(e, true)
	st.puppet().TriggerRequest(1)
	st.puppet().TriggerRequest(1)
	received := st.expectRequest()
	st.signalNext()
	st.probe.p.expectNext(st.lastT)
	st.puppet().TriggerRequest(1)
	if received == 1 {
		st.expectRequest()
	}
	st.signalNext()
	st.probe.p.expectNext(st.lastT)
	st.puppet().SignalCancel()
	st.expectCancelling()
	e.verifyNoAsyncErrors()
}

func (w *wb[T]) spec201(e *env) {
	st := w.stage(e, true)
	st.puppet().TriggerRequest(1)
	st.expectRequest()
	st.signalNext()
}

// rule23Subscription flags Request/Cancel called from within a terminal
// signal the TCK delivered through its marker function.
type rule23Subscription struct {
	e      *env
	marker string
	signal string
	onReq  func(n int64)
}

func (s rule23Subscription) check(method string) {
	if caller, ok := callerWithMarker(s.marker); ok {
		s.e.flopf("Subscription::%s MUST NOT be called from Subscriber::%s (Rule 2.3)! (Caller: %s)", method, s.signal, caller)
	}
}

func (s rule23Subscription) Request(n int64) {
	s.check("request")
	if s.onReq != nil {
		s.onReq(n)
	}
}

func (s rule23Subscription) Cancel() { s.check("cancel") }

func newRule23Subscription(e *env, onError bool) rule23Subscription {
	if onError {
		return rule23Subscription{e: e, marker: markerOnError, signal: "onError"}
	}
	return rule23Subscription{e: e, marker: markerOnComplete, signal: "onComplete"}
}

// errTCK is the error the TCK signals to subscribers under test.
var errTCK = errors.New("tck: test exception")

func (w *wb[T]) spec203(e *env, onError bool) {
	st := w.stage(e, false)
	st.probe = newWhiteboxProbe[T](e)
	sub := w.create(e, st.probe)
	sub.OnSubscribe(newRule23Subscription(e, onError))
	if onError {
		tckSignalOnError(sub, errTCK)
	} else {
		tckSignalOnComplete(sub)
	}
	e.verifyNoAsyncErrorsNoDelay()
}

type cancelLatchSubscription struct {
	l     *latch
	onReq func(n int64)
}

func (s cancelLatchSubscription) Request(n int64) {
	if s.onReq != nil {
		s.onReq(n)
	}
}
func (s cancelLatchSubscription) Cancel()      { s.l.close() }
func (cancelLatchSubscription) String() string { return "SecondSubscription(should get cancelled)" }

func (w *wb[T]) spec205(e *env) {
	st := w.stage(e, true)
	cancelled := newLatch(e)
	st.sub().OnSubscribe(cancelLatchSubscription{l: cancelled})
	cancelled.expectClose(e.c.timeout, "expected 2nd Subscription given to subscriber to be cancelled, but `Subscription.cancel()` was not called")
	e.verifyNoAsyncErrors()
}

func (w *wb[T]) spec208(e *env) {
	st := w.stage(e, true)
	st.puppet().TriggerRequest(1)
	st.expectRequest()
	st.puppet().SignalCancel()
	st.expectCancelling()
	st.signalNext()
	st.puppet().TriggerRequest(1)
	st.puppet().TriggerRequest(1)
	e.verifyNoAsyncErrors()
}

func (w *wb[T]) spec209(e *env, preceding bool) {
	st := w.stage(e, true)
	if preceding {
		st.puppet().TriggerRequest(1)
	}
	st.sendCompletion()
	st.probe.p.expectCompletion()
	e.verifyNoAsyncErrors()
}

func (w *wb[T]) spec210(e *env, preceding bool) {
	st := w.stage(e, true)
	if preceding {
		st.puppet().TriggerRequest(1)
		st.puppet().TriggerRequest(1)
	}
	err := fmt.Errorf("tck: test exception %p", &preceding)
	st.sendError(err)
	st.probe.p.expectError(err)
	e.verifyNoAsyncErrorsNoDelay()
}

func expectNilPanic(e *env, call string, f func()) {
	e.r.Helper()
	r := catchPanic(f)
	switch {
	case r == nil:
		e.failf("%s did not panic (rule 2.13: NullPointerException)", call)
	case !isNilArgumentPanic(r):
		e.failf("%s panicked with %v; want an error matching reactive.ErrNilArgument", call, r)
	}
}

func (w *wb[T]) spec213onSubscribe(e *env) {
	st := w.stage(e, true)
	expectNilPanic(e, "onSubscribe(nil)", func() { st.sub().OnSubscribe(nil) })
	e.verifyNoAsyncErrorsNoDelay()
}

// skipUnlessNillable skips the onNext(nil) tests for element types without nil.
func skipUnlessNillable[T any](e *env) {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
	default:
		e.skipf("rule 2.13: element type %v has no nil value", reflect.TypeFor[T]())
	}
}

func (w *wb[T]) spec213onNext(e *env) {
	skipUnlessNillable[T](e)
	st := w.stage(e, true)
	var zero T
	expectNilPanic(e, "onNext(nil)", func() { st.sub().OnNext(zero) })
	e.verifyNoAsyncErrorsNoDelay()
}

func (w *wb[T]) spec213onError(e *env) {
	st := w.stage(e, true)
	expectNilPanic(e, "onError(nil)", func() { st.sub().OnError(nil) })
	e.verifyNoAsyncErrorsNoDelay()
}

func (w *wb[T]) spec308(e *env) {
	st := w.stage(e, true)
	st.puppet().TriggerRequest(2)
	requested := st.expectRequest()
	st.probe.p.expectNext(st.signalNext())
	if requested < 2 {
		st.expectRequest()
	}
	st.probe.p.expectNext(st.signalNext())
	st.probe.p.expectNone()
	st.puppet().TriggerRequest(3)
	e.verifyNoAsyncErrors()
}
