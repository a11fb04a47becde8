package inmemory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// Name is the connector's name.
const Name = "in-memory"

// Attribute names of the connector.
const (
	AttrMaxInflight = "max-inflight"
	AttrAutoAck     = "auto-ack"
	AttrWindow      = "window"
)

// ErrInUse is returned by NewSource/NewSink when a channel's endpoint was
// already created by another runtime.
var ErrInUse = errors.New("inmemory: channel endpoint already in use")

// Connector is the in-memory connector. The zero value is not usable; call New.
type Connector struct {
	mu      sync.Mutex
	sources map[string]*Source
	sinks   map[string]*Sink
	configs []messaging.ChannelConfig
}

var (
	_ messaging.IncomingConnector = (*Connector)(nil)
	_ messaging.OutgoingConnector = (*Connector)(nil)
	_ messaging.Source            = (*Source)(nil)
	_ messaging.Sink              = (*Sink)(nil)
)

// New returns an in-memory connector.
func New() *Connector {
	return &Connector{sources: map[string]*Source{}, sinks: map[string]*Sink{}}
}

// Name returns "in-memory".
func (*Connector) Name() string { return Name }

// Attributes declares max-inflight, auto-ack and window.
func (*Connector) Attributes() []messaging.Attribute {
	return []messaging.Attribute{
		{Name: AttrMaxInflight, Type: messaging.AttrInt, Default: "256", Directions: []messaging.Direction{messaging.Incoming}, Description: "unsettled messages at most"},
		{Name: AttrAutoAck, Type: messaging.AttrBool, Default: "true", Directions: []messaging.Direction{messaging.Outgoing}, Description: "ack on receipt"},
		{Name: AttrWindow, Type: messaging.AttrInt, Default: "16", Directions: []messaging.Direction{messaging.Outgoing}, Description: "sink request window"},
	}
}

// Configs returns the channel configurations received so far, in call order.
func (c *Connector) Configs() []messaging.ChannelConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.configs)
}

// Source returns the handle of incoming channel ch (created on first use,
// before or after Start). Used before the runtime creates the channel, the
// handle queues, reports health and takes Fail and Close, and the channel
// still gets its attributes.
func (c *Connector) Source(ch string) *Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sources[ch]
	if !ok {
		s = &Source{channel: ch, maxInflight: 256, early: messaging.NewEndpointHealth(ch, messaging.Incoming)}
		c.sources[ch] = s
	}
	return s
}

// Sink returns the handle of outgoing channel ch (created on first use,
// before or after Start). Used before the runtime creates the channel (a Wait
// begun early, say), the handle leaves the channel its attributes.
func (c *Connector) Sink(ch string) *Sink {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sinks[ch]
	if !ok {
		s = &Sink{channel: ch, autoAck: true, window: 16, early: messaging.NewEndpointHealth(ch, messaging.Outgoing)}
		c.sinks[ch] = s
	}
	return s
}

// NewSource implements messaging.IncomingConnector.
func (c *Connector) NewSource(ctx context.Context, cfg messaging.ChannelConfig) (messaging.Source, error) {
	n, err := messaging.Attr[int](cfg, AttrMaxInflight)
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: %s must be >= 1, got %d", messaging.ErrInvalidAttribute, AttrMaxInflight, n)
	}
	s := c.Source(cfg.Channel())
	c.mu.Lock()
	c.configs = append(c.configs, cfg)
	c.mu.Unlock()
	s.mu.Lock()
	if s.created || s.block != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: source %q", ErrInUse, cfg.Channel())
	}
	s.created, s.maxInflight = true, n
	s.mu.Unlock()
	s.source(ctx)
	return s, nil
}

// NewSink implements messaging.OutgoingConnector.
func (c *Connector) NewSink(ctx context.Context, cfg messaging.ChannelConfig) (messaging.Sink, error) {
	auto, err := messaging.Attr[bool](cfg, AttrAutoAck)
	if err != nil {
		return nil, err
	}
	window, err := messaging.Attr[int](cfg, AttrWindow)
	if err != nil {
		return nil, err
	}
	if window < 1 {
		return nil, fmt.Errorf("%w: %s must be >= 1, got %d", messaging.ErrInvalidAttribute, AttrWindow, window)
	}
	s := c.Sink(cfg.Channel())
	c.mu.Lock()
	c.configs = append(c.configs, cfg)
	c.mu.Unlock()
	s.mu.Lock()
	if s.created || s.block != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: sink %q", ErrInUse, cfg.Channel())
	}
	s.created, s.autoAck, s.window = true, auto, window
	s.mu.Unlock()
	s.sink(ctx)
	return s, nil
}

// Settlement records how a message was settled.
type Settlement struct {
	Payload []byte
	Acked   bool
	Reason  error // nack reason
	Options messaging.NackOptions
}

// Source is an incoming channel fed from code. It is a
// messaging.NewPullSource whose pull function takes the queued messages:
// it delivers while there is demand and fewer than max-inflight messages
// are unsettled, and records every settlement.
type Source struct {
	channel string

	mu          sync.Mutex
	created     bool
	maxInflight int
	block       *messaging.PullSource[[]byte] // made by NewSource (or a direct Subscribe), with maxInflight
	early       *messaging.EndpointHealth     // the health until the block is made
	failure     error                         // a Fail before the block was made, passed on to it
	closed      bool                          // a Close before the block was made, passed on to it
	pending     chunks[pendingMsg]
	completed   bool
	settled     chunks[Settlement]
	changed     chan struct{} // created by a waiter, closed at the next change
	settledCh   chan struct{} // created by WaitSettled, closed once settledAt settlements were recorded
	settledAt   int           // the smallest target of the WaitSettled calls waiting
}

type pendingMsg struct {
	payload []byte
	md      messaging.Metadata
}

// source returns the building block, made on first use with the handle's settings (the
// channel's once NewSource set them); a Fail or a Close that came before passes on to it.
// Only NewSource and Subscribe make it: the handle's other methods, which a test may call
// before the runtime creates the channel, must not fix its settings.
func (s *Source) source(ctx context.Context) *messaging.PullSource[[]byte] {
	s.mu.Lock()
	b, made := s.block, false
	if b == nil {
		b = messaging.NewPullSource(s.channel, s.pull, messaging.WithMaxInflight(s.maxInflight), messaging.WithTryPull(s.tryPull))
		s.block, made = b, true
	}
	failure, closed := s.failure, s.closed
	s.mu.Unlock()
	if made && failure != nil {
		b.Fail(failure)
	}
	if made && closed {
		_ = b.Close(ctx) // nothing was delivered: it returns at once
	}
	return b
}

// made returns the building block, or nil before it was made; then early runs, under the
// handle's lock.
func (s *Source) made(early func()) *messaging.PullSource[[]byte] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block == nil && early != nil {
		early()
	}
	return s.block
}

// pull waits for the next queued message; io.EOF once Complete was called
// and the queue is empty.
func (s *Source) pull(ctx context.Context) (messaging.Message[[]byte], error) {
	for {
		s.mu.Lock()
		if s.pending.len() > 0 {
			p := s.pending.pop()
			s.mu.Unlock()
			return s.wrap(p), nil
		}
		if s.completed {
			s.mu.Unlock()
			return nil, io.EOF
		}
		ch := s.waitChanLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("inmemory: source %q: %w", s.channel, ctx.Err())
		}
	}
}

// tryPull takes the next queued message, if any, without waiting.
func (s *Source) tryPull() (messaging.Message[[]byte], bool) {
	s.mu.Lock()
	if s.pending.len() == 0 {
		s.mu.Unlock()
		return nil, false
	}
	p := s.pending.pop()
	s.mu.Unlock()
	return s.wrap(p), true
}

// Send queues payload with metadata items for delivery.
func (s *Source) Send(payload []byte, items ...any) {
	s.mu.Lock()
	s.pending.push(pendingMsg{payload: payload, md: messaging.NewMetadata(items...)})
	s.notifyLocked()
	s.mu.Unlock()
}

// SendString queues a string payload.
func (s *Source) SendString(v string) { s.Send([]byte(v)) }

// Complete completes the stream once the queued messages were delivered
// (a completed connector channel is no longer live).
func (s *Source) Complete() {
	s.mu.Lock()
	s.completed = true
	s.notifyLocked()
	s.mu.Unlock()
}

// Fail records a fatal failure (the channel is no longer live) and signals
// OnError(err) downstream at once.
func (s *Source) Fail(err error) {
	b := s.made(func() {
		s.early.MarkFailed(err)
		if s.failure == nil {
			s.failure = err
		}
	})
	if b != nil {
		b.Fail(err)
	}
}

// Subscribe implements reactive.Publisher; the source is unicast.
func (s *Source) Subscribe(sub reactive.Subscriber[messaging.Message[[]byte]]) {
	s.source(context.Background()).Subscribe(sub)
}

func (s *Source) wrap(p pendingMsg) messaging.Message[[]byte] {
	return &delivered{s: s, payload: p.payload, md: p.md}
}

// delivered is a delivered message recording its settlement; the first Ack
// or Nack settles it, later ones return messaging.ErrAlreadySettled. One
// allocation per message.
type delivered struct {
	s       *Source
	payload []byte
	md      messaging.Metadata
	done    atomic.Bool
}

func (d *delivered) Payload() []byte              { return d.payload }
func (d *delivered) Metadata() messaging.Metadata { return d.md }

func (d *delivered) Ack(context.Context) error {
	if !d.done.CompareAndSwap(false, true) {
		return messaging.ErrAlreadySettled
	}
	d.s.settle(Settlement{Payload: d.payload, Acked: true})
	return nil
}

func (d *delivered) Nack(_ context.Context, reason error, opts ...messaging.NackOption) error {
	if reason == nil {
		panic(fmt.Errorf("%w: nack reason", messaging.ErrNilArgument))
	}
	if !d.done.CompareAndSwap(false, true) {
		return messaging.ErrAlreadySettled
	}
	d.s.settle(Settlement{Payload: d.payload, Reason: reason, Options: messaging.NackOptionsOf(opts...)})
	return nil
}

func (s *Source) settle(st Settlement) {
	s.mu.Lock()
	s.settled.push(st)
	if s.settledCh != nil && s.settled.len() >= s.settledAt { // a waiter's target reached
		close(s.settledCh)
		s.settledCh = nil
	}
	s.mu.Unlock()
}

// waitChanLocked returns the channel closed at the next change.
func (s *Source) waitChanLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *Source) notifyLocked() {
	if s.changed != nil { // someone waits
		close(s.changed)
		s.changed = nil
	}
}

// Settlements returns the settlements so far, in settlement order.
func (s *Source) Settlements() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled.all()
}

// Counts returns the numbers of acked and nacked messages.
func (s *Source) Counts() (acked, nacked int) {
	for _, st := range s.Settlements() {
		if st.Acked {
			acked++
		} else {
			nacked++
		}
	}
	return acked, nacked
}

// InFlight returns the number of delivered, unsettled messages.
func (s *Source) InFlight() int {
	if b := s.made(nil); b != nil {
		return b.InFlight()
	}
	return 0
}

// WaitSettled waits until at least n messages were settled or ctx ends.
func (s *Source) WaitSettled(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got := s.settled.len()
		if got >= n {
			s.mu.Unlock()
			return nil
		}
		if s.settledCh == nil || n < s.settledAt {
			if s.settledCh != nil {
				close(s.settledCh) // the other waiters re-register
			}
			s.settledCh, s.settledAt = make(chan struct{}), n
		}
		ch := s.settledCh
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("inmemory: %d of %d settlements: %w", got, n, ctx.Err())
		}
	}
}

// Health implements messaging.Source: started once subscribed, ready until
// Close, live until Fail or the completion of the stream (Complete, once the
// queued messages were delivered).
func (s *Source) Health() messaging.ChannelHealth {
	if b := s.made(nil); b != nil {
		return b.Health()
	}
	return s.early.Health()
}

// Close stops delivering (the stream completes) and waits until the
// delivered messages are settled or ctx ends.
func (s *Source) Close(ctx context.Context) error {
	b := s.made(func() {
		s.early.MarkClosed()
		s.closed = true
	})
	if b == nil {
		return nil
	}
	if err := b.Close(ctx); err != nil {
		return fmt.Errorf("inmemory: %w", err)
	}
	return nil
}

// Sink is an outgoing channel recording what it receives. It is a
// messaging.NewFuncSink whose send function records the message (and, with
// auto-ack, lets the sink ack it); it requests its window upstream.
type Sink struct {
	channel string

	mu        sync.Mutex
	created   bool
	autoAck   bool
	window    int
	block     *messaging.FuncSink[[]byte] // made by NewSink (or a direct OnSubscribe), with autoAck and window
	early     *messaging.EndpointHealth   // the health until the block is made
	closed    bool                        // a Close before the block was made, passed on to it
	received  chunks[messaging.Message[[]byte]]
	completed bool
	failure   error
	changed   chan struct{} // created by a waiter, closed at the next change
}

// sink returns the building block, made on first use with the handle's settings (the
// channel's once NewSink set them); a Close that came before passes on to it. Only NewSink
// and the Subscriber methods make it, as for [Source].
func (s *Sink) sink(ctx context.Context) *messaging.FuncSink[[]byte] {
	s.mu.Lock()
	b, made := s.block, false
	if b == nil {
		opts := []messaging.SinkOption{messaging.WithSinkWindow(s.window), messaging.WithInlineSend()}
		if !s.autoAck {
			opts = append(opts, messaging.WithSendSettles())
		}
		b = messaging.NewFuncSink(s.channel, s.record, opts...)
		s.block, made = b, true
		s.notifyLocked() // a Wait begun before watches its drain from now on
	}
	closed := s.closed
	s.mu.Unlock()
	if made && closed {
		_ = b.Close(ctx) // nothing was received: it returns at once
	}
	return b
}

// made returns the building block, or nil before it was made; then early runs, under the
// handle's lock.
func (s *Sink) made(early func()) *messaging.FuncSink[[]byte] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.block == nil && early != nil {
		early()
	}
	return s.block
}

func (s *Sink) record(_ context.Context, m messaging.Message[[]byte]) error {
	s.mu.Lock()
	s.received.push(m)
	s.notifyLocked()
	s.mu.Unlock()
	return nil
}

// OnSubscribe implements reactive.Subscriber.
func (s *Sink) OnSubscribe(sub reactive.Subscription) { s.sink(context.Background()).OnSubscribe(sub) }

// OnNext implements reactive.Subscriber.
func (s *Sink) OnNext(m messaging.Message[[]byte]) { s.sink(context.Background()).OnNext(m) }

// OnError implements reactive.Subscriber.
func (s *Sink) OnError(err error) {
	s.sink(context.Background()).OnError(err)
	s.mu.Lock()
	s.failure = err
	s.notifyLocked()
	s.mu.Unlock()
}

// OnComplete implements reactive.Subscriber.
func (s *Sink) OnComplete() {
	s.sink(context.Background()).OnComplete()
	s.mu.Lock()
	s.completed = true
	s.notifyLocked()
	s.mu.Unlock()
}

// waitChanLocked returns the channel closed at the next change.
func (s *Sink) waitChanLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

func (s *Sink) notifyLocked() {
	if s.changed != nil { // someone waits
		close(s.changed)
		s.changed = nil
	}
}

// Messages returns the messages received so far.
func (s *Sink) Messages() []messaging.Message[[]byte] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received.all()
}

// Payloads returns the payloads received so far as strings.
func (s *Sink) Payloads() []string {
	ms := s.Messages()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload())
	}
	return out
}

// Wait waits until at least n messages were received, or the stream ended
// (and every message before the end was recorded), or ctx ends.
func (s *Sink) Wait(ctx context.Context, n int) error {
	// The block drains at the end of the stream, before the handle records the terminal
	// signal, and at a Close, which is no end: once drained, wait for messages, the terminal
	// signal or ctx.
	drainedSeen := false
	for {
		s.mu.Lock()
		got, ended, ch := s.received.len(), s.completed || s.failure != nil, s.waitChanLocked()
		var drained <-chan struct{} // none before the block is made, nor once seen closed
		if s.block != nil && !drainedSeen {
			drained = s.block.Drained()
		}
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-drained:
			drainedSeen, drained = true, nil
		default:
		}
		if drainedSeen && ended {
			s.mu.Lock()
			got = s.received.len() // every message before the end was recorded
			s.mu.Unlock()
			if got >= n {
				return nil
			}
			return fmt.Errorf("inmemory: sink %q ended after %d of %d messages", s.channel, got, n)
		}
		select {
		case <-ch:
		case <-drained:
			drainedSeen = true
		case <-ctx.Done():
			return fmt.Errorf("inmemory: sink %q got %d of %d messages: %w", s.channel, got, n, ctx.Err())
		}
	}
}

// Terminal returns whether the stream completed and its error.
func (s *Sink) Terminal() (completed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completed, s.failure
}

// Health implements messaging.Sink: started once subscribed, ready until
// Close, live until OnError or OnComplete.
func (s *Sink) Health() messaging.ChannelHealth {
	if b := s.made(nil); b != nil {
		return b.Health()
	}
	return s.early.Health()
}

// Close cancels the subscription and, without auto-ack, nacks the
// unsettled messages with messaging.ErrClosed.
func (s *Sink) Close(ctx context.Context) error {
	b := s.made(func() {
		s.early.MarkClosed()
		s.closed = true
	})
	if b == nil {
		return nil
	}
	err := b.Close(ctx)
	s.mu.Lock()
	ms := s.received.all()
	auto := s.autoAck
	s.mu.Unlock()
	if !auto {
		for _, m := range ms {
			_ = m.Nack(ctx, messaging.ErrClosed)
		}
	}
	if err != nil {
		return fmt.Errorf("inmemory: %w", err)
	}
	return nil
}
