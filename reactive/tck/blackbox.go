package tck

import (
	"fmt"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// BlackboxFactory creates the subscribers verified by [VerifySubscriberBlackbox].
type BlackboxFactory[T any] struct {
	// Create returns the subscriber under test. Required.
	Create func(t *testing.T) reactive.Subscriber[T]
	// Element returns the i-th element the TCK sends. Required.
	Element func(i int) T
	// TriggerRequest optionally stimulates the subscriber to request.
	TriggerRequest func(s reactive.Subscriber[T])
}

// VerifySubscriberBlackbox runs every test of the Java
// SubscriberBlackboxVerification as a subtest named like the Java method.
func VerifySubscriberBlackbox[T any](t *testing.T, f BlackboxFactory[T], o Options) {
	t.Helper()
	verifyBlackbox(realT{t: t}, f, o)
}

func verifyBlackbox[T any](r runner, f BlackboxFactory[T], o Options, only ...string) {
	r.Helper()
	c, err := resolve(o)
	if err != nil {
		r.Errorf("%v", err)
		r.FailNow()
	}
	c.only = onlySet(only)
	if f.Create == nil || f.Element == nil {
		r.Errorf("tck: BlackboxFactory.Create and Element are required")
		r.FailNow()
	}
	b := &bb[T]{f: f}
	runCases(r, c, b.cases())
}

type bb[T any] struct{ f BlackboxFactory[T] }

// bbProxy is the Java BlackboxSubscriberProxy: it records what the TCK sends
// to the subscriber under test, then forwards it.
type bbProxy[T any] struct {
	sub   reactive.Subscriber[T]
	probe *probe[T]
}

func (p *bbProxy[T]) OnSubscribe(s reactive.Subscription) { p.sub.OnSubscribe(s) }
func (p *bbProxy[T]) OnNext(v T)                          { p.probe.registerOnNext(v); p.sub.OnNext(v) }

func (p *bbProxy[T]) OnError(err error) { p.probe.registerOnError(err); p.sub.OnError(err) }

func (p *bbProxy[T]) OnComplete() { p.probe.registerOnComplete(); p.sub.OnComplete() }

type bbStage[T any] struct {
	*manualPublisher[T]
	tees  *manualSubscriber[T]
	proxy *bbProxy[T]
}

func (b *bb[T]) stage(e *env) *bbStage[T] {
	e.r.Helper()
	st := &bbStage[T]{manualPublisher: newManualPublisher[T](e)}
	st.tees = newSubscribedManual(e, helperPublisher(e, b.f.Element, reactive.Unbounded))
	st.proxy = &bbProxy[T]{sub: b.f.Create(e.r.T()), probe: newProbe[T](e)}
	st.Subscribe(st.proxy)
	return st
}

func (st *bbStage[T]) signalNext() T {
	v := st.tees.requestNextElement()
	st.sendNext(v)
	return v
}

func (b *bb[T]) trigger(st *bbStage[T]) {
	if b.f.TriggerRequest != nil {
		b.f.TriggerRequest(st.proxy.sub)
	}
}

func (b *bb[T]) cases() []tcase {
	return []tcase{
		{"required_spec201_blackbox_mustSignalDemandViaSubscriptionRequest", b.spec201},
		{"untested_spec202_blackbox_shouldAsynchronouslyDispatch", untested("2.2")},
		{"required_spec203_blackbox_mustNotCallMethodsOnSubscriptionOrPublisherInOnComplete", func(e *env) { b.spec203(e, false) }},
		{"required_spec203_blackbox_mustNotCallMethodsOnSubscriptionOrPublisherInOnError", func(e *env) { b.spec203(e, true) }},
		{"untested_spec204_blackbox_mustConsiderTheSubscriptionAsCancelledInAfterRecievingOnCompleteOrOnError", untested("2.4")},
		{"required_spec205_blackbox_mustCallSubscriptionCancelIfItAlreadyHasAnSubscriptionAndReceivesAnotherOnSubscribeSignal", b.spec205},
		{"untested_spec206_blackbox_mustCallSubscriptionCancelIfItIsNoLongerValid", untested("2.6")},
		{"untested_spec207_blackbox_mustEnsureAllCallsOnItsSubscriptionTakePlaceFromTheSameThreadOrTakeCareOfSynchronization", untested("2.7")},
		{"untested_spec208_blackbox_mustBePreparedToReceiveOnNextSignalsAfterHavingCalledSubscriptionCancel", untested("2.8")},
		{"required_spec209_blackbox_mustBePreparedToReceiveAnOnCompleteSignalWithPrecedingRequestCall", func(e *env) { b.spec209(e, true) }},
		{"required_spec209_blackbox_mustBePreparedToReceiveAnOnCompleteSignalWithoutPrecedingRequestCall", func(e *env) { b.spec209(e, false) }},
		{"required_spec210_blackbox_mustBePreparedToReceiveAnOnErrorSignalWithPrecedingRequestCall", func(e *env) { b.spec210(e, true) }},
		{"required_spec210_blackbox_mustBePreparedToReceiveAnOnErrorSignalWithoutPrecedingRequestCall", func(e *env) { b.spec210(e, false) }},
		{"untested_spec211_blackbox_mustMakeSureThatAllCallsOnItsMethodsHappenBeforeTheProcessingOfTheRespectiveEvents", untested("2.11")},
		{"untested_spec212_blackbox_mustNotCallOnSubscribeMoreThanOnceBasedOnObjectEquality", untested("2.12")},
		{"untested_spec213_blackbox_failingOnSignalInvocation", untested("2.13")},
		{"required_spec213_blackbox_onSubscribe_mustThrowNullPointerExceptionWhenParametersAreNull", b.spec213onSubscribe},
		{"required_spec213_blackbox_onNext_mustThrowNullPointerExceptionWhenParametersAreNull", b.spec213onNext},
		{"required_spec213_blackbox_onError_mustThrowNullPointerExceptionWhenParametersAreNull", b.spec213onError},
		{"untested_spec301_blackbox_mustNotBeCalledOutsideSubscriberContext", untested("3.1")},
		{"untested_spec308_blackbox_requestMustRegisterGivenNumberElementsToBeProduced", untested("3.8")},
		{"untested_spec310_blackbox_requestMaySynchronouslyCallOnNextOnSubscriber", untested("3.10")},
		{"untested_spec311_blackbox_requestMaySynchronouslyCallOnCompleteOrOnError", untested("3.11")},
		{"untested_spec314_blackbox_cancelMayCauseThePublisherToShutdownIfNoOtherSubscriptionExists", untested("3.14")},
		{"untested_spec315_blackbox_cancelMustNotThrowExceptionAndMustSignalOnError", untested("3.15")},
		{"untested_spec316_blackbox_requestMustNotThrowExceptionAndMustOnErrorTheSubscriber", untested("3.16")},
	}
}

func (b *bb[T]) spec201(e *env) {
	st := b.stage(e)
	b.trigger(st)
	requested := st.expectRequest()
	toEmit := min(requested, 512) // protects against huge demand
	for i := range toEmit {
		if i%10 == 0 && st.cancelled.isClosed() {
			break
		}
		st.signalNext()
	}
	st.sendCompletion()
}

func (b *bb[T]) spec203(e *env, onError bool) {
	sub := b.f.Create(e.r.T())
	sub.OnSubscribe(newRule23Subscription(e, onError))
	if onError {
		tckSignalOnError(sub, errTCK)
	} else {
		tckSignalOnComplete(sub)
	}
	e.verifyNoAsyncErrorsNoDelay()
}

func (b *bb[T]) spec205(e *env) {
	st := b.stage(e)
	cancelled := newLatch(e)
	st.sub().OnSubscribe(cancelLatchSubscription{l: cancelled, onReq: func(n int64) {
		e.flopf("subscriber %T illegally called `subscription.request(%d)` on a second subscription (rule 2.5)", st.proxy.sub, n)
	}})
	cancelled.expectClose(e.c.timeout, "expected SecondSubscription given to subscriber to be cancelled, but `Subscription.cancel()` was not called")
	e.verifyNoAsyncErrorsNoDelay()
	st.sendCompletion()
}

func (b *bb[T]) spec209(e *env, preceding bool) {
	st := b.stage(e)
	if preceding {
		b.trigger(st)
		st.expectRequest()
	}
	st.sendCompletion()
	st.proxy.probe.expectCompletion()
}

func (b *bb[T]) spec210(e *env, preceding bool) {
	st := b.stage(e)
	if preceding {
		b.trigger(st)
		st.expectRequest()
	}
	st.sendError(fmt.Errorf("%w (blackbox)", errTCK))
	_ = st.proxy.probe.expectAnyError()
}

type noopSubscription struct{}

func (noopSubscription) Request(int64) {}
func (noopSubscription) Cancel()       {}

func (b *bb[T]) spec213onSubscribe(e *env) {
	sub := b.f.Create(e.r.T())
	expectNilPanic(e, "onSubscribe(nil)", func() { sub.OnSubscribe(nil) })
	e.verifyNoAsyncErrorsNoDelay()
}

func (b *bb[T]) spec213onNext(e *env) {
	skipUnlessNillable[T](e)
	sub := b.f.Create(e.r.T())
	sub.OnSubscribe(noopSubscription{})
	var zero T
	expectNilPanic(e, "onNext(nil)", func() { sub.OnNext(zero) })
	e.verifyNoAsyncErrorsNoDelay()
}

func (b *bb[T]) spec213onError(e *env) {
	sub := b.f.Create(e.r.T())
	sub.OnSubscribe(noopSubscription{})
	expectNilPanic(e, "onError(nil)", func() { sub.OnError(nil) })
	e.verifyNoAsyncErrorsNoDelay()
}
