package tck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// PublisherFactory creates the publishers verified by [VerifyPublisher].
type PublisherFactory[T any] struct {
	// Create returns a publisher of exactly n elements followed by OnComplete;
	// for n == reactive.Unbounded an infinite one. Required.
	Create func(t *testing.T, n int64) reactive.Publisher[T]
	// CreateFailed returns a publisher that signals OnSubscribe then OnError.
	// nil skips the failed-publisher tests.
	CreateFailed func(t *testing.T) reactive.Publisher[T]
}

// VerifyPublisher runs every test of the Java PublisherVerification as a
// subtest named like the Java method.
func VerifyPublisher[T any](t *testing.T, f PublisherFactory[T], o Options) {
	t.Helper()
	verifyPublisher(realT{t: t}, f, o)
}

func verifyPublisher[T any](r runner, f PublisherFactory[T], o Options, only ...string) {
	r.Helper()
	c, err := resolve(o)
	if err != nil {
		r.Errorf("%v", err)
		r.FailNow()
	}
	c.only = onlySet(only)
	if f.Create == nil {
		r.Errorf("tck: PublisherFactory.Create is nil")
		r.FailNow()
	}
	v := &pv[T]{c: c, create: func(e *env, n int64) reactive.Publisher[T] { return f.Create(e.r.T(), n) }}
	if f.CreateFailed != nil {
		v.createFailed = func(e *env) reactive.Publisher[T] { return f.CreateFailed(e.r.T()) }
	}
	runCases(r, c, v.cases())
}

type tcase struct {
	name string
	run  func(e *env)
}

func runCases(r runner, c config, cases []tcase) {
	for _, tc := range cases {
		if c.only != nil && !c.only[tc.name] {
			continue
		}
		r.Run(tc.name, func(sr runner) {
			e := newEnv(sr, c)
			defer func() { e.recoverInto(recover()) }()
			tc.run(e)
			e.verifyNoAsyncErrorsNoDelay()
		})
	}
}

func untested(rule string) func(e *env) {
	return func(e *env) {
		e.skipf("untested: rule %s is not verifiable without hooks into the implementation", rule)
	}
}

// pv holds the publisher verification; the identity processor verification
// reuses it with a processor behind create.
type pv[T any] struct {
	c            config
	create       func(e *env, n int64) reactive.Publisher[T]
	createFailed func(e *env) reactive.Publisher[T] // nil: no failed publisher
}

// active is the Java activePublisherTest.
func (v *pv[T]) active(e *env, n int64, completion bool, body func(e *env, pub reactive.Publisher[T])) {
	e.r.Helper()
	v.checkRunnable(e, n, completion)
	body(e, v.create(e, n))
	e.verifyNoAsyncErrorsNoDelay()
}

func (v *pv[T]) checkRunnable(e *env, n int64, completion bool) {
	e.r.Helper()
	switch {
	case n > v.c.maxElements:
		e.skipf("publisher supports fewer than %d elements (MaxElements %d)", n, v.c.maxElements)
	case completion && v.c.maxElements == reactive.Unbounded:
		e.skipf("publisher never completes (MaxElements = Unbounded), this test requires OnComplete")
	}
}

// optional runs body on its own goroutine against a recording runner; a
// failure becomes a skip carrying the failure text.
func optional(e *env, skipPrefix string, body func(e *env)) {
	e.r.Helper()
	soft := newSoftRunner(e.r.T(), e.r.Name()+"/optional")
	soft.exec(func(r runner) {
		ce := newEnv(r, e.c)
		defer func() { ce.recoverInto(recover()) }()
		body(ce)
		ce.verifyNoAsyncErrorsNoDelay()
	})
	switch {
	case soft.Failed():
		e.skipf("%s: %s", skipPrefix, soft.Output())
	case soft.Skipped():
		e.skipf("%s", soft.Output())
	}
}

func (v *pv[T]) optionalActive(e *env, skipPrefix string, n int64, completion bool, body func(e *env, pub reactive.Publisher[T])) {
	e.r.Helper()
	v.checkRunnable(e, n, completion)
	optional(e, skipPrefix, func(ce *env) { body(ce, v.create(ce, n)) })
}

func (v *pv[T]) failedTest(e *env, body func(e *env, pub reactive.Publisher[T])) {
	e.r.Helper()
	if v.createFailed == nil {
		e.skipf("no failed publisher: set CreateFailed to run this test")
	}
	body(e, v.createFailed(e))
}

func (v *pv[T]) unicastSkip(e *env) {
	if v.c.unicast() {
		e.skipf("optional rule 1.11: publisher is unicast (MaxSubscribers 1)")
	}
}

func (v *pv[T]) cases() []tcase {
	cs := []tcase{
		{"required_createPublisher1MustProduceAStreamOfExactly1Element", v.createPublisher1},
		{"required_createPublisher3MustProduceAStreamOfExactly3Elements", v.createPublisher3},
		{"required_validate_maxElementsFromPublisher", v.validateMaxElements},
		{"required_validate_boundedDepthOfOnNextAndRequestRecursion", v.validateDepth},
		{"required_spec101_subscriptionRequestMustResultInTheCorrectNumberOfProducedElements", v.spec101},
		{"required_spec102_maySignalLessThanRequestedAndTerminateSubscription", v.spec102},
		{"stochastic_spec103_mustSignalOnMethodsSequentially", v.spec103},
		{"optional_spec104_mustSignalOnErrorWhenFails", v.spec104optional},
		{"required_spec105_mustSignalOnCompleteWhenFiniteStreamTerminates", v.spec105},
		{"optional_spec105_emptyStreamMustTerminateBySignallingOnComplete", v.spec105optional},
		{"untested_spec106_mustConsiderSubscriptionCancelledAfterOnErrorOrOnCompleteHasBeenCalled", untested("1.6")},
		{"required_spec107_mustNotEmitFurtherSignalsOnceOnCompleteHasBeenSignalled", v.spec107},
		{"untested_spec107_mustNotEmitFurtherSignalsOnceOnErrorHasBeenSignalled", untested("1.7")},
		{"untested_spec108_possiblyCanceledSubscriptionShouldNotReceiveOnErrorOrOnCompleteSignals", untested("1.8")},
		{"untested_spec109_subscribeShouldNotThrowNonFatalThrowable", untested("1.9")},
		{"required_spec109_subscribeThrowNPEOnNullSubscriber", v.spec109nil},
		{"required_spec109_mustIssueOnSubscribeForNonNullSubscriber", v.spec109onSubscribe},
		{"required_spec109_mayRejectCallsToSubscribeIfPublisherIsUnableOrUnwillingToServeThemRejectionMustTriggerOnErrorAfterOnSubscribe", v.spec109reject},
		{"untested_spec110_rejectASubscriptionRequestIfTheSameSubscriberSubscribesTwice", untested("1.10")},
		{"optional_spec111_maySupportMultiSubscribe", v.spec111multi},
		{"optional_spec111_registeredSubscribersMustReceiveOnNextOrOnCompleteSignals", v.spec111registered},
		{"optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingOneByOne", v.spec111oneByOne},
		{"optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingManyUpfront", v.spec111manyUpfront},
		{"optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingManyUpfrontAndCompleteAsExpected", v.spec111manyUpfrontComplete},
		{"required_spec302_mustAllowSynchronousRequestCallsFromOnNextAndOnSubscribe", v.spec302},
		{"required_spec303_mustNotAllowUnboundedRecursion", v.spec303},
		{"untested_spec304_requestShouldNotPerformHeavyComputations", untested("3.4")},
		{"untested_spec305_cancelMustNotSynchronouslyPerformHeavyComputation", untested("3.5")},
		{"required_spec306_afterSubscriptionIsCancelledRequestMustBeNops", v.spec306},
		{"required_spec307_afterSubscriptionIsCancelledAdditionalCancelationsMustBeNops", v.spec307},
		{"required_spec309_requestZeroMustSignalIllegalArgumentException", v.spec309zero},
		{"required_spec309_requestNegativeNumberMustSignalIllegalArgumentException", v.spec309negative},
		{"optional_spec309_requestNegativeNumberMaySignalIllegalArgumentExceptionWithSpecificMessage", v.spec309message},
		{"required_spec312_cancelMustMakeThePublisherToEventuallyStopSignaling", v.spec312},
		{"required_spec313_cancelMustMakeThePublisherEventuallyDropAllReferencesToTheSubscriber", v.spec313},
		{"required_spec317_mustSupportAPendingElementCountUpToLongMaxValue", v.spec317pending},
		{"required_spec317_mustSupportACumulativePendingElementCountUpToLongMaxValue", v.spec317cumulative},
		{"required_spec317_mustNotSignalOnErrorWhenPendingAboveLongMaxValue", v.spec317above},
	}
	if v.c.unicast() {
		cs = append(cs, tcase{"go_unicast_mustRejectSecondSubscriberWithOnErrorAfterOnSubscribe", v.unicastRejects})
	}
	return cs
}

func (v *pv[T]) createPublisher1(e *env) {
	v.active(e, 1, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		if _, ok := sub.requestNextElementOrEndOfStream(fmt.Sprintf("timeout while waiting for next element from Publisher %T", pub)); !ok {
			e.failf("publisher %T produced no elements", pub)
		}
		sub.requestEndOfStream("did not receive expected stream completion")
	})
}

func (v *pv[T]) createPublisher3(e *env) {
	v.active(e, 3, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		for _, msg := range []string{"produced no elements", "produced only 1 element", "produced only 2 elements"} {
			if _, ok := sub.requestNextElementOrEndOfStream(fmt.Sprintf("timeout while waiting for next element from Publisher %T", pub)); !ok {
				e.failf("publisher %T %s", pub, msg)
			}
		}
		sub.requestEndOfStream("did not receive expected stream completion")
	})
}

func (v *pv[T]) validateMaxElements(e *env) {
	if v.c.maxElements < 0 {
		e.failf("MaxElements must be >= 0 (or NoElements), was %d", v.c.maxElements)
	}
}

func (v *pv[T]) validateDepth(e *env) {
	if v.c.depth < 1 {
		e.failf("BoundedRecursionDepth must be >= 1, was %d", v.c.depth)
	}
}

func (v *pv[T]) spec101(e *env) {
	v.active(e, 5, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		defer sub.cancel()
		sub.expectNone(fmt.Sprintf("publisher %T produced value before the first `request`: ", pub))
		sub.request(1)
		sub.nextElement(fmt.Sprintf("publisher %T produced no element after first `request`", pub))
		sub.expectNone(fmt.Sprintf("publisher %T produced unrequested: ", pub))
		sub.request(1)
		sub.request(2)
		sub.nextElements(3, fmt.Sprintf("publisher %T produced less than 3 elements after two respective `request` calls", pub))
		sub.expectNone(fmt.Sprintf("publisher %T produced unrequested ", pub))
	})
}

func (v *pv[T]) spec102(e *env) {
	v.active(e, 3, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(10)
		sub.nextElements(3, "did not receive expected element or completion")
		sub.expectCompletion("did not receive expected stream completion")
	})
}

// accessBarrier is the Java ConcurrentAccessBarrier: it tracks the goroutine
// inside a signal; nesting on the same goroutine is allowed (synchronous
// publishers), entry from another goroutine is a rule 1.3 violation.
type accessBarrier struct {
	e        *env
	current  atomic.Uint64 // goroutine id inside a signal, 0 = none
	previous atomic.Pointer[string]
}

func (b *accessBarrier) enter(signal string) {
	id := goid()
	if !b.current.CompareAndSwap(0, id) && !b.isSynchronous(id) {
		prev := ""
		if p := b.previous.Load(); p != nil {
			prev = *p
		}
		b.e.flopf("illegal concurrent access detected (entering critical section)! goroutine %d emitted %s signal, before goroutine %d finished its %s signal (rule 1.3)",
			id, signal, b.current.Load(), prev)
	}
	b.previous.Store(&signal)
}

func (b *accessBarrier) leave(signal string) {
	b.current.Store(0)
	b.previous.Store(&signal)
}

func (b *accessBarrier) isSynchronous(id uint64) bool {
	return b.previous.Load() != nil && b.current.Load() == id
}

func (v *pv[T]) spec103(e *env) {
	const iterations, elements = 100, 10
	if v.c.skipStochastic {
		e.skipf("stochastic test disabled (SkipStochastic)")
	}
	for run := range iterations {
		v.active(e, elements, true, func(e *env, pub reactive.Publisher[T]) {
			done := newLatch(e)
			var got atomic.Int64
			var subs atomic.Pointer[reactive.Subscription]
			b := &accessBarrier{e: e}
			sub := &funcSubscriber[T]{
				onSubscribe: func(s reactive.Subscription) {
					b.enter("onSubscribe()")
					subs.Store(&s)
					e.track(s)
					s.Request(1)
					b.leave("onSubscribe()")
				},
				onNext: func(x T) {
					signal := fmt.Sprintf("onNext(%v)", x)
					b.enter(signal)
					if got.Add(1) <= elements { // one more than the stream has (some publishers need it)
						if s := subs.Load(); s != nil {
							(*s).Request(1)
						}
					}
					b.leave(signal)
				},
				onError: func(err error) {
					signal := fmt.Sprintf("onError(%v)", err)
					b.enter(signal)
					b.leave(signal)
				},
				onComplete: func() {
					b.enter("onComplete()")
					b.leave("onComplete()")
					done.close()
				},
			}
			pub.Subscribe(sub)
			done.expectClose(elements*e.c.timeout, fmt.Sprintf(
				"failed in iteration %d of %d. Expected completion signal after signalling %d elements (signalled %d), yet did not receive it",
				run, iterations, elements, got.Load()))
		})
	}
}

// funcSubscriber is a Subscriber made of functions (Java anonymous classes).
type funcSubscriber[T any] struct {
	onSubscribe func(s reactive.Subscription)
	onNext      func(v T)
	onError     func(err error)
	onComplete  func()
}

func (f *funcSubscriber[T]) OnSubscribe(s reactive.Subscription) { f.onSubscribe(s) }
func (f *funcSubscriber[T]) OnNext(v T)                          { f.onNext(v) }
func (f *funcSubscriber[T]) OnError(err error)                   { f.onError(err) }
func (f *funcSubscriber[T]) OnComplete()                         { f.onComplete() }

func (v *pv[T]) spec104optional(e *env) {
	if v.createFailed == nil {
		e.skipf("optional rule 1.4: no failed publisher (CreateFailed is nil)")
	}
	optional(e, "optional rule 1.4 not met", func(e *env) {
		pub := v.createFailed(e)
		onError, onSubscribe := newLatch(e), newLatch(e)
		pub.Subscribe(&funcSubscriber[T]{
			onSubscribe: func(s reactive.Subscription) {
				e.track(s)
				onSubscribe.assertOpen("only one onSubscribe call expected")
				onSubscribe.close()
			},
			onNext: func(x T) { e.flopf("unexpected Subscriber::onNext(%v)", x) },
			onError: func(error) {
				onSubscribe.assertClosed("onSubscribe should be called prior to onError always")
				onError.assertOpen(fmt.Sprintf("error-state Publisher %T called `onError` twice on new Subscriber", pub))
				onError.close()
			},
			onComplete: func() { e.flopf("unexpected Subscriber::onComplete()") },
		})
		onSubscribe.expectClose(e.c.timeout, "should have received onSubscribe")
		onError.expectClose(e.c.timeout, fmt.Sprintf("error-state Publisher %T did not call `onError` on new Subscriber", pub))
		e.verifyNoAsyncErrors()
	})
}

func (v *pv[T]) spec105(e *env) {
	v.active(e, 3, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.requestNextElement()
		sub.requestNextElement()
		sub.requestNextElement()
		sub.requestEndOfStream("did not receive expected stream completion")
		sub.expectNone("did not expect an element but got element")
	})
}

func (v *pv[T]) spec105optional(e *env) {
	v.optionalActive(e, "optional rule 1.5: empty stream not supported", 0, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(1)
		sub.expectCompletion("did not receive expected stream completion")
		sub.expectNone("did not expect an element but got element")
	})
}

func (v *pv[T]) spec107(e *env) {
	v.active(e, 1, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(10)
		sub.nextElement("did not receive expected element")
		sub.expectCompletion("did not receive expected stream completion")
		sub.request(10)
		sub.expectNone("did not expect an element but got element")
	})
}

func (v *pv[T]) spec109nil(e *env) {
	v.active(e, 0, false, func(e *env, pub reactive.Publisher[T]) {
		r := catchPanic(func() { pub.Subscribe(nil) })
		if r == nil {
			e.flopf("publisher did not panic (rule 1.9: NullPointerException) when given a nil Subscriber in Subscribe")
		} else if !isNilArgumentPanic(r) {
			e.flopf("publisher panicked with %v for a nil Subscriber; want an error matching reactive.ErrNilArgument", r)
		}
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec109onSubscribe(e *env) {
	v.active(e, 0, false, func(e *env, pub reactive.Publisher[T]) {
		onSubscribe := newLatch(e)
		var held atomic.Pointer[reactive.Subscription]
		defer func() {
			if s := held.Swap(nil); s != nil {
				(*s).Cancel()
			}
		}()
		pub.Subscribe(&funcSubscriber[T]{
			onSubscribe: func(s reactive.Subscription) {
				held.Store(&s)
				onSubscribe.assertOpen("only one onSubscribe call expected")
				onSubscribe.close()
			},
			onNext:     func(T) { onSubscribe.assertClosed("onSubscribe should be called prior to onNext always") },
			onError:    func(error) { onSubscribe.assertClosed("onSubscribe should be called prior to onError always") },
			onComplete: func() { onSubscribe.assertClosed("onSubscribe should be called prior to onComplete always") },
		})
		onSubscribe.expectClose(e.c.timeout, "should have received onSubscribe")
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec109reject(e *env) {
	v.failedTest(e, func(e *env, pub reactive.Publisher[T]) {
		onError, onSubscribe := newLatch(e), newLatch(e)
		sub := newManualSubscriber[T](e)
		sub.onErrorHook = func(error) {
			onSubscribe.assertClosed("onSubscribe should be called prior to onError always")
			onError.assertOpen("only one onError call expected")
			onError.close()
		}
		sub.onSubscribeHook = func(s reactive.Subscription) {
			e.track(s)
			onSubscribe.assertOpen("only one onSubscribe call expected")
			onSubscribe.close()
		}
		pub.Subscribe(sub)
		onSubscribe.expectClose(e.c.timeout, "should have received onSubscribe")
		onError.expectClose(e.c.timeout, "should have received onError")
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec111multi(e *env) {
	v.unicastSkip(e)
	v.optionalActive(e, "optional rule 1.11 not met", 1, false, func(e *env, pub reactive.Publisher[T]) {
		sub1 := newSubscribedManual(e, pub)
		sub2 := newSubscribedManual(e, pub)
		defer sub2.cancel()
		defer sub1.cancel()
		e.verifyNoAsyncErrors()
	})
}

func (v *pv[T]) spec111registered(e *env) {
	v.unicastSkip(e)
	v.optionalActive(e, "optional rule 1.11 not met", 1, false, func(e *env, pub reactive.Publisher[T]) {
		sub1 := newSubscribedManual(e, pub)
		sub2 := newSubscribedManual(e, pub)
		defer sub2.cancel()
		defer sub1.cancel()
		sub1.requestNextElementOrEndOfStream("did not receive expected stream completion")
		sub2.requestNextElementOrEndOfStream("did not receive expected stream completion")
		e.verifyNoAsyncErrors()
	})
}

func sameSequence[T any](e *env, a, b []T, msg string) {
	if !reflect.DeepEqual(a, b) {
		e.failf("%s: %v vs %v", msg, a, b)
	}
}

func (v *pv[T]) spec111oneByOne(e *env) {
	v.unicastSkip(e)
	v.optionalActive(e, "optional rule 1.11: publisher is not multicast-consistent", 5, true, func(e *env, pub reactive.Publisher[T]) {
		sub1, sub2, sub3 := newSubscribedManual(e, pub), newSubscribedManual(e, pub), newSubscribedManual(e, pub)
		m := func(n, which int) string {
			return fmt.Sprintf("publisher %T did not produce the requested %d element(s) on subscriber %d", pub, n, which)
		}
		sub1.request(1)
		x1 := sub1.nextElement(m(1, 1))
		sub2.request(2)
		y1 := sub2.nextElements(2, m(2, 2))
		sub1.request(1)
		x2 := sub1.nextElement(m(1, 1))
		sub3.request(3)
		z1 := sub3.nextElements(3, m(3, 3))
		sub3.request(1)
		z2 := sub3.nextElement(m(1, 3))
		sub3.request(1)
		z3 := sub3.nextElement(m(1, 3))
		sub3.requestEndOfStream(fmt.Sprintf("publisher %T did not complete the stream as expected on 3rd subscriber", pub))
		sub2.request(3)
		y2 := sub2.nextElements(3, m(3, 2))
		sub2.requestEndOfStream(fmt.Sprintf("publisher %T did not complete the stream as expected on 2nd subscriber", pub))
		sub1.request(2)
		x3 := sub1.nextElements(2, m(2, 1))
		sub1.request(1)
		x4 := sub1.nextElement(m(1, 1))
		sub1.requestEndOfStream(fmt.Sprintf("publisher %T did not complete the stream as expected on 1st subscriber", pub))
		r := append(append([]T{x1, x2}, x3...), x4)
		sameSequence(e, r, append(y1, y2...), "publisher did not produce the same element sequence for subscribers 1 and 2")
		sameSequence(e, r, append(z1, z2, z3), "publisher did not produce the same element sequence for subscribers 1 and 3")
	})
}

func (*pv[T]) manyUpfront(e *env, pub reactive.Publisher[T], complete bool) {
	sub1, sub2, sub3 := newSubscribedManual(e, pub), newSubscribedManual(e, pub), newSubscribedManual(e, pub)
	sub1.request(4)
	sub2.request(4)
	sub3.request(4)
	r1 := sub1.nextElements(3, "did not receive expected element or completion")
	r2 := sub2.nextElements(3, "did not receive expected element or completion")
	r3 := sub3.nextElements(3, "did not receive expected element or completion")
	if complete {
		sub1.expectCompletion("did not receive expected stream completion")
		sub2.expectCompletion("did not receive expected stream completion")
		sub3.expectCompletion("did not receive expected stream completion")
	}
	sameSequence(e, r1, r2, "expected elements to be signaled in the same sequence to 1st and 2nd subscribers")
	sameSequence(e, r2, r3, "expected elements to be signaled in the same sequence to 2nd and 3rd subscribers")
}

func (v *pv[T]) spec111manyUpfront(e *env) {
	v.unicastSkip(e)
	v.optionalActive(e, "optional rule 1.11: publisher is not multicast-consistent", 3, false, func(e *env, pub reactive.Publisher[T]) {
		v.manyUpfront(e, pub, false)
	})
}

func (v *pv[T]) spec111manyUpfrontComplete(e *env) {
	v.unicastSkip(e)
	v.optionalActive(e, "optional rule 1.11: publisher is not multicast-consistent", 3, true, func(e *env, pub reactive.Publisher[T]) {
		v.manyUpfront(e, pub, true)
	})
}

func (v *pv[T]) spec302(e *env) {
	v.active(e, 6, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newManualSubscriber[T](e)
		sub.onSubscribeHook = func(s reactive.Subscription) {
			sub.defaultOnSubscribe(s)
			s.Request(1)
			s.Request(1)
			s.Request(1)
		}
		sub.onNextHook = func(T) {
			if s, ok := sub.subscription.get(); ok {
				s.Request(1)
			}
		}
		subscribe(e, pub, sub)
		e.verifyNoAsyncErrors()
	})
}

// depthCounter is the rule 3.3 substitute for the Java ThreadLocal: +1 on
// OnNext entry, -1 on return. Rule 1.3 forbids overlapping signals, so an
// OnNext entered while another runs is either synchronous recursion or a rule
// 1.3 breach; the goroutine ids tell them apart in the message.
type depthCounter struct {
	depth atomic.Int64
	outer atomic.Uint64 // goroutine of the outermost OnNext
}

func (d *depthCounter) enter() (depth int64, same bool, outer, self uint64) {
	self = goid()
	depth = d.depth.Add(1)
	if depth == 1 {
		d.outer.Store(self)
	}
	outer = d.outer.Load()
	return depth, outer == self, outer, self
}

func (d *depthCounter) leave() { d.depth.Add(-1) }

func (v *pv[T]) spec303(e *env) {
	bound := v.c.depth
	oneMore := bound + 1
	v.active(e, oneMore, false, func(e *env, pub reactive.Publisher[T]) {
		done := newLatch(e)
		var received atomic.Int64
		var dc depthCounter
		sub := newManualSubscriber[T](e)
		sub.onNextHook = func(T) {
			n := received.Add(1)
			depth, same, outer, self := dc.enter()
			defer dc.leave()
			if depth > bound {
				kind := "synchronous recursion (rule 3.3)"
				if !same {
					kind = fmt.Sprintf("concurrent OnNext from goroutine %d while goroutine %d was in OnNext (rule 1.3)", self, outer)
				}
				e.flopf("got %d onNext calls within goroutine %d, yet expected recursive bound was %d: %s", depth, self, bound, kind)
				done.close()
				return
			}
			if n >= oneMore {
				done.close()
				return
			}
			if s, ok := sub.subscription.get(); ok {
				s.Request(1)
			}
		}
		sub.onCompleteHook = func() {
			sub.OnCompleteDefault()
			done.close()
		}
		sub.onErrorHook = func(err error) {
			sub.OnErrorDefault(err)
			done.close()
		}
		subscribe(e, pub, sub)
		defer sub.cancel()
		sub.request(1) // kick off request -> onNext -> request -> ...
		done.expectClose(e.c.timeout, fmt.Sprintf(
			"unable to validate call stack depth safety, awaited at-most %d signals or completion", oneMore))
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec306(e *env) {
	v.active(e, 3, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.cancel()
		sub.request(1)
		sub.request(1)
		sub.request(1)
		sub.expectNone("did not expect an element but got element")
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec307(e *env) {
	v.active(e, 1, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		s := sub.subscription.value()
		s.Cancel()
		s.Cancel()
		s.Cancel()
		sub.expectNone("did not expect an element but got element")
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec309zero(e *env) {
	v.active(e, 10, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(0)
		_ = sub.expectError(reactive.ErrNonPositiveRequest, "expected onError(ErrNonPositiveRequest) for request(0) (rule 3.9)")
	})
}

func randomNegative() int64 { return -rand.Int64N(math.MaxInt32) - 1 }

func (v *pv[T]) spec309negative(e *env) {
	v.active(e, 10, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		n := randomNegative()
		sub.request(n)
		_ = sub.expectError(reactive.ErrNonPositiveRequest, fmt.Sprintf("expected onError(ErrNonPositiveRequest) for request(%d) (rule 3.9)", n))
	})
}

func (v *pv[T]) spec309message(e *env) {
	v.optionalActive(e, "optional rule 3.9 message", 10, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(randomNegative())
		err := sub.expectError(reactive.ErrNonPositiveRequest, "expected onError(ErrNonPositiveRequest) (rule 3.9)")
		msg := err.Error()
		for _, part := range []string{"3.9", "non-positive subscription request", "negative subscription request"} {
			if containsFold(msg, part) {
				return
			}
		}
		e.failf("got the expected error but its message lacks any of [3.9, non-positive subscription request, negative subscription request]: %q", msg)
	})
}

func (v *pv[T]) spec312(e *env) {
	const elements, demand1, demand2 = 20, 10, 5
	const total = demand1 + demand2
	v.active(e, elements, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(demand1)
		sub.request(demand2)
		// first see the publisher running, then cancel (see the Java TCK's note)
		sub.nextElement("did not receive expected element")
		sub.cancel()
		signalled := 1
		for {
			sub.expectNone("did not expect an element but got element") // records an async error per late element
			if _, ok := e.dropAsyncError(); !ok {
				break
			}
			signalled++
			if signalled > total {
				e.failf("publisher signalled [%d] elements, which is more than the signalled demand: %d", signalled, total)
			}
		}
	})
}

func (v *pv[T]) spec313(e *env) {
	v.active(e, 3, false, func(e *env, pub reactive.Publisher[T]) {
		wp := func() weak.Pointer[manualSubscriber[T]] {
			sub := newManualSubscriber[T](e)
			sub.untracked = true
			subscribe(e, pub, sub)
			wp := weak.Make(sub)
			sub.request(1)
			sub.nextElement("did not receive expected element")
			sub.cancel()
			return wp
		}()
		e.sleep(v.c.gc)
		runtime.GC()
		runtime.GC()
		deadline := time.Now().Add(e.c.timeout)
		for wp.Value() != nil {
			if time.Now().After(deadline) {
				e.flopf("publisher %T did not drop reference to test subscriber after subscription cancellation (rule 3.13)", pub)
				break
			}
			e.sleep(time.Millisecond * 5)
			runtime.GC()
		}
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec317pending(e *env) {
	v.active(e, 3, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		sub.request(reactive.Unbounded)
		sub.nextElements(3, "did not receive expected element or completion")
		sub.expectCompletion("did not receive expected stream completion")
		e.verifyNoAsyncErrorsNoDelay()
	})
}

func (v *pv[T]) spec317cumulative(e *env) {
	v.active(e, 3, true, func(e *env, pub reactive.Publisher[T]) {
		sub := newSubscribedManual(e, pub)
		defer sub.cancel()
		sub.request(math.MaxInt64 / 2) // pending = MaxInt64/2
		sub.request(math.MaxInt64 / 2) // pending = MaxInt64-1
		sub.request(1)                 // pending = MaxInt64
		sub.nextElements(3, "did not receive expected element or completion")
		sub.expectCompletion("did not receive expected stream completion")
		e.verifyNoAsyncErrorsNoDelay()
	})
}

// spec317above is the Java test (request 1, then MaxInt64-1 from each of ten
// onNext calls, so pending demand would exceed MaxInt64) with one check
// more: every element requested before the cancel must arrive. The Java test
// only waits for errors, so a publisher whose demand counter wraps negative
// and then stops delivering passed it.
func (v *pv[T]) spec317above(e *env) {
	const requests = 10
	v.active(e, math.MaxInt32, false, func(e *env, pub reactive.Publisher[T]) {
		sub := newManualSubscriber[T](e)
		var received atomic.Int64
		done := newLatch(e)
		sub.onNextHook = func(x T) { // blackhole subscriber
			s, ok := sub.subscription.get()
			if !ok {
				e.flopf("Subscriber::onNext(%v) called before Subscriber::onSubscribe", x)
				return
			}
			if received.Add(1) <= requests {
				s.Request(math.MaxInt64 - 1)
			} else {
				s.Cancel()
				done.close()
			}
		}
		subscribe(e, pub, sub)
		defer sub.cancel()
		sub.request(1)
		if !done.waitFor(e.c.timeout) {
			e.flopf("publisher stopped delivering after pending demand exceeded MaxInt64 (rule 3.17): received %d of the %d elements requested before the cancel",
				received.Load(), requests+1)
		}
		e.verifyNoAsyncErrors()
	})
}

func (v *pv[T]) unicastRejects(e *env) {
	v.active(e, 1, false, func(e *env, pub reactive.Publisher[T]) {
		first := newSubscribedManual(e, pub)
		defer first.cancel()
		onSubscribe, onError := newLatch(e), newLatch(e)
		pub.Subscribe(&funcSubscriber[T]{
			onSubscribe: func(s reactive.Subscription) {
				e.track(s)
				onSubscribe.assertOpen("only one onSubscribe call expected")
				onSubscribe.close()
			},
			onNext: func(x T) { e.flopf("unicast publisher sent onNext(%v) to a second subscriber", x) },
			onError: func(err error) {
				onSubscribe.assertClosed("onSubscribe should be called prior to onError always (rule 1.9)")
				onError.assertOpen("only one onError call expected")
				onError.close()
			},
			onComplete: func() {
				e.flopf("unicast publisher completed a second subscriber instead of rejecting it with onError")
			},
		})
		onSubscribe.expectClose(e.c.timeout, "a second subscriber of a unicast publisher should have received onSubscribe (rule 1.9)")
		onError.expectClose(e.c.timeout, "a second subscriber of a unicast publisher should have received onError (rules 1.9, 1.11)")
		e.verifyNoAsyncErrorsNoDelay()
	})
}
