package messaging

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// invokeFunc runs one invocation of a per-message stage. emit reports whether
// out is to be emitted downstream (processors only).
type invokeFunc[I, O any] func(m Message[I]) (out Message[O], emit bool)

// engine is the per-message stage of Consume, ConsumeMessage, Process and
// ProcessMessage: a Subscriber (consumers) or a unicast
// Processor (processors) built on an Inlet and an Outlet. Invocations run on
// worker goroutines, at most concurrency at a time (one per key with key
// ordering). A worker that finished an invocation emits its output and
// requests more from upstream on its own goroutine before it looks at the
// queue again, so an upstream that can answer at once (a PullSource with
// WithTryPull) hands the next message to the same worker without a
// goroutine switch; a worker exits when no startable message is queued, so
// an idle stage has none.
//
// Demand: a consumer requests prefetch at OnSubscribe and one more per
// finished invocation. A processor keeps what it requested upstream plus what
// it holds (queued or running) within min(downstream demand, prefetch); a
// failed invocation emits nothing, which frees room for one more request.
type engine[I, O any] struct {
	in       *reactive.Inlet
	credit   reactive.Demand
	consumer bool
	prefetch int64
	conc     int
	key      func(Metadata) string
	invoke   invokeFunc[I, O]
	dropIn   func(Message[I], error) // settles an input that will not be processed
	dropOut  func(Message[O], error) // settles an output that will not be emitted
	obs      *chanState
	wg       sync.WaitGroup

	out        atomic.Pointer[reactive.Outlet[Message[O]]]
	subscribed atomic.Bool

	mu       sync.Mutex
	queue    []Message[I]
	running  int // invocations in progress
	workers  int // worker goroutines alive (running or between two invocations)
	busy     map[string]int
	outq     []Message[O]
	upDone   bool
	err      error
	stopped  bool // cancelled: nothing more is started or emitted
	finished bool // terminal signal produced (processors) or stream done (consumers)
	done     chan struct{}
}

var _ reactive.Processor[Message[int], Message[int]] = (*engine[int, int])(nil)

type engineConfig[I, O any] struct {
	consumer bool
	prefetch int64
	conc     int
	key      func(Metadata) string
	invoke   invokeFunc[I, O]
	dropIn   func(Message[I], error)
	dropOut  func(Message[O], error)
	obs      *chanState
}

func newEngine[I, O any](c engineConfig[I, O]) *engine[I, O] {
	conc := max(c.conc, 1)
	prefetch := c.prefetch
	if prefetch <= 0 {
		prefetch = int64(conc)
	}
	return &engine[I, O]{
		in: reactive.NewInlet(0), consumer: c.consumer, prefetch: prefetch, conc: conc, key: c.key,
		invoke: c.invoke, dropIn: c.dropIn, dropOut: c.dropOut, obs: c.obs,
		busy: map[string]int{}, done: make(chan struct{}),
	}
}

// OnSubscribe implements reactive.Subscriber.
func (e *engine[I, O]) OnSubscribe(s reactive.Subscription) {
	if !e.in.OnSubscribe(s) {
		return
	}
	e.obs.subscribed()
	if e.consumer {
		if _, err := e.credit.Add(e.prefetch); err == nil {
			e.in.Request(e.prefetch)
		}
		return
	}
	e.signal()
}

// OnNext implements reactive.Subscriber.
func (e *engine[I, O]) OnNext(m Message[I]) {
	reactive.MustNotBeNil(m)
	if e.credit.Take(1) == 0 {
		e.in.Cancel()
		e.fail(fmt.Errorf("%w: upstream of a messaging stage", reactive.ErrMissingDemand))
		e.dropIn(m, reactive.ErrMissingDemand)
		return
	}
	e.mu.Lock()
	if e.stopped || (!e.consumer && e.err != nil) {
		e.mu.Unlock()
		e.dropIn(m, ErrClosed)
		return
	}
	e.queue = append(e.queue, m)
	e.startLocked()
	e.mu.Unlock()
}

// OnError implements reactive.Subscriber.
func (e *engine[I, O]) OnError(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	e.in.Terminated()
	e.obs.failed(err)
	e.fail(err)
}

// OnComplete implements reactive.Subscriber.
func (e *engine[I, O]) OnComplete() {
	e.in.Terminated()
	e.obs.completed()
	e.mu.Lock()
	e.upDone = true
	e.checkDoneLocked()
	e.mu.Unlock()
	e.signal()
}

// fail ends the input with err. A consumer still processes what it received;
// a processor drops its queued inputs (nacked with err) and signals err.
func (e *engine[I, O]) fail(err error) {
	e.mu.Lock()
	e.upDone = true
	if e.err == nil {
		e.err = err
	}
	var q []Message[I]
	if !e.consumer {
		q = e.queue
		e.queue = nil
	}
	e.checkDoneLocked()
	e.mu.Unlock()
	for _, m := range q {
		e.dropIn(m, err)
	}
	e.signal()
}

// Subscribe implements reactive.Publisher for processors; unicast.
func (e *engine[I, O]) Subscribe(s reactive.Subscriber[Message[O]]) {
	if s == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	if e.consumer || !e.subscribed.CompareAndSwap(false, true) {
		reactive.Failed[Message[O]](fmt.Errorf("%w: messaging stage", reactive.ErrAlreadySubscribed)).Subscribe(s)
		return
	}
	o := reactive.NewOutlet(s, e.poll, e.Cancel)
	e.out.Store(o)
	o.Start()
}

func (e *engine[I, O]) signal() {
	if o := e.out.Load(); o != nil {
		o.Signal()
	}
}

// Cancel stops the stage: the upstream is cancelled, queued inputs and
// unemitted outputs are dropped (nacked with ErrClosed); running invocations
// finish and their outputs are dropped too.
func (e *engine[I, O]) Cancel() {
	e.in.Cancel()
	e.mu.Lock()
	e.stopped = true
	q, oq := e.queue, e.outq
	e.queue, e.outq = nil, nil
	e.upDone = true
	e.checkDoneLocked()
	e.mu.Unlock()
	for _, m := range q {
		e.dropIn(m, ErrClosed)
	}
	for _, m := range oq {
		e.dropOut(m, ErrClosed)
	}
}

// Wait blocks until no invocation runs; call after Cancel or completion.
func (e *engine[I, O]) Wait() { e.wg.Wait() }

// Running returns the number of invocations in progress.
func (e *engine[I, O]) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// Done is closed once the stage's stream ended and no invocation runs.
func (e *engine[I, O]) Done() <-chan struct{} { return e.done }

func (e *engine[I, O]) checkDoneLocked() {
	if e.upDone && len(e.queue) == 0 && e.running == 0 && (e.consumer || e.stopped || len(e.outq) == 0) {
		select {
		case <-e.done:
		default:
			close(e.done)
		}
	}
}

// nextLocked removes the first queued message whose key is not busy.
func (e *engine[I, O]) nextLocked() (Message[I], string, bool) {
	for i, m := range e.queue {
		k := ""
		if e.key != nil && e.conc > 1 {
			k = e.key(m.Metadata())
			if e.busy[k] > 0 {
				continue
			}
		}
		e.queue = append(e.queue[:i], e.queue[i+1:]...)
		return m, k, true
	}
	return nil, "", false
}

// startLocked starts workers for startable messages while fewer than conc
// are alive; a live worker picks queued messages up itself.
func (e *engine[I, O]) startLocked() {
	for !e.stopped && e.workers < e.conc && e.running < e.conc {
		m, k, ok := e.takeLocked()
		if !ok {
			return
		}
		e.workers++
		e.wg.Add(1)
		go e.run(m, k)
	}
}

// takeLocked removes the next startable message and counts it running.
func (e *engine[I, O]) takeLocked() (Message[I], string, bool) {
	m, k, ok := e.nextLocked()
	if ok {
		e.running++
		if k != "" {
			e.busy[k]++
		}
	}
	return m, k, ok
}

// run is a worker: it invokes m, emits the output (or, for a consumer,
// requests one more), which may deliver the next message synchronously, and
// then takes the next startable message, until none is queued.
func (e *engine[I, O]) run(m Message[I], k string) {
	defer e.wg.Done()
	for {
		out, emit := e.invoke(m)
		e.mu.Lock()
		e.running--
		if k != "" {
			if e.busy[k]--; e.busy[k] == 0 {
				delete(e.busy, k)
			}
		}
		drop := false
		if emit {
			if e.stopped || e.finished {
				drop = true
			} else {
				e.outq = append(e.outq, out)
			}
		}
		e.checkDoneLocked()
		e.mu.Unlock()
		if drop {
			e.dropOut(out, ErrClosed)
		}
		if e.consumer {
			if _, err := e.credit.Add(1); err == nil && e.in.Active() {
				e.in.Request(1)
			}
		} else {
			e.signal()
		}
		e.mu.Lock()
		var ok bool
		if !e.stopped && e.running < e.conc {
			m, k, ok = e.takeLocked()
		}
		if !ok {
			e.workers--
		}
		e.mu.Unlock()
		if !ok {
			return
		}
	}
}

func (e *engine[I, O]) poll(canEmit bool) (Message[O], reactive.PollStatus, error) {
	e.mu.Lock()
	if e.err != nil && !e.finished {
		e.finished = true
		oq, err := e.outq, e.err
		e.outq = nil
		e.checkDoneLocked()
		e.mu.Unlock()
		for _, m := range oq {
			e.dropOut(m, err)
		}
		return nil, reactive.PollDone, err
	}
	if len(e.outq) > 0 {
		if !canEmit {
			e.mu.Unlock()
			return nil, reactive.PollEmpty, nil
		}
		var v Message[O]
		v, e.outq = popFront(e.outq)
		e.checkDoneLocked()
		e.mu.Unlock()
		return v, reactive.PollReady, nil
	}
	if e.upDone && len(e.queue) == 0 && e.running == 0 {
		e.finished = true
		e.mu.Unlock()
		return nil, reactive.PollDone, nil
	}
	held := int64(len(e.queue) + e.running)
	e.mu.Unlock()
	if canEmit {
		if o := e.out.Load(); o != nil {
			if target := min(o.Requested(), e.prefetch) - held; target > 0 {
				if n := e.credit.TopUp(target); n > 0 {
					e.in.Request(n)
				}
			}
		}
	}
	return nil, reactive.PollEmpty, nil
}
