package messaging

import (
	"context"
	"fmt"
	"sync"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// The building blocks of connectors, the sink half: a Sink from a send
// function (FuncSink; the source half, PullSource, is in pullsource.go).

// SinkOption configures NewFuncSink.
type SinkOption func(*sinkOptions)

type sinkOptions struct {
	conc        int
	window      int64
	sendSettles bool
	inline      bool
}

// WithSendConcurrency lets up to n sends run at once (default 1: messages
// are sent one after the other, in order).
func WithSendConcurrency(n int) SinkOption { return func(o *sinkOptions) { o.conc = n } }

// WithSinkWindow sets what the sink requests upstream ahead of sending
// (default: the concurrency), topped up at 75% consumed.
func WithSinkWindow(n int) SinkOption { return func(o *sinkOptions) { o.window = int64(n) } }

// WithInlineSend declares that the send function never blocks (it records
// or hands the message off and returns): the sink then calls it on the
// goroutine that delivers the message (its OnNext), one send at a time in
// order, and acks or nacks there, instead of handing the message to a
// goroutine of its own; WithSendConcurrency is ignored. Default: off (sends
// run on the sink's goroutines). A send that blocks stalls its upstream,
// whose goroutine may be a caller's (an Emitter's Send).
func WithInlineSend() SinkOption { return func(o *sinkOptions) { o.inline = true } }

// WithSendSettles leaves settlement to the send function: the sink neither
// acks nor nacks what send returned for.
func WithSendSettles() SinkOption { return func(o *sinkOptions) { o.sendSettles = true } }

// FuncSink is a Sink built from a send function. It requests its window
// upstream and calls send for every message on goroutines, at most the
// WithSendConcurrency bound at once (a goroutine exits when nothing is
// queued; with WithInlineSend, on the delivering goroutine instead); every
// finished send makes room for one more message. Unless
// WithSendSettles, a message is acked when send returned nil and nacked with
// its error otherwise (a panic is an error wrapping reactive.ErrPanic;
// return NackWith for nack options).
//
// Health: started at OnSubscribe; an OnError is a fatal failure and an
// OnComplete ends the channel (both: not live); not ready after Close.
//
// With T = []byte a *FuncSink is a [Sink].
type FuncSink[T any] struct {
	channel  string
	send     func(ctx context.Context, m Message[T]) error
	sendName string // names send in a panic error
	o        sinkOptions
	in       *reactive.Inlet
	health   *EndpointHealth
	ctx      context.Context //nolint:containedctx // the sends' context: cancelled when Close ends or its deadline passes
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	queue   []Message[T]
	running int
	closed  bool
	ended   bool          // OnComplete, OnError or Close
	drained chan struct{} // closed once ended and no send is queued or running
}

var _ Sink = (*FuncSink[[]byte])(nil)

// NewFuncSink returns the outgoing end of channel calling send. A nil send
// panics with an error wrapping ErrNilArgument.
func NewFuncSink[T any](channel string, send func(ctx context.Context, m Message[T]) error, opts ...SinkOption) *FuncSink[T] {
	if send == nil {
		panic(fmt.Errorf("%w: send function", ErrNilArgument))
	}
	o := sinkOptions{conc: 1}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	o.conc = max(o.conc, 1)
	if o.window <= 0 {
		o.window = int64(o.conc)
	}
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // cancel is s.cancel, called by Close
	return &FuncSink[T]{
		channel: channel, send: send, sendName: "send function of channel " + channel, o: o, in: reactive.NewInlet(o.window),
		health: NewEndpointHealth(channel, Outgoing), ctx: ctx, cancel: cancel, drained: make(chan struct{}),
	}
}

// Drained is closed once the stream ended (OnComplete, OnError or Close)
// and every message received was sent (or nacked by Close).
func (s *FuncSink[T]) Drained() <-chan struct{} { return s.drained }

func (s *FuncSink[T]) checkDrainedLocked() {
	if s.ended && len(s.queue) == 0 && s.running == 0 {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
}

func (s *FuncSink[T]) end() {
	s.mu.Lock()
	s.ended = true
	s.checkDrainedLocked()
	s.mu.Unlock()
}

// OnSubscribe implements reactive.Subscriber: it requests the window.
func (s *FuncSink[T]) OnSubscribe(sub reactive.Subscription) {
	if s.in.OnSubscribe(sub) {
		s.health.MarkStarted()
	}
}

// OnNext implements reactive.Subscriber.
func (s *FuncSink[T]) OnNext(m Message[T]) {
	reactive.MustNotBeNil(m)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = m.Nack(s.ctx, fmt.Errorf("%w: sink of channel %q", ErrClosed, s.channel))
		return
	}
	if s.o.inline {
		s.inlineLocked(m)
		return
	}
	s.queue = append(s.queue, m)
	if s.running < s.o.conc {
		s.running++
		s.wg.Add(1)
		go s.run()
	}
	s.mu.Unlock()
}

// inlineLocked sends m on the calling goroutine, then whatever a re-entrant
// OnNext queued meanwhile; it unlocks s.mu.
func (s *FuncSink[T]) inlineLocked(m Message[T]) {
	if s.running > 0 { // a send of this sink is running up the stack
		s.queue = append(s.queue, m)
		s.mu.Unlock()
		return
	}
	s.running++
	s.wg.Add(1)
	defer s.wg.Done()
	for {
		s.mu.Unlock()
		s.sendOne(m)
		s.mu.Lock()
		var ok bool
		if m, ok = s.nextLocked(); !ok {
			s.mu.Unlock()
			return
		}
	}
}

func (s *FuncSink[T]) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		m, ok := s.nextLocked()
		s.mu.Unlock()
		if !ok {
			return
		}
		s.sendOne(m)
	}
}

// nextLocked takes the next queued message for a running sender; with none
// left (or the sink closed) that sender stops: it reports false, and the sink
// notes one sender fewer.
func (s *FuncSink[T]) nextLocked() (Message[T], bool) {
	if len(s.queue) == 0 || s.closed {
		s.running--
		s.checkDrainedLocked()
		var zero Message[T]
		return zero, false
	}
	var m Message[T]
	m, s.queue = popFront(s.queue)
	return m, true
}

// sendOne sends m, settles it unless WithSendSettles, and makes room for one
// more message upstream.
func (s *FuncSink[T]) sendOne(m Message[T]) {
	err := callSafely(s.sendName, func() error { return s.send(s.ctx, m) })
	if !s.o.sendSettles {
		if err == nil {
			_ = m.Ack(s.ctx)
		} else {
			if s.ctx.Err() != nil {
				err = fmt.Errorf("%w: sink of channel %q: %w", ErrClosed, s.channel, err)
			}
			_ = nackFor(context.WithoutCancel(s.ctx), m, err)
		}
	}
	s.in.Consumed(1)
}

// OnError implements reactive.Subscriber: a fatal failure of the channel.
func (s *FuncSink[T]) OnError(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	s.in.Terminated()
	s.health.MarkFailed(err)
	s.end()
}

// OnComplete implements reactive.Subscriber: the channel's stream ended.
func (s *FuncSink[T]) OnComplete() {
	s.in.Terminated()
	s.health.MarkCompleted()
	s.end()
}

// Health implements Sink.
func (s *FuncSink[T]) Health() ChannelHealth { return s.health.Health() }

// EndpointHealth returns the sink's health record, for a connector that
// also observes connection failures (MarkConnectionFailed, MarkConnected).
func (s *FuncSink[T]) EndpointHealth() *EndpointHealth { return s.health }

// Close cancels the upstream, nacks the queued messages with ErrClosed and
// waits until the running sends returned, or ctx ends: then their ctx is
// cancelled (a send that fails then is nacked with ErrClosed) and Close
// returns an error wrapping ctx.Err() once they returned.
func (s *FuncSink[T]) Close(ctx context.Context) error {
	s.health.MarkClosed()
	s.in.Cancel()
	s.mu.Lock()
	s.closed, s.ended = true, true
	q := s.queue
	s.queue = nil
	s.checkDrainedLocked()
	s.mu.Unlock()
	for _, m := range q {
		_ = m.Nack(ctx, fmt.Errorf("%w: sink of channel %q", ErrClosed, s.channel))
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		<-done
		return fmt.Errorf("messaging: sink of channel %q: sends still running at the deadline: %w", s.channel, ctx.Err())
	}
}
