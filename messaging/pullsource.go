package messaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// The building blocks of connectors, the source half: a Source from a pull
// function, a channel or an iterator (PullSource; the sink half, FuncSink, is
// in funcsink.go). Both implement the Reactive Streams side (demand,
// cancellation, terminal signals, the rules the TCK checks), the in-flight
// bound, Close and Health by the runtime's rules; the connector writes only
// the broker calls.

// SourceOption configures NewPullSource, NewChanSource and NewSeqSource.
type SourceOption func(*sourceOptions)

type sourceOptions struct {
	maxInflight int
	tryPull     any // func() (Message[T], bool) of the source's T
}

// WithMaxInflight bounds the delivered but unsettled messages: the source
// pulls no more until one of them is acked or nacked. n <= 0 (the default)
// means no bound.
func WithMaxInflight(n int) SourceOption {
	return func(o *sourceOptions) { o.maxInflight = n }
}

// WithTryPull gives NewPullSource a non-blocking pull: try returns the next
// message at once, or ok false when none is available right now (it must
// not block, and a stream that ended answers false: pull reports the end).
// The source then calls try on the goroutine that asks for demand, and
// delivers its message there, before it falls back to waking its own
// goroutine for pull; a message thus skips one goroutine hand-off. try and
// pull are never called concurrently, the in-flight bound applies to both,
// and a panic in try fails the stream like one in pull. T must be the
// source's type: NewPullSource panics with an error wrapping ErrNilArgument
// for a try of another type. Default: none (every message comes from pull).
func WithTryPull[T any](try func() (m Message[T], ok bool)) SourceOption {
	return func(o *sourceOptions) {
		if try != nil {
			o.tryPull = try
		}
	}
}

// PullSource is a unicast Source built from a pull function. One goroutine
// per subscription calls pull once per unit of downstream demand (never
// concurrently), and only while fewer than the WithMaxInflight bound of its
// messages are unsettled. pull blocks until a message is available or its
// ctx ends; ctx is cancelled when the subscriber cancels or Close begins.
//
// A message from pull is delivered as a message with the same payload and
// metadata whose Ack and Nack call the original's, then release its
// in-flight slot. pull returning io.EOF (also wrapped) completes the stream,
// which makes the endpoint not live (a connector channel that ended); any
// other error fails it (a fatal failure: not live); a nil message is
// ErrNilMessage. A panic in pull fails the stream with an error wrapping
// reactive.ErrPanic. After Close begins the stream completes instead.
//
// With WithTryPull, a message available at once is taken on the goroutine
// that requested it and delivered there; the source's goroutine pulls only
// when none is.
//
// With T = []byte a *PullSource is a [Source].
type PullSource[T any] struct {
	channel  string
	pull     func(ctx context.Context) (Message[T], error)
	pullName string // names pull in a panic error
	tryPull  func() (Message[T], bool)
	max      int
	health   *EndpointHealth

	closing context.Context //nolint:containedctx // the source's lifetime: cancelled when Close begins
	close   context.CancelFunc

	mu         sync.Mutex
	subscribed bool
	closed     bool
	failure    error
	pump       *pullPump[T]
	inflight   int
	changed    chan struct{} // created by a waiter, closed when inflight changes
}

var _ Source = (*PullSource[[]byte])(nil)

// NewPullSource returns the incoming end of channel fed by pull. A nil pull
// panics with an error wrapping ErrNilArgument.
func NewPullSource[T any](channel string, pull func(ctx context.Context) (Message[T], error), opts ...SourceOption) *PullSource[T] {
	if pull == nil {
		panic(fmt.Errorf("%w: pull function", ErrNilArgument))
	}
	var o sourceOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	var try func() (Message[T], bool)
	if o.tryPull != nil {
		var ok bool
		if try, ok = o.tryPull.(func() (Message[T], bool)); !ok {
			panic(fmt.Errorf("%w: WithTryPull of %T for a source of Message[%T]", ErrNilArgument, o.tryPull, *new(T)))
		}
	}
	closing, cancel := context.WithCancel(context.Background()) //nolint:gosec // cancel is s.close, called by Close
	return &PullSource[T]{
		channel: channel, pull: pull, pullName: "pull function of channel " + channel, tryPull: try,
		max: o.maxInflight, health: NewEndpointHealth(channel, Incoming),
		closing: closing, close: cancel,
	}
}

// NewChanSource returns the incoming end of channel reading ch: a message is
// received only when there is demand (and room under WithMaxInflight);
// closing ch completes the stream. On Cancel or Close the source stops
// reading and leaves the remaining messages in ch.
func NewChanSource[T any](channel string, ch <-chan Message[T], opts ...SourceOption) *PullSource[T] {
	if ch == nil {
		panic(fmt.Errorf("%w: channel", ErrNilArgument))
	}
	return NewPullSource(channel, func(ctx context.Context) (Message[T], error) {
		select {
		case m, ok := <-ch:
			if !ok {
				return nil, io.EOF
			}
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, opts...)
}

// NewSeqSource returns the incoming end of channel reading seq: each
// subscription ranges over seq on a goroutine of its own, one message per
// unit of demand; the end of seq completes the stream, a non-nil error fails
// it. On Cancel or Close the range stops at the next yield, so a seq that
// waits for data between yields must return promptly on its own.
func NewSeqSource[T any](channel string, seq iter.Seq2[Message[T], error], opts ...SourceOption) *PullSource[T] {
	if seq == nil {
		panic(fmt.Errorf("%w: iterator", ErrNilArgument))
	}
	type item struct {
		m   Message[T]
		err error
	}
	var (
		once  sync.Once
		items = make(chan item)
	)
	return NewPullSource(channel, func(ctx context.Context) (Message[T], error) {
		once.Do(func() {
			go func() {
				send := func(it item) bool {
					select {
					case items <- it:
						return true
					case <-ctx.Done():
						return false
					}
				}
				for m, err := range seq {
					if !send(item{m: m, err: err}) || err != nil {
						return
					}
				}
				send(item{err: io.EOF})
			}()
		})
		select {
		case it := <-items:
			return it.m, it.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, opts...)
}

// Subscribe implements reactive.Publisher; the source is unicast. A second
// subscriber gets OnSubscribe then OnError wrapping
// reactive.ErrAlreadySubscribed; a subscriber after Close, one wrapping
// ErrClosed.
func (s *PullSource[T]) Subscribe(sub reactive.Subscriber[Message[T]]) {
	if sub == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		reactive.Failed[Message[T]](fmt.Errorf("%w: source of channel %q", ErrClosed, s.channel)).Subscribe(sub)
		return
	case s.subscribed:
		s.mu.Unlock()
		reactive.Failed[Message[T]](fmt.Errorf("%w: source of channel %q", reactive.ErrAlreadySubscribed, s.channel)).Subscribe(sub)
		return
	}
	s.subscribed = true
	ctx, cancel := context.WithCancel(s.closing) //nolint:gosec // cancel is p.cancel, called when the pump ends
	p := &pullPump[T]{s: s, ctx: ctx, cancel: cancel, want: make(chan struct{}, 1)}
	p.out = reactive.NewOutlet(sub, p.poll, p.cancelled)
	s.pump = p
	s.mu.Unlock()
	s.health.MarkStarted()
	go p.run()
	p.out.Start()
}

// Fail ends the stream with OnError(err) at once, without waiting for
// demand (a message pulled but not yet delivered is nacked with err), and
// records a fatal failure: the endpoint is no longer live. A nil err panics.
func (s *PullSource[T]) Fail(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", ErrNilArgument))
	}
	s.mu.Lock()
	if s.failure == nil {
		s.failure = err
	}
	p := s.pump
	s.mu.Unlock()
	s.health.MarkFailed(err)
	if p != nil {
		p.out.Signal()
	}
}

func (s *PullSource[T]) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// pullPump is one subscription: a goroutine pulls one message per wake-up,
// poll hands it to the Outlet.
type pullPump[T any] struct {
	s      *PullSource[T]
	out    *reactive.Outlet[Message[T]]
	ctx    context.Context //nolint:containedctx // the subscription's lifetime: cancelled on Cancel, Close and the end
	cancel context.CancelFunc
	want   chan struct{} // capacity 1: one pull at a time

	mu       sync.Mutex
	value    Message[T]
	fetching bool
	ended    bool
	err      error
}

func (p *pullPump[T]) poll(canEmit bool) (Message[T], reactive.PollStatus, error) {
	if err := p.s.failed(); err != nil {
		p.mu.Lock()
		v := p.value
		p.value, p.ended = nil, true
		p.mu.Unlock()
		p.cancel()
		if v != nil {
			_ = v.Nack(context.Background(), err)
		}
		return nil, reactive.PollDone, err
	}
	p.mu.Lock()
	switch {
	case p.value != nil && canEmit:
		v := p.value
		p.value = nil
		p.mu.Unlock()
		return v, reactive.PollReady, nil
	case p.value != nil:
		p.mu.Unlock()
		return nil, reactive.PollEmpty, nil
	case p.ended:
		err := p.err
		p.mu.Unlock()
		return nil, reactive.PollDone, err
	case !canEmit || p.fetching:
		p.mu.Unlock()
		return nil, reactive.PollEmpty, nil
	}
	p.mu.Unlock()
	// Not fetching, so the pump's goroutine does not call pull now, and poll
	// runs in the Outlet's drain: try and pull never overlap.
	if v, ok := p.try(); ok {
		return v, reactive.PollReady, nil
	}
	p.mu.Lock()
	if p.ended { // try failed the stream
		err := p.err
		p.mu.Unlock()
		return nil, reactive.PollDone, err
	}
	p.fetching = true
	p.want <- struct{}{} // never blocks: one pull at a time
	p.mu.Unlock()
	return nil, reactive.PollEmpty, nil
}

// try takes a message from the source's WithTryPull function, if it has one
// and there is room under the in-flight bound; a panic ends the stream.
func (p *pullPump[T]) try() (Message[T], bool) {
	s := p.s
	if s.tryPull == nil || p.ctx.Err() != nil {
		return nil, false
	}
	s.mu.Lock()
	room := s.max <= 0 || s.inflight < s.max
	s.mu.Unlock()
	if !room {
		return nil, false
	}
	var (
		m  Message[T]
		ok bool
	)
	err := callSafely(s.pullName, func() error { m, ok = s.tryPull(); return nil })
	if err == nil && ok && isNilValue(m) {
		err = fmt.Errorf("%w from the try function of channel %q", ErrNilMessage, s.channel)
	}
	if err != nil {
		err = s.ended(p.ctx, err)
		p.mu.Lock()
		p.ended = true
		if !errors.Is(err, io.EOF) {
			p.err = err
		}
		p.mu.Unlock()
		p.cancel() // the pump's goroutine exits
		return nil, false
	}
	if !ok {
		return nil, false
	}
	return s.deliver(m), true
}

// cancelled is the Outlet's onCancel: stop pulling; a message pulled but not
// delivered is nacked, so its in-flight slot is freed.
func (p *pullPump[T]) cancelled() {
	p.cancel()
	p.mu.Lock()
	v := p.value
	p.value = nil
	p.mu.Unlock()
	if v != nil {
		_ = v.Nack(context.Background(), fmt.Errorf("%w: subscription of channel %q cancelled before delivery", ErrClosed, p.s.channel))
	}
}

func (p *pullPump[T]) run() {
	defer p.cancel()
	for {
		select {
		case <-p.ctx.Done():
			if p.s.closing.Err() != nil { // Close: complete the stream
				p.mu.Lock()
				p.ended = true
				p.mu.Unlock()
				p.out.Signal()
			}
			return
		case <-p.want:
		}
		m, err := p.s.next(p.ctx)
		p.mu.Lock()
		p.fetching = false
		undelivered := err == nil && p.ctx.Err() != nil && p.s.closing.Err() == nil
		switch {
		case undelivered:
		case err == nil:
			p.value = m
		case errors.Is(err, io.EOF):
			p.ended = true
		default:
			p.ended, p.err = true, err
		}
		ended := p.ended || (err != nil && p.ctx.Err() != nil)
		p.mu.Unlock()
		if undelivered {
			_ = m.Nack(context.Background(), fmt.Errorf("%w: subscription of channel %q cancelled before delivery", ErrClosed, p.s.channel))
		}
		p.out.Signal()
		if ended {
			return
		}
	}
}

func (s *PullSource[T]) next(ctx context.Context) (Message[T], error) {
	if err := s.waitRoom(ctx); err != nil {
		return nil, s.ended(ctx, err)
	}
	var m Message[T]
	err := callSafely(s.pullName, func() (err error) { m, err = s.pull(ctx); return err })
	if err == nil && isNilValue(m) {
		err = fmt.Errorf("%w from the pull function of channel %q", ErrNilMessage, s.channel)
	}
	if err != nil {
		return nil, s.ended(ctx, err)
	}
	return s.deliver(m), nil
}

// deliver counts m in flight and wraps it so that settling it frees the slot.
func (s *PullSource[T]) deliver(m Message[T]) Message[T] {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	pm := &pulled[T]{src: m, s: s}
	return pm.init(m.Payload(), m.Metadata(), pm)
}

// pulled is a delivered message: settling it settles the pulled one, then
// frees its in-flight slot. One allocation per message.
type pulled[T any] struct {
	relay[T]
	src Message[T]
	s   *PullSource[T]
}

// Ack and Nack run at most once (the settlement's guard), so they can drop
// src: a settled message kept by its receiver no longer holds the pulled one.

func (m *pulled[T]) Ack(ctx context.Context) error {
	defer m.s.release()
	src := m.src
	m.src = nil
	return src.Ack(ctx)
}

func (m *pulled[T]) Nack(ctx context.Context, reason error, o NackOptions) error {
	defer m.s.release()
	src := m.src
	m.src = nil
	return src.Nack(ctx, reason, withNackOptions(o))
}

// ended classifies the error that ends the stream: io.EOF and Close
// complete it, a Cancel ends it silently, anything else is fatal.
func (s *PullSource[T]) ended(ctx context.Context, err error) error {
	switch {
	case s.closing.Err() != nil:
		return io.EOF
	case errors.Is(err, io.EOF):
		s.health.MarkCompleted()
		return io.EOF
	case ctx.Err() != nil:
		return err // cancelled: FromFunc signals nothing more
	default:
		s.health.MarkFailed(err)
		return err
	}
}

func (s *PullSource[T]) waitRoom(ctx context.Context) error {
	if s.max <= 0 {
		return nil
	}
	for {
		s.mu.Lock()
		room := s.inflight < s.max
		var ch chan struct{}
		if !room {
			ch = s.waitChanLocked()
		}
		s.mu.Unlock()
		if room {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("messaging: source of channel %q waiting for an in-flight slot: %w", s.channel, ctx.Err())
		}
	}
}

func (s *PullSource[T]) release() {
	s.mu.Lock()
	s.inflight--
	if s.changed != nil { // someone waits
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// waitChanLocked returns the channel closed at the next change of inflight.
func (s *PullSource[T]) waitChanLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// InFlight returns the number of delivered, unsettled messages.
func (s *PullSource[T]) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// Health implements Source: started once subscribed; not ready after Close;
// not live after a fatal pull error or the end of the stream.
func (s *PullSource[T]) Health() ChannelHealth { return s.health.Health() }

// EndpointHealth returns the source's health record, for a connector that
// also observes connection failures (MarkConnectionFailed, MarkConnected).
func (s *PullSource[T]) EndpointHealth() *EndpointHealth { return s.health }

// Close stops pulling (the pull ctx is cancelled and the stream completes)
// and waits until every delivered message is settled or ctx ends.
func (s *PullSource[T]) Close(ctx context.Context) error {
	s.health.MarkClosed()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.close()
	for {
		s.mu.Lock()
		n := s.inflight
		var ch chan struct{}
		if n > 0 {
			ch = s.waitChanLocked()
		}
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("messaging: source of channel %q closed with %d unsettled: %w", s.channel, n, ctx.Err())
		}
	}
}
