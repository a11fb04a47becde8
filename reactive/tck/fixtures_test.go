package tck

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// The fixtures of the meta-tests: hand-written publishers, subscribers and a
// processor that are correct by default and break exactly one rule per flaw.
// They deliberately avoid the reactive helpers, so each flaw is one line.

type pubFlaws struct {
	ignoreDemand         bool // rule 1.1: emits everything without waiting for demand
	extraElement         bool // rule 1.1/1.5: one element more than Create asked for
	neverComplete        bool // rule 1.5
	signalAfterComplete  bool // rule 1.7: a request after OnComplete yields OnNext
	noNilPanic           bool // rule 1.9: Subscribe(nil) returns normally
	doubleOnSubscribe    bool // rule 1.9: OnSubscribe twice
	failWithoutSubscribe bool // rule 1.9: the failed publisher skips OnSubscribe
	recursive            bool // rule 3.3: OnNext straight from Request, no trampoline
	concurrent           bool // rule 1.3: OnNext from a new goroutine while the caller's OnNext runs
	ignoreCancel         bool // rule 3.6: requests after Cancel still emit
	ignore39             bool // rule 3.9: Request(n <= 0) is ignored
	int32Demand          bool // rule 3.17: demand kept in an int32
	errorAboveMax        bool // rule 3.17: OnError when pending demand exceeds MaxInt64
	wrapDemand           bool // rule 3.17: demand wraps negative above MaxInt64, delivery stops
	retainSubscriber     bool // rule 3.13: the publisher keeps every subscriber
	noReentrantRequest   bool // rule 3.2: Request from within OnNext panics
	panicOnSecondCancel  bool // rule 3.7
}

type flawedPublisher struct {
	n      int64
	f      pubFlaws
	failed bool
	wg     *sync.WaitGroup
	stop   chan struct{}

	// retained holds the subscribers of the retainSubscriber flaw. The
	// publisher lives until the test's cleanup (which references it), so
	// these stay reachable however the compiler treats a parked goroutine's
	// captured variables.
	retainedMu sync.Mutex
	retained   []reactive.Subscriber[int]
}

func newFlawedPublisher(t *testing.T, n int64, f pubFlaws) *flawedPublisher {
	t.Helper()
	p := &flawedPublisher{n: n, f: f, wg: &sync.WaitGroup{}, stop: make(chan struct{})}
	t.Cleanup(func() { close(p.stop); p.wg.Wait() })
	return p
}

var errFixtureFailed = fmt.Errorf("fixture: failed publisher")

func (p *flawedPublisher) Subscribe(s reactive.Subscriber[int]) {
	if s == nil {
		if p.f.noNilPanic {
			return
		}
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	if p.failed {
		if !p.f.failWithoutSubscribe {
			s.OnSubscribe(noopSubscription{})
		}
		s.OnError(errFixtureFailed)
		return
	}
	if p.f.retainSubscriber {
		p.retainedMu.Lock()
		p.retained = append(p.retained, s)
		p.retainedMu.Unlock()
	}
	x := &flawedSubscription{p: p, s: s}
	s.OnSubscribe(x)
	if p.f.doubleOnSubscribe {
		s.OnSubscribe(x)
	}
	x.drain()
}

type flawedSubscription struct {
	p *flawedPublisher

	mu        sync.Mutex
	s         reactive.Subscriber[int]
	demand    int64
	next      int64
	cancelled bool
	done      bool
	draining  bool
	missed    bool
}

func (x *flawedSubscription) limit() int64 {
	if x.p.f.extraElement {
		return x.p.n + 1
	}
	return x.p.n
}

func (x *flawedSubscription) Cancel() {
	x.mu.Lock()
	if x.cancelled && x.p.f.panicOnSecondCancel {
		x.mu.Unlock()
		panic("fixture: subscription already cancelled")
	}
	x.cancelled = true
	if !x.p.f.ignoreCancel {
		x.s = nil
	}
	x.mu.Unlock()
}

func (x *flawedSubscription) Request(n int64) {
	f := x.p.f
	x.mu.Lock()
	if x.draining && f.noReentrantRequest {
		x.mu.Unlock()
		panic("fixture: request from within onNext is not supported")
	}
	s := x.s
	if s == nil || (x.cancelled && !f.ignoreCancel) {
		x.mu.Unlock()
		return
	}
	if x.done {
		x.mu.Unlock()
		if f.signalAfterComplete {
			s.OnNext(-1)
		}
		return
	}
	if n <= 0 {
		if f.ignore39 {
			x.mu.Unlock()
			return
		}
		x.done, x.s = true, nil
		x.mu.Unlock()
		s.OnError(fmt.Errorf("%w: request(%d)", reactive.ErrNonPositiveRequest, n))
		return
	}
	sum := x.demand + n
	switch {
	case f.int32Demand:
		x.demand = int64(int32(sum)) // the deliberate flaw: demand truncated to 32 bits
	case sum < 0 && f.wrapDemand:
		x.demand = sum // the deliberate flaw: no saturation, so demand turns negative
	case sum < 0:
		if f.errorAboveMax {
			x.done, x.s = true, nil
			x.mu.Unlock()
			s.OnError(fmt.Errorf("fixture: pending demand above MaxInt64"))
			return
		}
		x.demand = math.MaxInt64
	default:
		x.demand = sum
	}
	x.mu.Unlock()
	switch {
	case f.recursive:
		x.emitOne()
	case f.concurrent:
		// OnNext runs on a new goroutine and Request waits for it to return:
		// when called from OnNext, two OnNext calls overlap for certain.
		done := make(chan struct{})
		x.p.wg.Go(func() {
			defer close(done)
			x.emitOne()
		})
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	default:
		x.drain()
	}
}

// emitOne emits the next element, if any, on the calling goroutine.
func (x *flawedSubscription) emitOne() {
	x.mu.Lock()
	if x.s == nil || x.demand <= 0 || x.next >= x.limit() {
		x.mu.Unlock()
		return
	}
	if x.demand != math.MaxInt64 {
		x.demand--
	}
	v, s := x.next, x.s
	x.next++
	x.mu.Unlock()
	s.OnNext(int(v))
}

// drain is the correct serialized emission loop.
func (x *flawedSubscription) drain() {
	f := x.p.f
	x.mu.Lock()
	if x.draining {
		x.missed = true
		x.mu.Unlock()
		return
	}
	x.draining = true
	for {
		x.missed = false
		for x.s != nil && (!x.cancelled || f.ignoreCancel) {
			if x.next >= x.limit() {
				if !x.done && !f.neverComplete {
					x.done = true
					s := x.s
					if !f.signalAfterComplete {
						x.s = nil
					}
					x.mu.Unlock()
					s.OnComplete()
					x.mu.Lock()
				}
				break
			}
			if x.demand <= 0 && !f.ignoreDemand {
				break
			}
			if x.demand != math.MaxInt64 && x.demand > 0 {
				x.demand--
			}
			v, s := x.next, x.s
			x.next++
			x.mu.Unlock()
			s.OnNext(int(v))
			x.mu.Lock()
		}
		if !x.missed {
			x.draining = false
			x.mu.Unlock()
			return
		}
	}
}

func flawedFactory(f pubFlaws) PublisherFactory[int] {
	return PublisherFactory[int]{
		Create: func(t *testing.T, n int64) reactive.Publisher[int] {
			t.Helper()
			return newFlawedPublisher(t, n, f)
		},
		CreateFailed: func(t *testing.T) reactive.Publisher[int] {
			t.Helper()
			p := newFlawedPublisher(t, 0, f)
			p.failed = true
			return p
		},
	}
}

// subFlaws break the subscriber fixtures (whitebox and blackbox).
type subFlaws struct {
	neverRequest           bool // rule 2.1: ignores TriggerRequest / never requests
	requestInOnComplete    bool // rule 2.3
	requestInOnError       bool // rule 2.3
	keepSecondSubscription bool // rule 2.5: neither cancels nor ignores it
	noNilPanicOnSubscribe  bool // rule 2.13
	noNilPanicOnNext       bool // rule 2.13
	noNilPanicOnError      bool // rule 2.13
	panicOnNextAfterCancel bool // rule 2.8
	panicOnEarlyComplete   bool // rule 2.9: OnComplete before any request panics
	panicOnError           bool // rule 2.10
	dropError              bool // rule 2.10: does not report the error
	doubleRegister         bool // rule 3.8: reports every element twice
	dropComplete           bool // rule 2.9: does not report the completion
	panicOnComplete        bool // rule 2.9
}

// flawedSubscriber is a whitebox (with a probe) or blackbox (probe nil)
// subscriber of *int.
type flawedSubscriber struct {
	f     subFlaws
	probe *Probe[*int]
	auto  int64 // blackbox: request this much in OnSubscribe

	mu        sync.Mutex
	sub       reactive.Subscription
	requested bool
	cancelled bool
}

func (x *flawedSubscriber) OnSubscribe(s reactive.Subscription) {
	if s == nil {
		if x.f.noNilPanicOnSubscribe {
			return
		}
		panic(fmt.Errorf("%w: subscription", reactive.ErrNilArgument))
	}
	x.mu.Lock()
	if x.sub != nil {
		x.mu.Unlock()
		if x.f.keepSecondSubscription {
			s.Request(1)
		} else {
			s.Cancel()
		}
		return
	}
	x.sub = s
	x.mu.Unlock()
	if x.probe != nil {
		x.probe.RegisterOnSubscribe(x)
	}
	if x.auto > 0 {
		x.TriggerRequest(x.auto)
	}
}

// TriggerRequest and SignalCancel make the subscriber its own Puppet.
func (x *flawedSubscriber) TriggerRequest(n int64) {
	if x.f.neverRequest {
		return
	}
	x.mu.Lock()
	x.requested = true
	s := x.sub
	x.mu.Unlock()
	s.Request(n)
}

func (x *flawedSubscriber) SignalCancel() {
	x.mu.Lock()
	x.cancelled = true
	s := x.sub
	x.mu.Unlock()
	s.Cancel()
}

func (x *flawedSubscriber) OnNext(v *int) {
	if v == nil && !x.f.noNilPanicOnNext {
		panic(fmt.Errorf("%w: element", reactive.ErrNilArgument))
	}
	x.mu.Lock()
	cancelled := x.cancelled
	x.mu.Unlock()
	if cancelled && x.f.panicOnNextAfterCancel {
		panic("fixture: onNext after cancel")
	}
	if x.probe != nil {
		x.probe.RegisterOnNext(v)
		if x.f.doubleRegister {
			x.probe.RegisterOnNext(v)
		}
	}
}

func (x *flawedSubscriber) OnError(err error) {
	if err == nil && !x.f.noNilPanicOnError {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	if x.f.panicOnError {
		panic("fixture: cannot handle onError")
	}
	if x.f.requestInOnError {
		x.sub.Request(1)
	}
	if x.probe != nil && !x.f.dropError {
		x.probe.RegisterOnError(err)
	}
}

func (x *flawedSubscriber) OnComplete() {
	x.mu.Lock()
	requested := x.requested
	x.mu.Unlock()
	if x.f.panicOnComplete {
		panic("fixture: cannot handle onComplete")
	}
	if x.f.panicOnEarlyComplete && !requested {
		panic("fixture: completed before any request")
	}
	if x.f.requestInOnComplete {
		x.sub.Request(1)
	}
	if x.probe != nil && !x.f.dropComplete {
		x.probe.RegisterOnComplete()
	}
}

func ptr(i int) *int { return &i }

func whiteboxFactory(f subFlaws) WhiteboxFactory[*int] {
	return WhiteboxFactory[*int]{
		Create: func(_ *testing.T, p *Probe[*int]) reactive.Subscriber[*int] {
			return &flawedSubscriber{f: f, probe: p}
		},
		Element: ptr,
	}
}

func blackboxFactory(f subFlaws) BlackboxFactory[*int] {
	return BlackboxFactory[*int]{
		Create:  func(*testing.T) reactive.Subscriber[*int] { return &flawedSubscriber{f: f, auto: 4} },
		Element: ptr,
	}
}

// idProcessor is a unicast identity processor built on the reactive helpers;
// errorNeedsDemand breaks rule 4.2 (errors wait for downstream demand).
type idProcessor struct {
	in               *reactive.Inlet
	credit           reactive.Demand
	buffer           int64
	errorNeedsDemand bool

	mu         sync.Mutex
	queue      []*int
	ended      bool
	err        error
	out        *reactive.Outlet[*int]
	subscribed bool
}

func newIDProcessor(buffer int, errorNeedsDemand bool) *idProcessor {
	return &idProcessor{in: reactive.NewInlet(0), buffer: int64(buffer), errorNeedsDemand: errorNeedsDemand}
}

func (p *idProcessor) signal() {
	p.mu.Lock()
	o := p.out
	p.mu.Unlock()
	if o != nil {
		o.Signal()
	}
}

func (p *idProcessor) OnSubscribe(s reactive.Subscription) {
	if p.in.OnSubscribe(s) {
		p.signal()
	}
}

func (p *idProcessor) OnNext(v *int) {
	reactive.MustNotBeNil(v)
	p.credit.Take(1)
	p.mu.Lock()
	p.queue = append(p.queue, v)
	p.mu.Unlock()
	p.signal()
}

func (p *idProcessor) OnError(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	p.in.Terminated()
	p.mu.Lock()
	p.ended, p.err = true, err
	p.mu.Unlock()
	p.signal()
}

func (p *idProcessor) OnComplete() {
	p.in.Terminated()
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	p.signal()
}

func (p *idProcessor) Subscribe(s reactive.Subscriber[*int]) {
	if s == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	p.mu.Lock()
	if p.subscribed {
		p.mu.Unlock()
		reactive.Failed[*int](reactive.ErrAlreadySubscribed).Subscribe(s)
		return
	}
	p.subscribed = true
	o := reactive.NewOutlet(s, p.poll, p.in.Cancel)
	p.out = o
	p.mu.Unlock()
	o.Start()
}

func (p *idProcessor) poll(canEmit bool) (*int, reactive.PollStatus, error) {
	p.mu.Lock()
	if p.ended && p.err != nil && (canEmit || !p.errorNeedsDemand) {
		p.mu.Unlock()
		return nil, reactive.PollDone, p.err
	}
	if len(p.queue) > 0 {
		if !canEmit {
			p.mu.Unlock()
			return nil, reactive.PollEmpty, nil
		}
		v := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()
		return v, reactive.PollReady, nil
	}
	ended := p.ended && p.err == nil
	out := p.out
	p.mu.Unlock()
	if ended {
		return nil, reactive.PollDone, nil
	}
	if canEmit {
		if n := p.credit.TopUp(min(out.Requested(), p.buffer)); n > 0 {
			p.in.Request(n)
		}
	}
	return nil, reactive.PollEmpty, nil
}

func processorFactory(errorNeedsDemand bool) ProcessorFactory[*int] {
	return ProcessorFactory[*int]{
		Create: func(_ *testing.T, buffer int) reactive.Processor[*int, *int] {
			return newIDProcessor(buffer, errorNeedsDemand)
		},
		CreateFailed: func(*testing.T) reactive.Publisher[*int] { return reactive.Failed[*int](errFixtureFailed) },
		Element:      ptr,
	}
}

// mcProcessor is a multicast identity processor: every subscriber has its own
// queue and Outlet; upstream demand follows the largest downstream demand,
// bounded by the buffer size. Flaws: errorToFirstOnly breaks rule 1.4 (the
// error reaches one subscriber), dropWithoutDemand breaks rule 1.1 for late
// subscribers (elements arriving while a subscriber has no demand are lost).
type mcProcessor struct {
	in                *reactive.Inlet
	credit            reactive.Demand
	buffer            int64
	errorToFirstOnly  bool
	dropWithoutDemand bool

	mu    sync.Mutex
	subs  []*mcSubscription
	ended bool
	err   error
}

type mcSubscription struct {
	p     *mcProcessor
	out   *reactive.Outlet[*int]
	queue []*int // guarded by p.mu
	err   error  // guarded by p.mu
}

func newMCProcessor(buffer int) *mcProcessor {
	return &mcProcessor{in: reactive.NewInlet(0), buffer: int64(buffer)}
}

func (p *mcProcessor) signalAll() {
	p.mu.Lock()
	subs := append([]*mcSubscription(nil), p.subs...)
	p.mu.Unlock()
	for _, s := range subs {
		s.out.Signal()
	}
}

func (p *mcProcessor) OnSubscribe(s reactive.Subscription) {
	if p.in.OnSubscribe(s) {
		p.signalAll()
	}
}

func (p *mcProcessor) OnNext(v *int) {
	reactive.MustNotBeNil(v)
	p.credit.Take(1)
	p.mu.Lock()
	for _, s := range p.subs {
		if p.dropWithoutDemand && s.out.Requested() == 0 {
			continue
		}
		s.queue = append(s.queue, v)
	}
	p.mu.Unlock()
	p.signalAll()
}

func (p *mcProcessor) OnError(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	p.in.Terminated()
	p.mu.Lock()
	p.ended, p.err = true, err
	for i, s := range p.subs {
		if i == 0 || !p.errorToFirstOnly {
			s.err = err
		}
	}
	p.mu.Unlock()
	p.signalAll()
}

func (p *mcProcessor) OnComplete() {
	p.in.Terminated()
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	p.signalAll()
}

func (p *mcProcessor) Subscribe(s reactive.Subscriber[*int]) {
	if s == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	ms := &mcSubscription{p: p}
	ms.out = reactive.NewOutlet(s, ms.poll, ms.remove)
	p.mu.Lock()
	ms.err = p.err
	p.subs = append(p.subs, ms)
	p.mu.Unlock()
	ms.out.Start()
}

// remove drops a cancelled subscriber; the last one cancels upstream.
func (ms *mcSubscription) remove() {
	p := ms.p
	p.mu.Lock()
	for i, s := range p.subs {
		if s == ms {
			p.subs = append(p.subs[:i], p.subs[i+1:]...)
			break
		}
	}
	last := len(p.subs) == 0
	p.mu.Unlock()
	if last {
		p.in.Cancel()
	}
}

func (ms *mcSubscription) poll(canEmit bool) (*int, reactive.PollStatus, error) {
	p := ms.p
	p.mu.Lock()
	if ms.err != nil {
		err := ms.err
		p.mu.Unlock()
		return nil, reactive.PollDone, err
	}
	if len(ms.queue) > 0 {
		if !canEmit {
			p.mu.Unlock()
			return nil, reactive.PollEmpty, nil
		}
		v := ms.queue[0]
		ms.queue = ms.queue[1:]
		p.mu.Unlock()
		return v, reactive.PollReady, nil
	}
	completed := p.ended && p.err == nil
	p.mu.Unlock()
	if completed {
		return nil, reactive.PollDone, nil
	}
	if canEmit {
		if n := p.credit.TopUp(min(ms.out.Requested(), p.buffer)); n > 0 {
			p.in.Request(n)
		}
	}
	return nil, reactive.PollEmpty, nil
}

func multicastFactory(errorToFirstOnly, dropWithoutDemand bool) ProcessorFactory[*int] {
	return ProcessorFactory[*int]{
		Create: func(_ *testing.T, buffer int) reactive.Processor[*int, *int] {
			p := newMCProcessor(buffer)
			p.errorToFirstOnly, p.dropWithoutDemand = errorToFirstOnly, dropWithoutDemand
			return p
		},
		CreateFailed: func(*testing.T) reactive.Publisher[*int] { return reactive.Failed[*int](errFixtureFailed) },
		Element:      ptr,
	}
}
