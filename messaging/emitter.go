package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// OverflowStrategy is what an Emitter does with a value sent while its
// downstream has no demand.
type OverflowStrategy int

// The overflow strategies, after MP RM @OnOverflow.
const (
	// OverflowBuffer queues up to the buffer size; a full buffer returns ErrOverflow.
	OverflowBuffer OverflowStrategy = iota
	// OverflowUnboundedBuffer queues without bound (a memory risk).
	OverflowUnboundedBuffer
	// OverflowThrowException returns ErrNoDemand at once; the stream goes on.
	OverflowThrowException
	// OverflowDrop drops the new value (ErrDropped); no stream error.
	OverflowDrop
	// OverflowFail signals OnError(ErrOverflow) downstream and terminates the emitter.
	OverflowFail
	// OverflowLatest keeps only the newest undelivered value; replaced ones report ErrDropped.
	OverflowLatest
	// OverflowNone applies no strategy: the downstream must request
	// reactive.Unbounded; an element without demand fails the stream with
	// reactive.ErrMissingDemand.
	OverflowNone
)

// DefaultEmitterBufferSize is the OverflowBuffer size when neither
// OnOverflow nor mp.messaging.emitter.default-buffer-size sets one.
const DefaultEmitterBufferSize = 128

// EmitterOption configures NewEmitter.
type EmitterOption func(*emitterOptions)

type emitterOptions struct {
	strategy OverflowStrategy
	size     int
}

// OnOverflow sets the overflow strategy and, for OverflowBuffer, the buffer
// size. Default: OverflowBuffer with bufferSize 0, meaning
// mp.messaging.emitter.default-buffer-size, else 128.
func OnOverflow(s OverflowStrategy, bufferSize int) EmitterOption {
	return func(o *emitterOptions) { o.strategy, o.size = s, bufferSize }
}

// Emitter sends values from imperative code into a channel. It is a unicast
// reactive.Publisher[Message[T]]; the runtime subscribes it at Start. Sending
// before Start is allowed: without demand the overflow strategy applies.
type Emitter[T any] struct {
	strategy OverflowStrategy
	size     int
	track    *tracker // nil outside a runtime

	out        atomic.Pointer[reactive.Outlet[Message[T]]]
	subscribed atomic.Bool
	cancelled  atomic.Bool

	mu         sync.Mutex
	queue      []Message[T]
	terminated bool  // no more sends accepted
	failure    error // Fail or OverflowFail: signalled at once
	finished   bool
}

var _ reactive.Publisher[Message[int]] = (*Emitter[int])(nil)

// NewEmitter registers an emitter for channel out. A nil runtime or a
// registration after Start panics.
func NewEmitter[T any](r *Runtime, out string, o ...EmitterOption) *Emitter[T] {
	mustRuntime(r)
	var opts emitterOptions
	for _, f := range o {
		if f != nil {
			f(&opts)
		}
	}
	e := newEmitter[T](opts, r.emitterBufferSize(), r.track)
	n := &node{shape: shapeEmitter, name: siteName("Emitter", "", out, stageOptions{}), out: newOutPort[T](out)}
	n.output = func(context.Context, *builder) (any, error) { return e, nil }
	r.register(n)
	r.mu.Lock()
	r.emitterStops = append(r.emitterStops, e.shutdown)
	r.mu.Unlock()
	return e
}

func newEmitter[T any](o emitterOptions, defaultSize int, t *tracker) *Emitter[T] {
	size := o.size
	if size <= 0 {
		size = defaultSize
	}
	return &Emitter[T]{strategy: o.strategy, size: size, track: t}
}

// Subscribe implements reactive.Publisher; the emitter is unicast.
func (e *Emitter[T]) Subscribe(s reactive.Subscriber[Message[T]]) {
	if s == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	if !e.subscribed.CompareAndSwap(false, true) {
		reactive.Failed[Message[T]](fmt.Errorf("%w: emitter", reactive.ErrAlreadySubscribed)).Subscribe(s)
		return
	}
	o := reactive.NewOutlet(s, e.poll, e.onCancel)
	e.out.Store(o)
	o.Start()
}

// Send sends v and waits for its settlement: nil on ack, the nack reason
// (wrapping ErrNacked) on nack, or an error wrapping ctx.Err() when ctx ends
// first (test it with errors.Is). Send does not take the value back when ctx
// ends.
func (e *Emitter[T]) Send(ctx context.Context, v T) error {
	ch, err := e.Emit(v)
	if err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// Emit enqueues v and returns at once; the channel yields the settlement
// result once (nil, or the nack reason wrapping ErrNacked, or ErrDropped when
// an OverflowLatest value was replaced).
func (e *Emitter[T]) Emit(v T) (<-chan error, error) {
	if isNilValue(v) {
		return nil, ErrNilPayload
	}
	res := make(chan error, 1)
	var once sync.Once
	report := func(err error) { once.Do(func() { res <- err }) }
	m := NewMessage(v,
		WithAckFunc(func(context.Context) error { report(nil); return nil }),
		WithNackFunc(func(_ context.Context, reason error, _ NackOptions) error {
			if errors.Is(reason, ErrDropped) {
				report(reason)
			} else {
				report(fmt.Errorf("%w: %w", ErrNacked, reason))
			}
			return nil
		}))
	if err := e.SendMessage(m); err != nil {
		return nil, err
	}
	return res, nil
}

// SendMessage enqueues m and returns at once; m's own Ack/Nack report its
// settlement. A value replaced by OverflowLatest is nacked with ErrDropped.
func (e *Emitter[T]) SendMessage(m Message[T]) error {
	if m == nil || isNilValue(m.Payload()) {
		return ErrNilPayload
	}
	var dropped Message[T]
	var failed bool
	e.mu.Lock()
	if e.terminated {
		e.mu.Unlock()
		return ErrEmitterTerminated
	}
	if e.track != nil {
		m = trackMessage(e.track, m, m.Payload())
	}
	demand := e.demandLocked()
	switch {
	case demand || e.strategy == OverflowUnboundedBuffer || e.strategy == OverflowNone:
		e.queue = append(e.queue, m)
	case e.strategy == OverflowBuffer:
		if len(e.queue) >= e.size {
			e.mu.Unlock()
			e.untrack(m, ErrOverflow)
			return ErrOverflow
		}
		e.queue = append(e.queue, m)
	case e.strategy == OverflowThrowException:
		e.mu.Unlock()
		e.untrack(m, ErrNoDemand)
		return ErrNoDemand
	case e.strategy == OverflowDrop:
		e.mu.Unlock()
		e.untrack(m, ErrDropped)
		return ErrDropped
	case e.strategy == OverflowFail:
		e.terminated = true
		e.failure = ErrOverflow
		failed = true
	case e.strategy == OverflowLatest:
		if n := len(e.queue); n > 0 && !e.coveredLocked(n) {
			dropped = e.queue[n-1]
			e.queue[n-1] = m
		} else {
			e.queue = append(e.queue, m)
		}
	default:
		e.queue = append(e.queue, m)
	}
	e.mu.Unlock()
	if failed {
		e.untrack(m, ErrOverflow)
		e.signal()
		return ErrOverflow
	}
	if dropped != nil {
		_ = dropped.Nack(context.Background(), ErrDropped)
	}
	e.signal()
	return nil
}

// untrack settles a message that never entered the stream.
func (e *Emitter[T]) untrack(m Message[T], reason error) {
	if e.track != nil {
		_ = m.Nack(context.Background(), reason)
	}
}

// demandLocked reports whether the downstream requested more than is queued.
func (e *Emitter[T]) demandLocked() bool {
	o := e.out.Load()
	return o != nil && o.Requested() > int64(len(e.queue))
}

// coveredLocked reports whether the n-th queued value is covered by demand.
func (e *Emitter[T]) coveredLocked(n int) bool {
	o := e.out.Load()
	return o != nil && o.Requested() >= int64(n)
}

// Complete ends the stream once the queued values were delivered; later
// sends return ErrEmitterTerminated.
func (e *Emitter[T]) Complete() {
	e.mu.Lock()
	e.terminated = true
	e.mu.Unlock()
	e.signal()
}

// Fail ends the stream with OnError(err) at once; queued values are nacked
// with err. A nil err panics.
func (e *Emitter[T]) Fail(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", ErrNilArgument))
	}
	e.mu.Lock()
	if !e.terminated {
		e.terminated = true
		e.failure = err
	}
	e.mu.Unlock()
	e.signal()
}

// shutdown is Complete for Shutdown step 1.
func (e *Emitter[T]) shutdown() { e.Complete() }

// HasDemand reports whether the downstream requested more than is queued.
func (e *Emitter[T]) HasDemand() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.demandLocked()
}

// Cancelled reports whether the downstream cancelled.
func (e *Emitter[T]) Cancelled() bool { return e.cancelled.Load() }

func (e *Emitter[T]) signal() {
	if o := e.out.Load(); o != nil {
		o.Signal()
	}
}

func (e *Emitter[T]) onCancel() {
	e.cancelled.Store(true)
	e.mu.Lock()
	e.terminated, e.finished = true, true
	q := e.queue
	e.queue = nil
	e.mu.Unlock()
	for _, m := range q {
		_ = m.Nack(context.Background(), ErrClosed)
	}
}

func (e *Emitter[T]) poll(canEmit bool) (Message[T], reactive.PollStatus, error) {
	e.mu.Lock()
	if e.failure != nil {
		q, err := e.queue, e.failure
		e.queue, e.finished = nil, true
		e.mu.Unlock()
		for _, m := range q {
			_ = m.Nack(context.Background(), err)
		}
		return nil, reactive.PollDone, err
	}
	if len(e.queue) > 0 {
		if !canEmit && e.strategy != OverflowNone {
			e.mu.Unlock()
			return nil, reactive.PollEmpty, nil
		}
		var m Message[T]
		m, e.queue = popFront(e.queue)
		if !canEmit { // OverflowNone: the Outlet fails the stream with ErrMissingDemand
			q := e.queue
			e.queue, e.terminated, e.finished = nil, true, true
			e.mu.Unlock()
			for _, x := range append(q, m) {
				_ = x.Nack(context.Background(), reactive.ErrMissingDemand)
			}
			return m, reactive.PollReady, nil
		}
		e.mu.Unlock()
		return m, reactive.PollReady, nil
	}
	if e.terminated {
		e.finished = true
		e.mu.Unlock()
		return nil, reactive.PollDone, nil
	}
	e.mu.Unlock()
	return nil, reactive.PollEmpty, nil
}
