package tck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// manualSubscriber is the Java ManualSubscriberWithSubscriptionSupport: it
// records elements in a receptacle and flags signals before OnSubscribe. The
// on* hooks replace the default behaviour of a signal (the Java TCK's
// anonymous subclasses).
type manualSubscriber[T any] struct {
	e            *env
	subscription *promise[reactive.Subscription]
	received     *receptacle[T]
	untracked    bool

	onSubscribeHook func(s reactive.Subscription)
	onNextHook      func(v T)
	onErrorHook     func(err error)
	onCompleteHook  func()
}

func newManualSubscriber[T any](e *env) *manualSubscriber[T] {
	return &manualSubscriber[T]{
		e:            e,
		subscription: newPromise[reactive.Subscription](e),
		received:     newReceptacle[T](e, "onNext"),
	}
}

func (m *manualSubscriber[T]) String() string { return fmt.Sprintf("ManualSubscriber(%p)", m) }

// defaultOnSubscribe completes the subscription promise once.
func (m *manualSubscriber[T]) defaultOnSubscribe(s reactive.Subscription) {
	if m.subscription.isCompleted() {
		m.e.flopf("Subscriber::onSubscribe called on an already-subscribed Subscriber")
		return
	}
	m.subscription.complete(s)
	if !m.untracked {
		m.e.track(s)
	}
}

func (m *manualSubscriber[T]) OnSubscribe(s reactive.Subscription) {
	if m.onSubscribeHook != nil {
		m.onSubscribeHook(s)
		return
	}
	m.defaultOnSubscribe(s)
}

func (m *manualSubscriber[T]) OnNext(v T) {
	if m.onNextHook != nil {
		m.onNextHook(v)
		return
	}
	if !m.subscription.isCompleted() {
		m.e.flopf("Subscriber::onNext(%v) called before Subscriber::onSubscribe", v)
		return
	}
	m.received.add(v)
}

func (m *manualSubscriber[T]) OnError(err error) {
	if m.onErrorHook != nil {
		m.onErrorHook(err)
		return
	}
	if !m.subscription.isCompleted() {
		m.e.flopf("Subscriber::onError(%v) called before Subscriber::onSubscribe", err)
		return
	}
	m.e.flopErr(err) // "Unexpected Subscriber::onError": expectError picks it up
}

func (m *manualSubscriber[T]) OnComplete() {
	if m.onCompleteHook != nil {
		m.onCompleteHook()
		return
	}
	if !m.subscription.isCompleted() {
		m.e.flopf("Subscriber::onComplete() called before Subscriber::onSubscribe")
		return
	}
	m.received.complete()
}

func (m *manualSubscriber[T]) request(n int64) { m.subscription.value().Request(n) }

func (m *manualSubscriber[T]) cancel() {
	s, ok := m.subscription.get()
	if !ok {
		m.e.flopf("cannot cancel a subscription before having received it")
		return
	}
	s.Cancel()
}

func (m *manualSubscriber[T]) requestNextElement() T {
	m.request(1)
	return m.nextElement("did not receive expected element")
}

func (m *manualSubscriber[T]) requestNextElementOrEndOfStream(msg string) (T, bool) {
	m.request(1)
	return m.received.nextOrEndOfStream(m.e.c.timeout, msg)
}

func (m *manualSubscriber[T]) requestEndOfStream(msg string) {
	m.request(1)
	m.expectCompletion(msg)
}

func (m *manualSubscriber[T]) nextElement(msg string) T {
	return m.received.next(m.e.c.timeout, msg)
}

func (m *manualSubscriber[T]) nextElements(n int64, msg string) []T {
	return m.received.nextN(n, m.e.c.timeout, msg)
}

func (m *manualSubscriber[T]) expectCompletion(msg string) {
	m.received.expectCompletion(m.e.c.timeout, msg)
}

func (m *manualSubscriber[T]) expectNone(prefix string) {
	m.received.expectNone(m.e.c.noSignals, prefix)
}

// expectError waits (polling every PollTimeout, at most DefaultTimeout) for
// the first recorded async error and requires it to match target.
func (m *manualSubscriber[T]) expectError(target error, msg string) error {
	e := m.e
	e.r.Helper()
	deadline := time.Now().Add(e.c.timeout)
	for {
		if a, ok := e.dropAsyncError(); ok {
			if a.assertion || !errors.Is(a.err, target) {
				e.failf("%s within %v; got %v but expected an error matching %v", msg, e.c.timeout, a.err, target)
			}
			return a.err
		}
		left := time.Until(deadline)
		if left <= 0 {
			e.failf("%s within %v", msg, e.c.timeout)
		}
		timer := time.NewTimer(min(e.c.poll, left))
		select {
		case <-e.changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// subscribe subscribes sub to pub and waits for OnSubscribe.
func subscribe[T any](e *env, pub reactive.Publisher[T], sub *manualSubscriber[T]) {
	e.r.Helper()
	pub.Subscribe(sub)
	sub.subscription.expectCompletion(e.c.timeout, fmt.Sprintf("could not subscribe %v to Publisher %T", sub, pub))
	e.verifyNoAsyncErrorsNoDelay()
}

func newSubscribedManual[T any](e *env, pub reactive.Publisher[T]) *manualSubscriber[T] {
	e.r.Helper()
	sub := newManualSubscriber[T](e)
	subscribe(e, pub, sub)
	return sub
}

// manualPublisher is the Java ManualPublisher: the test drives the signals and
// observes requests and cancellation.
type manualPublisher[T any] struct {
	e          *env
	subscriber *promise[reactive.Subscriber[T]]
	requests   *receptacle[int64]
	cancelled  *latch
}

func newManualPublisher[T any](e *env) *manualPublisher[T] {
	return &manualPublisher[T]{
		e:          e,
		subscriber: newPromise[reactive.Subscriber[T]](e),
		requests:   newReceptacle[int64](e, "request"),
		cancelled:  newLatch(e),
	}
}

type manualSubscription[T any] struct{ p *manualPublisher[T] }

func (s manualSubscription[T]) Request(n int64) { s.p.requests.add(n) }
func (s manualSubscription[T]) Cancel()         { s.p.cancelled.close() }

func (p *manualPublisher[T]) Subscribe(s reactive.Subscriber[T]) {
	if p.subscriber.isCompleted() {
		p.e.flopf("TestPublisher doesn't support more than one Subscriber")
		return
	}
	p.subscriber.complete(s)
	s.OnSubscribe(manualSubscription[T]{p: p})
}

func (p *manualPublisher[T]) sub() reactive.Subscriber[T] { return p.subscriber.value() }

func (p *manualPublisher[T]) sendNext(v T)        { p.sub().OnNext(v) }
func (p *manualPublisher[T]) sendCompletion()     { tckSignalOnComplete(p.sub()) }
func (p *manualPublisher[T]) sendError(err error) { tckSignalOnError(p.sub(), err) }

func (p *manualPublisher[T]) expectRequest() int64 {
	return p.expectRequestMsg("")
}

func (p *manualPublisher[T]) expectRequestMsg(addendum string) int64 {
	p.e.r.Helper()
	n := p.requests.next(p.e.c.timeout, "did not receive expected `request` call. "+addendum)
	if n <= 0 {
		p.e.failf("requests cannot be zero or negative but received request(%d)", n)
	}
	return n
}

func (p *manualPublisher[T]) expectCancelling() {
	p.cancelled.expectClose(p.e.c.timeout, "did not receive expected cancelling of upstream subscription")
}

// probe is the Java BlackboxProbe: what a subscriber under test reported.
type probe[T any] struct {
	e        *env
	elements *receptacle[T]
	err      *promise[error]
}

func newProbe[T any](e *env) *probe[T] {
	return &probe[T]{e: e, elements: newReceptacle[T](e, "registerOnNext"), err: newPromise[error](e)}
}

func (p *probe[T]) registerOnNext(v T) { p.elements.add(v) }
func (p *probe[T]) registerOnComplete() {
	if p.elements.completed.isClosed() {
		p.e.flopf("subscriber::onComplete was called a second time, which is illegal according to Rule 1.7")
		return
	}
	p.elements.complete()
}

func (p *probe[T]) registerOnError(err error) {
	if p.err.isCompleted() {
		p.e.flopf("subscriber::onError was called a second time, which is illegal according to Rule 1.7")
		return
	}
	p.err.complete(err)
}

func (p *probe[T]) expectNext(expected T) {
	got := p.elements.next(p.e.c.timeout, fmt.Sprintf("subscriber did not call `registerOnNext(%v)`", expected))
	if !reflect.DeepEqual(got, expected) {
		p.e.flopf("subscriber called `registerOnNext(%v)` rather than `registerOnNext(%v)`", got, expected)
	}
}

func (p *probe[T]) expectCompletion() {
	p.elements.expectCompletion(p.e.c.timeout, "subscriber did not call `registerOnComplete()`")
}

func (p *probe[T]) expectAnyError() error {
	p.err.expectCompletion(p.e.c.timeout, "subscriber did not call `registerOnError(error)`")
	v, ok := p.err.get()
	if !ok || v == nil {
		p.e.failf("subscriber did not call `registerOnError(error)`")
	}
	return v
}

func (p *probe[T]) expectError(expected error) {
	p.err.expectCompletion(p.e.c.timeout, fmt.Sprintf("subscriber did not call `registerOnError(%v)`", expected))
	if v, _ := p.err.get(); !errors.Is(v, expected) {
		p.e.flopf("subscriber called `registerOnError(%v)` rather than `registerOnError(%v)`", v, expected)
	}
}

func (p *probe[T]) expectNone() {
	p.elements.expectNone(p.e.c.noSignals, "expected nothing")
}

// helperPublisher returns the asynchronous publisher of Element(0),
// Element(1), … (n of them, or endless for reactive.Unbounded) that feeds
// subscribers under test. Its subscriptions are tracked, so the env cancels
// them and waits for their goroutines at the end of the subtest.
func helperPublisher[T any](e *env, element func(i int) T, n int64) reactive.Publisher[T] {
	return trackingPublisher[T]{e: e, make: func() reactive.Publisher[T] {
		var i atomic.Int64
		return reactive.FromFunc(func(context.Context) (T, error) {
			k := i.Add(1) - 1
			if n != reactive.Unbounded && k >= n {
				var zero T
				return zero, io.EOF
			}
			return element(int(k)), nil
		})
	}}
}

type trackingPublisher[T any] struct {
	e    *env
	make func() reactive.Publisher[T]
}

func (t trackingPublisher[T]) Subscribe(s reactive.Subscriber[T]) {
	t.make().Subscribe(&trackingSubscriber[T]{Subscriber: s, e: t.e})
}

type trackingSubscriber[T any] struct {
	reactive.Subscriber[T]
	e *env
}

func (t *trackingSubscriber[T]) OnSubscribe(s reactive.Subscription) {
	t.e.track(s)
	t.Subscriber.OnSubscribe(s)
}

// OnCompleteDefault and OnErrorDefault run the default behaviour from a hook.
func (m *manualSubscriber[T]) OnCompleteDefault() {
	if !m.subscription.isCompleted() {
		m.e.flopf("Subscriber::onComplete() called before Subscriber::onSubscribe")
		return
	}
	m.received.complete()
}

func (m *manualSubscriber[T]) OnErrorDefault(err error) {
	if !m.subscription.isCompleted() {
		m.e.flopf("Subscriber::onError(%v) called before Subscriber::onSubscribe", err)
		return
	}
	m.e.flopErr(err)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
