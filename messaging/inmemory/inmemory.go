package inmemory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

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
// before or after Start).
func (c *Connector) Source(ch string) *Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sources[ch]
	if !ok {
		s = &Source{channel: ch, maxInflight: 256, changed: make(chan struct{}), health: messaging.NewEndpointHealth(ch, messaging.Incoming)}
		c.sources[ch] = s
	}
	return s
}

// Sink returns the handle of outgoing channel ch (created on first use).
func (c *Connector) Sink(ch string) *Sink {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sinks[ch]
	if !ok {
		s = &Sink{channel: ch, autoAck: true, in: reactive.NewInlet(16), changed: make(chan struct{}), health: messaging.NewEndpointHealth(ch, messaging.Outgoing)}
		c.sinks[ch] = s
	}
	return s
}

// NewSource implements messaging.IncomingConnector.
func (c *Connector) NewSource(_ context.Context, cfg messaging.ChannelConfig) (messaging.Source, error) {
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
	defer s.mu.Unlock()
	if s.created {
		return nil, fmt.Errorf("%w: source %q", ErrInUse, cfg.Channel())
	}
	s.created, s.maxInflight = true, n
	return s, nil
}

// NewSink implements messaging.OutgoingConnector.
func (c *Connector) NewSink(_ context.Context, cfg messaging.ChannelConfig) (messaging.Sink, error) {
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
	defer s.mu.Unlock()
	if s.created {
		return nil, fmt.Errorf("%w: sink %q", ErrInUse, cfg.Channel())
	}
	s.created, s.autoAck, s.in = true, auto, reactive.NewInlet(int64(window))
	return s, nil
}

// Settlement records how a message was settled.
type Settlement struct {
	Payload []byte
	Acked   bool
	Reason  error // nack reason
	Options messaging.NackOptions
}

// Source is an incoming channel fed from code. It delivers while there is
// demand and fewer than max-inflight messages are unsettled.
type Source struct {
	channel string
	health  *messaging.EndpointHealth

	mu          sync.Mutex
	created     bool
	maxInflight int
	pending     []pendingMsg
	inflight    int
	completed   bool
	failure     error
	closed      bool
	subscribed  bool
	settled     []Settlement
	out         *reactive.Outlet[messaging.Message[[]byte]]
	changed     chan struct{}
}

type pendingMsg struct {
	payload []byte
	md      messaging.Metadata
}

// Send queues payload with metadata items for delivery.
func (s *Source) Send(payload []byte, items ...any) {
	s.mu.Lock()
	s.pending = append(s.pending, pendingMsg{payload: payload, md: messaging.NewMetadata(items...)})
	out := s.out
	s.mu.Unlock()
	if out != nil {
		out.Signal()
	}
}

// SendString queues a string payload.
func (s *Source) SendString(v string) { s.Send([]byte(v)) }

// Complete completes the stream once the queued messages were delivered.
func (s *Source) Complete() {
	s.mu.Lock()
	s.completed = true
	out := s.out
	s.mu.Unlock()
	if out != nil {
		out.Signal()
	}
}

// Fail records a fatal failure (the channel is no longer live) and signals
// OnError(err) downstream.
func (s *Source) Fail(err error) {
	s.mu.Lock()
	if s.failure == nil {
		s.failure = err
		s.health.MarkFailed(err)
	}
	out := s.out
	s.notifyLocked()
	s.mu.Unlock()
	if out != nil {
		out.Signal()
	}
}

// Subscribe implements reactive.Publisher; the source is unicast.
func (s *Source) Subscribe(sub reactive.Subscriber[messaging.Message[[]byte]]) {
	if sub == nil {
		panic(fmt.Errorf("%w: subscriber", reactive.ErrNilArgument))
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		reactive.Failed[messaging.Message[[]byte]](fmt.Errorf("%w: in-memory source %q", messaging.ErrClosed, s.channel)).Subscribe(sub)
		return
	case s.subscribed:
		s.mu.Unlock()
		reactive.Failed[messaging.Message[[]byte]](fmt.Errorf("%w: in-memory source %q", reactive.ErrAlreadySubscribed, s.channel)).Subscribe(sub)
		return
	}
	s.subscribed = true
	out := reactive.NewOutlet(sub, s.poll, nil)
	s.out = out
	s.mu.Unlock()
	s.health.MarkStarted()
	out.Start()
}

func (s *Source) poll(canEmit bool) (messaging.Message[[]byte], reactive.PollStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil {
		return nil, reactive.PollDone, s.failure
	}
	if len(s.pending) > 0 && !s.closed {
		if !canEmit || s.inflight >= s.maxInflight {
			return nil, reactive.PollEmpty, nil
		}
		p := s.pending[0]
		s.pending = s.pending[1:]
		s.inflight++
		return s.wrap(p), reactive.PollReady, nil
	}
	if s.completed && len(s.pending) == 0 {
		s.health.MarkCompleted()
		return nil, reactive.PollDone, nil
	}
	return nil, reactive.PollEmpty, nil
}

func (s *Source) wrap(p pendingMsg) messaging.Message[[]byte] {
	return messaging.NewMessage(p.payload, messaging.WithMetadata(p.md),
		messaging.WithAckFunc(func(context.Context) error {
			s.settle(Settlement{Payload: p.payload, Acked: true})
			return nil
		}),
		messaging.WithNackFunc(func(_ context.Context, reason error, o messaging.NackOptions) error {
			s.settle(Settlement{Payload: p.payload, Reason: reason, Options: o})
			return nil
		}))
}

func (s *Source) settle(st Settlement) {
	s.mu.Lock()
	s.inflight--
	s.settled = append(s.settled, st)
	s.notifyLocked()
	out := s.out
	s.mu.Unlock()
	if out != nil {
		out.Signal()
	}
}

func (s *Source) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Settlements returns the settlements so far, in settlement order.
func (s *Source) Settlements() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.settled)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// WaitSettled waits until at least n messages were settled or ctx ends.
func (s *Source) WaitSettled(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := len(s.settled), s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
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
func (s *Source) Health() messaging.ChannelHealth { return s.health.Health() }

// Close stops delivering and waits until the delivered messages are settled
// or ctx ends.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.health.MarkClosed()
	for {
		s.mu.Lock()
		n, ch := s.inflight, s.changed
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("inmemory: source %q closed with %d unsettled: %w", s.channel, n, ctx.Err())
		}
	}
}

// Sink is an outgoing channel recording what it receives.
type Sink struct {
	channel string
	in      *reactive.Inlet
	health  *messaging.EndpointHealth

	mu         sync.Mutex
	created    bool
	autoAck    bool
	received   []messaging.Message[[]byte]
	completed  bool
	failure    error
	closed     bool
	subscribed bool
	changed    chan struct{}
}

// OnSubscribe implements reactive.Subscriber.
func (s *Sink) OnSubscribe(sub reactive.Subscription) {
	s.mu.Lock()
	in := s.in
	s.mu.Unlock()
	if in.OnSubscribe(sub) {
		s.mu.Lock()
		s.subscribed = true
		s.mu.Unlock()
		s.health.MarkStarted()
	}
}

// OnNext implements reactive.Subscriber.
func (s *Sink) OnNext(m messaging.Message[[]byte]) {
	reactive.MustNotBeNil(m)
	s.mu.Lock()
	s.received = append(s.received, m)
	auto, in := s.autoAck, s.in
	s.notifyLocked()
	s.mu.Unlock()
	if auto {
		_ = m.Ack(context.Background())
	}
	in.Consumed(1)
}

// OnError implements reactive.Subscriber.
func (s *Sink) OnError(err error) {
	s.mu.Lock()
	s.in.Terminated()
	s.failure = err
	s.notifyLocked()
	s.mu.Unlock()
	s.health.MarkFailed(err)
}

// OnComplete implements reactive.Subscriber.
func (s *Sink) OnComplete() {
	s.mu.Lock()
	s.in.Terminated()
	s.completed = true
	s.notifyLocked()
	s.mu.Unlock()
	s.health.MarkCompleted()
}

func (s *Sink) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Messages returns the messages received so far.
func (s *Sink) Messages() []messaging.Message[[]byte] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
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

// Wait waits until at least n messages were received, or the stream ended,
// or ctx ends.
func (s *Sink) Wait(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, done, ch := len(s.received), s.completed || s.failure != nil, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		if done {
			return fmt.Errorf("inmemory: sink %q ended after %d of %d messages", s.channel, got, n)
		}
		select {
		case <-ch:
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
func (s *Sink) Health() messaging.ChannelHealth { return s.health.Health() }

// Close cancels the subscription and, without auto-ack, nacks the
// unsettled messages with messaging.ErrClosed.
func (s *Sink) Close(ctx context.Context) error {
	s.health.MarkClosed()
	s.mu.Lock()
	s.closed = true
	ms := slices.Clone(s.received)
	auto := s.autoAck
	s.mu.Unlock()
	s.in.Cancel()
	if auto {
		return nil
	}
	for _, m := range ms {
		_ = m.Nack(ctx, messaging.ErrClosed)
	}
	return nil
}
