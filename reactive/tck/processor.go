package tck

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// ProcessorFactory creates the processors verified by [VerifyIdentityProcessor].
type ProcessorFactory[T any] struct {
	// Create returns an identity processor with the given buffer size. Required.
	Create func(t *testing.T, bufferSize int) reactive.Processor[T, T]
	// CreateFailed returns a publisher that signals OnSubscribe then OnError
	// (the processor's failed state); nil skips those tests.
	CreateFailed func(t *testing.T) reactive.Publisher[T]
	// Element returns the i-th element the helper publisher emits. Required.
	Element func(i int) T
}

// VerifyIdentityProcessor runs every test of the Java
// IdentityProcessorVerification as a subtest named like the Java method: the
// publisher tests on the processor fed by a helper publisher, the whitebox
// subscriber tests on the processor observed downstream, and the processor's
// own tests. MaxSubscribers: 1 declares a unicast processor.
func VerifyIdentityProcessor[T any](t *testing.T, f ProcessorFactory[T], o Options) {
	t.Helper()
	verifyProcessor(realT{t: t}, f, o)
}

func verifyProcessor[T any](r runner, f ProcessorFactory[T], o Options, only ...string) {
	r.Helper()
	c, err := resolve(o)
	if err != nil {
		r.Errorf("%v", err)
		r.FailNow()
	}
	c.only = onlySet(only)
	if f.Create == nil || f.Element == nil {
		r.Errorf("tck: ProcessorFactory.Create and Element are required")
		r.FailNow()
	}
	ip := &ipv[T]{c: c, f: f}
	p := &pv[T]{c: c, create: ip.createPublisher}
	if f.CreateFailed != nil {
		p.createFailed = func(e *env) reactive.Publisher[T] { return f.CreateFailed(e.r.T()) }
	}
	w := &wb[T]{element: f.Element, create: ip.createSubscriber}
	cases := p.cases()
	cases = append(cases,
		tcase{"required_spec104_mustCallOnErrorOnAllItsSubscribersIfItEncountersANonRecoverableError", ip.spec104},
		tcase{"mustImmediatelyPassOnOnErrorEventsReceivedFromItsUpstreamToItsDownstream", ip.passOnError},
	)
	cases = append(cases, w.cases()...)
	cases = append(cases, tcase{"required_mustRequestFromUpstreamForElementsThatHaveBeenRequestedLongAgo", ip.requestedLongAgo})
	runCases(r, c, cases)
}

type ipv[T any] struct {
	c config
	f ProcessorFactory[T]
}

// createPublisher is the processor subscribed to a helper publisher of n elements.
func (ip *ipv[T]) createPublisher(e *env, n int64) reactive.Publisher[T] {
	proc := ip.f.Create(e.r.T(), ip.c.bufferSize)
	helperPublisher(e, ip.f.Element, n).Subscribe(proc)
	return proc
}

type subscriptionPuppet struct{ s reactive.Subscription }

func (p subscriptionPuppet) TriggerRequest(n int64) { p.s.Request(n) }
func (p subscriptionPuppet) SignalCancel()          { p.s.Cancel() }

// createSubscriber is the processor as a subscriber, observed by a downstream
// subscriber that forwards to the probe.
func (ip *ipv[T]) createSubscriber(e *env, p *Probe[T]) reactive.Subscriber[T] {
	proc := ip.f.Create(e.r.T(), ip.c.bufferSize)
	var subscribed atomic.Bool
	proc.Subscribe(&funcSubscriber[T]{
		onSubscribe: func(s reactive.Subscription) {
			if subscribed.Swap(true) {
				s.Cancel() // the probe must pass the subscriber rules too
			}
			e.track(s)
			p.RegisterOnSubscribe(subscriptionPuppet{s: s})
		},
		onNext:     p.RegisterOnNext,
		onError:    p.RegisterOnError,
		onComplete: p.RegisterOnComplete,
	})
	return proc
}

func (ip *ipv[T]) multipleSubscribers(e *env, n int64) {
	if ip.c.maxSubscribers != 0 && n > ip.c.maxSubscribers {
		e.skipf("requires ≥ %d subscribers; processor supports %d (rule 1.11: unicast)", n, ip.c.maxSubscribers)
	}
}

// ipvSetup is the Java IdentityProcessorVerification.TestSetup.
type ipvSetup[T any] struct {
	*manualPublisher[T]
	tees *manualSubscriber[T]
	seen []T
	proc reactive.Processor[T, T]
}

func (ip *ipv[T]) setup(e *env) *ipvSetup[T] {
	e.r.Helper()
	st := &ipvSetup[T]{manualPublisher: newManualPublisher[T](e)}
	st.tees = newSubscribedManual(e, helperPublisher(e, ip.f.Element, reactive.Unbounded))
	st.proc = ip.f.Create(e.r.T(), ip.c.bufferSize)
	st.Subscribe(st.proc)
	return st
}

func (st *ipvSetup[T]) nextT() T {
	t := st.tees.requestNextElement()
	for _, s := range st.seen {
		if reflect.DeepEqual(s, t) {
			st.e.flopf("helper publisher illegally produced the same element %v twice", t)
		}
	}
	st.seen = append(st.seen, t)
	return t
}

func (st *ipvSetup[T]) sendNextTFromUpstream() T {
	x := st.nextT()
	st.sendNext(x)
	return x
}

func (st *ipvSetup[T]) expectNextElement(sub *manualSubscriber[T], expected T, addendum string) {
	got := sub.nextElement(fmt.Sprintf("timeout while awaiting %v. %s", expected, addendum))
	if !reflect.DeepEqual(got, expected) {
		st.e.flopf("received `onNext(%v)` on downstream but expected `onNext(%v)`", got, expected)
	}
}

// errCollector is the Java ManualSubscriberWithErrorCollection.
func newErrCollector[T any](e *env) (*manualSubscriber[T], *promise[error]) {
	sub := newManualSubscriber[T](e)
	errp := newPromise[error](e)
	sub.onErrorHook = errp.complete
	return sub, errp
}

func expectCollectedError(e *env, errp *promise[error], cause error) {
	errp.expectCompletion(e.c.timeout, "did not receive expected error on downstream")
	if got, _ := errp.get(); !errors.Is(got, cause) {
		e.flopf("expected error %v but got %v", cause, got)
	}
}

const coordinationHint = "If the Processor coordinates requests/emissions when having multiple Subscribers at once, set Options.CoordinatedEmission."

func (ip *ipv[T]) spec104(e *env) {
	ip.multipleSubscribers(e, 2)
	st := ip.setup(e)
	sub1, err1 := newErrCollector[T](e)
	subscribe(e, st.proc, sub1)
	sub2, err2 := newErrCollector[T](e)
	subscribe(e, st.proc, sub2)
	ex := errors.New("tck: test exception (rule 1.4)")
	if ip.c.coordinated {
		sub1.request(1)
		sub2.request(1)
		st.expectRequest()
		x := st.sendNextTFromUpstream()
		st.expectNextElement(sub1, x, "")
		st.expectNextElement(sub2, x, "")
		sub1.request(1)
		sub2.request(1)
	} else {
		sub1.request(1)
		st.expectRequestMsg(coordinationHint)
		x := st.sendNextTFromUpstream()
		st.expectNextElement(sub1, x, coordinationHint)
		sub1.request(1)
	}
	st.sendError(ex)
	expectCollectedError(e, err1, ex)
	expectCollectedError(e, err2, ex)
	e.verifyNoAsyncErrorsNoDelay()
}

func (ip *ipv[T]) passOnError(e *env) {
	st := ip.setup(e)
	sub, errp := newErrCollector[T](e)
	subscribe(e, st.proc, sub)
	ex := errors.New("tck: test exception (rule 4.2)")
	st.sendError(ex)
	expectCollectedError(e, errp, ex) // "immediately": without a preceding request
	e.verifyNoAsyncErrorsNoDelay()
}

func (ip *ipv[T]) requestedLongAgo(e *env) {
	ip.multipleSubscribers(e, 2)
	st := ip.setup(e)
	sub1 := newSubscribedManual(e, reactive.Publisher[T](st.proc))
	sub1.request(20)
	total := st.expectRequest()
	x := st.sendNextTFromUpstream()
	st.expectNextElement(sub1, x, "")
	if total == 1 {
		total += st.expectRequest()
	}
	y := st.sendNextTFromUpstream()
	st.expectNextElement(sub1, y, "")
	if total == 2 {
		total += st.expectRequest()
	}
	sub2 := newSubscribedManual(e, reactive.Publisher[T](st.proc))
	if ip.c.coordinated {
		sub2.expectNone("did not expect an element but got element") // sub2 requested nothing yet
		sub2.request(1)
		z := st.sendNextTFromUpstream()
		st.expectNextElement(sub1, z, "")
		st.expectNextElement(sub2, z, "")
	} else {
		z := st.sendNextTFromUpstream()
		st.expectNextElement(sub1, z, coordinationHint)
		sub2.expectNone("did not expect an element but got element") // sub2 requested nothing yet
		sub2.request(1)
		st.expectNextElement(sub2, z, "")
	}
	if total == 3 {
		st.expectRequest()
	}
	st.sendCompletion()
	sub1.expectCompletion("did not receive expected stream completion")
	sub2.expectCompletion("did not receive expected stream completion")
	e.verifyNoAsyncErrorsNoDelay()
}
