package connector

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// DefaultSendWindow is the default send window of a [Sink] (max-inflight-messages).
const DefaultSendWindow = 1000

// PropTraceparent is the W3C Trace Context property a [Sink] writes when tracing is on.
const PropTraceparent = "traceparent"

// ErrSinkFailed is recorded (and the upstream cancelled) when a Sink's producer fails
// for good: closed, fenced, topic terminated or not authorised.
var ErrSinkFailed = errors.New("pulsar: sink failed")

// OutgoingMetadata is read by a [Sink] from a message's metadata
// (messaging.WithMetadataItems(m, connector.OutgoingMetadata{…})) to build the Pulsar
// message. A delay also sets the bq-delay property; Pulsar honours delays on Shared and
// Key_Shared subscriptions only.
type OutgoingMetadata struct {
	Key                 string
	OrderingKey         string
	Properties          map[string]string
	EventTime           time.Time
	DeliverAfter        time.Duration
	DeliverAt           time.Time
	DisableReplication  bool
	ReplicationClusters []string
}

// SinkOptions configure [NewSink].
type SinkOptions struct {
	// Channel names the sink in health reports and logs. Default: the topic.
	Channel string
	// Producer are the client options of the producer; Topic is required.
	// DisableBlockIfQueueFull is always set, so OnNext never blocks.
	Producer apulsar.ProducerOptions
	// Window is the send window: at most this many sends are pending; demand is
	// replenished as they complete. It is clamped to Producer.MaxPendingMessages when
	// that is smaller. Default: [DefaultSendWindow].
	Window int
	// NoWaitForWriteCompletion acknowledges a message and replenishes demand as soon as
	// its send was enqueued; later errors are only logged. Default: false (wait for the
	// broker's receipt).
	NoWaitForWriteCompletion bool
	// ProjectEnvelope adds the bq-* properties of BabelQueue envelope payloads
	// ([bqpulsar.ProjectProperties]; they win over metadata properties). The connector sets it for
	// channels with codec=babelqueue. Default: false.
	ProjectEnvelope bool
	// Tracing writes a W3C traceparent property (tracing-enabled): a traceparent already
	// in the OutgoingMetadata properties is kept; otherwise one is derived from the trace
	// id (the envelope's trace_id when ProjectEnvelope is set and the payload is an
	// envelope, else a bq-trace-id property) when it is a UUID: version 00, trace-id the
	// UUID's 32 hex digits, a random 16-hex-digit parent-id, flags 01 (sampled). Nothing
	// is written for other trace ids. The connector sets it from tracing-enabled
	// (default true). Default: false.
	Tracing bool
	// Hooks' Publish functions are called for every message before it is sent and with
	// the outcome of its send, as bqpulsar.WithHooks's are for a Publisher (tracing injects
	// its context here); the other fields do not apply. Default: none.
	Hooks []bqpulsar.Hooks
	// Logger receives the sink's logs. Default: zap.NewNop().
	Logger *zap.Logger
}

// Sink is a Pulsar producer as a reactive.Subscriber of messages, the outgoing side of
// the babelqueue-pulsar connector: it requests its send window, sends
// each message asynchronously, acks it on the broker's receipt or nacks it with the send
// error, and replenishes demand as sends complete, so at most Window sends are pending.
// Close it with [Sink.Close].
type Sink struct {
	channel  string
	producer apulsar.Producer
	in       *reactive.Inlet
	window   int
	noWait   bool
	project  bool
	tracing  bool
	hooks    seam.PublishFunc // nil without Publish hooks
	logger   *zap.Logger

	results chan sendResult // settled by the worker, capacity window
	quit    chan struct{}   // closed by Close: the worker stops after the pending sends
	done    chan struct{}   // closed when the worker returned

	// prodMu orders the producer's calls: sends and flushes (read side) never overlap
	// its Close (write side), because pulsar-client-go v0.21.0, as v0.19.0 before it, can
	// panic on a flush that overlaps Close: the flush passes its check that the producer
	// is open, then hands its request to the producer's command channel, which Close has
	// closed meanwhile (partitionProducer.FlushWithCtx and doClose).
	prodMu     sync.RWMutex
	prodClosed bool

	mu         sync.Mutex
	pending    int
	subscribed bool
	ended      bool // upstream completed or failed
	completed  bool // upstream completed: the channel's stream ended
	closed     bool
	failure    error
	ready      bool
	reasons    []string
	flushReq   chan struct{} // capacity 1: upstream ended, flush
	closeOnce  sync.Once
	closeErr   error
}

type sendResult struct {
	m   messaging.Message[[]byte]
	err error
}

var _ reactive.Subscriber[messaging.Message[[]byte]] = (*Sink)(nil)

// NewSink creates the producer and returns a Sink over it, which it owns. Errors wrap
// [bqpulsar.ErrInvalidOption], or are the client's error from CreateProducer.
func NewSink(client apulsar.Client, o SinkOptions) (*Sink, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", bqpulsar.ErrInvalidOption)
	}
	po := o.Producer
	if po.Topic == "" {
		return nil, fmt.Errorf("%w: sink without a topic", bqpulsar.ErrInvalidOption)
	}
	if o.Window == 0 {
		o.Window = DefaultSendWindow
	}
	if o.Window < 0 {
		return nil, fmt.Errorf("%w: send window %d is negative", bqpulsar.ErrInvalidOption, o.Window)
	}
	if po.MaxPendingMessages > 0 && po.MaxPendingMessages < o.Window {
		o.Window = po.MaxPendingMessages
	}
	if o.Channel == "" {
		o.Channel = po.Topic
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	po.DisableBlockIfQueueFull = true
	p, err := client.CreateProducer(po)
	if err != nil {
		return nil, fmt.Errorf("pulsar: create producer for %q: %w", po.Topic, err)
	}
	s := &Sink{
		channel: o.Channel, producer: p, in: reactive.NewInlet(int64(o.Window)), window: o.Window,
		noWait: o.NoWaitForWriteCompletion, project: o.ProjectEnvelope, tracing: o.Tracing, hooks: seam.PublishHooks(o.Hooks, o.Logger), logger: o.Logger,
		results: make(chan sendResult, o.Window), quit: make(chan struct{}), done: make(chan struct{}),
		ready: true, flushReq: make(chan struct{}, 1),
	}
	go s.work()
	return s, nil
}

// OnSubscribe implements reactive.Subscriber: it requests the send window. A second
// subscription is cancelled (rule 2.5).
func (s *Sink) OnSubscribe(sub reactive.Subscription) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		if sub == nil {
			panic(fmt.Errorf("%w: subscription", reactive.ErrNilArgument))
		}
		sub.Cancel()
		return
	}
	if s.in.OnSubscribe(sub) {
		s.mu.Lock()
		s.subscribed = true
		s.mu.Unlock()
	}
}

// OnNext implements reactive.Subscriber: it sends m asynchronously and never blocks.
func (s *Sink) OnNext(m messaging.Message[[]byte]) {
	reactive.MustNotBeNil(m)
	s.mu.Lock()
	if s.closed || s.failure != nil {
		s.mu.Unlock()
		s.settle(context.Background(), sendResult{m: m, err: fmt.Errorf("%w: sink %q", messaging.ErrClosed, s.channel)}, false)
		return
	}
	s.pending++
	s.mu.Unlock()
	pm, env := s.message(m)
	var finish func(apulsar.MessageID, error)
	if s.hooks != nil {
		// With the values of the message's context (messaging.ContextMetadata): a producer
		// span is then the child of the span the message came with.
		finish = s.hooks(messaging.MessageContext(context.Background(), m.Metadata()), s.producer.Topic(), env, pm)
	}
	s.traceparent(pm) // after the hooks: a tracing hook's own traceparent wins
	// Settle outside the producer lock: a settlement may request more, and the upstream
	// may then call OnNext again on this goroutine.
	switch sent := s.send(m, pm, finish); {
	case !sent:
		s.settle(context.Background(), sendResult{m: m, err: fmt.Errorf("%w: sink %q", messaging.ErrClosed, s.channel)}, true)
	case s.noWait:
		s.settle(context.Background(), sendResult{m: m}, true)
	}
}

// send enqueues pm unless the producer is closed; with write completion the callback
// hands the outcome to the worker.
func (s *Sink) send(m messaging.Message[[]byte], pm *apulsar.ProducerMessage, finish func(apulsar.MessageID, error)) bool {
	s.prodMu.RLock()
	defer s.prodMu.RUnlock()
	if s.prodClosed {
		if finish != nil {
			finish(nil, fmt.Errorf("%w: sink %q", messaging.ErrClosed, s.channel))
		}
		return false
	}
	if s.noWait {
		s.producer.SendAsync(context.Background(), pm, func(id apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
			if finish != nil {
				finish(id, err)
			}
			if err != nil {
				s.logger.Warn("send failed after acknowledgement (waitForWriteCompletion=false)", zap.String("channel", s.channel), zap.Error(err))
				s.noteResult(err)
			}
		})
		return true
	}
	s.producer.SendAsync(context.Background(), pm, func(id apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
		if finish != nil {
			finish(id, err)
		}
		select {
		case s.results <- sendResult{m: m, err: err}:
		default:
			// Only an upstream emitting beyond its demand can overflow the window.
			go s.settle(context.Background(), sendResult{m: m, err: err}, true)
		}
	})
	return true
}

// message builds the Pulsar message of m: payload, OutgoingMetadata, and the bq-*
// projection of an envelope payload when enabled.
func (s *Sink) message(m messaging.Message[[]byte]) (*apulsar.ProducerMessage, *envelope.Envelope) {
	o := seam.Outgoing{Payload: m.Payload()}
	md, hasMD := messaging.MetadataOf[OutgoingMetadata](m.Metadata())
	if hasMD {
		o.Headers, o.Key, o.OrderingKey, o.EventTime = md.Properties, md.Key, md.OrderingKey, md.EventTime
		o.Delay, o.DeliverAt = md.DeliverAfter, md.DeliverAt
	}
	if s.project {
		o.Env = envelopeOf(m)
	}
	pm := seam.Build(o, time.Now())
	if hasMD {
		pm.DisableReplication, pm.ReplicationClusters = md.DisableReplication, md.ReplicationClusters
	}
	if t, ok := messaging.MetadataOf[deliveryTxn](m.Metadata()); ok {
		// Derived from a message of a transactional Source: the write joins its delivery's
		// transaction and is committed with the incoming acknowledgement.
		pm.Transaction = t.txn
	}
	return pm, o.Env
}

// traceparent writes, with tracing-enabled, a W3C traceparent derived from the trace id
// when the message has none (from its metadata or a publish hook).
func (s *Sink) traceparent(pm *apulsar.ProducerMessage) {
	if !s.tracing {
		return
	}
	if _, ok := pm.Properties[PropTraceparent]; !ok {
		if tp := Traceparent(pm.Properties[bqpulsar.PropTraceID]); tp != "" {
			pm.Properties[PropTraceparent] = tp
		}
	}
}

// envelopeOf returns the envelope a babelqueue-codec payload encodes: the one the codec
// attached to the message when it encoded it, else (a payload built by a stage as bytes)
// the payload classified; nil when it is not an acceptable envelope.
func envelopeOf(m messaging.Message[[]byte]) *envelope.Envelope {
	if e, ok := messaging.MetadataOf[EncodedEnvelope](m.Metadata()); ok && e.Envelope != nil {
		return e.Envelope
	}
	env, err := envelope.Classify(m.Payload())
	if err != nil {
		return nil
	}
	return env
}

// Traceparent returns a W3C traceparent for a BabelQueue trace id that is a UUID:
// "00-<the UUID's 32 lower-case hex digits>-<16 random hex digits>-01". It returns ""
// when traceID is not a UUID or is the nil UUID (an all-zero trace-id is invalid).
func Traceparent(traceID string) string {
	if traceID == "" {
		return ""
	}
	u, err := uuid.Parse(traceID)
	if err != nil || u == uuid.Nil {
		return ""
	}
	var parent [8]byte
	for binary.BigEndian.Uint64(parent[:]) == 0 { // an all-zero parent-id is invalid
		binary.BigEndian.PutUint64(parent[:], rand.Uint64())
	}
	return "00-" + hex.EncodeToString(u[:]) + "-" + hex.EncodeToString(parent[:]) + "-01"
}

// work settles completed sends and flushes when upstream ended, until Close.
func (s *Sink) work() {
	defer close(s.done)
	for {
		select {
		case r := <-s.results:
			s.settle(context.Background(), r, true)
		case <-s.flushReq:
			s.flush()
		case <-s.quit:
			return
		}
	}
}

// flush sends what the producer batched, until Close is called.
func (s *Sink) flush() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-stop:
		}
	}()
	s.prodMu.RLock()
	defer s.prodMu.RUnlock()
	if s.prodClosed {
		return
	}
	if err := s.producer.FlushWithCtx(ctx); err != nil && ctx.Err() == nil {
		s.logger.Warn("flush failed", zap.String("channel", s.channel), zap.Error(err))
	}
}

// settle acks or nacks m after its send, replenishes demand, and records a fatal
// producer failure.
func (s *Sink) settle(ctx context.Context, r sendResult, counted bool) {
	if r.err == nil {
		if err := r.m.Ack(ctx); err != nil {
			s.logger.Warn("ack of a sent message failed", zap.String("channel", s.channel), zap.Error(err))
		}
	} else if err := r.m.Nack(ctx, fmt.Errorf("pulsar: send on channel %q: %w", s.channel, r.err)); err != nil {
		s.logger.Warn("nack of an unsent message failed", zap.String("channel", s.channel), zap.Error(err))
	}
	if !counted {
		return
	}
	s.noteResult(r.err)
	s.mu.Lock()
	s.pending--
	s.mu.Unlock()
	s.in.Consumed(1)
}

// noteResult updates readiness, and records a fatal producer failure (cancelling
// upstream).
func (s *Sink) noteResult(err error) {
	s.mu.Lock()
	s.ready = err == nil
	fatal := err != nil && fatalSend(err) && !s.closed && s.failure == nil
	if err != nil {
		s.reasons = append([]string{err.Error()}, s.reasons...)
		if len(s.reasons) > 10 {
			s.reasons = s.reasons[:10]
		}
	}
	if fatal {
		s.failure = fmt.Errorf("%w: channel %q: %w", ErrSinkFailed, s.channel, err)
	}
	s.mu.Unlock()
	if fatal {
		s.logger.Error("producer failed; cancelling upstream", zap.String("channel", s.channel), zap.Error(err))
		s.in.Cancel()
	}
}

func fatalSend(err error) bool {
	var pe *apulsar.Error
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Result() {
	case apulsar.ProducerClosed, apulsar.TopicTerminated, apulsar.ProducerFenced, apulsar.AuthorizationError, apulsar.AuthenticationError:
		return true
	default:
		return false
	}
}

// OnError implements reactive.Subscriber: the upstream failed; pending sends are flushed.
func (s *Sink) OnError(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", reactive.ErrNilArgument))
	}
	s.logger.Warn("upstream failed", zap.String("channel", s.channel), zap.Error(err))
	s.upstreamEnded()
}

// OnComplete implements reactive.Subscriber: pending sends are flushed.
func (s *Sink) OnComplete() {
	s.mu.Lock()
	s.completed = true
	s.mu.Unlock()
	s.upstreamEnded()
}

func (s *Sink) upstreamEnded() {
	s.in.Terminated()
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	select {
	case s.flushReq <- struct{}{}:
	default:
	}
}

// Pending returns the number of sends waiting for their outcome.
func (s *Sink) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// Window returns the send window in effect.
func (s *Sink) Window() int { return s.window }

// Health reports the sink's health: started once created, ready while the last send
// succeeded, live until a fatal producer failure.
func (s *Sink) Health() messaging.ChannelHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := messaging.ChannelHealth{Channel: s.channel, Direction: messaging.Outgoing, Started: true}
	// A stream that completed has ended: not live, and that is its only reason when
	// nothing failed (the runtime accepts it during its shutdown drain).
	h.Completed = s.completed && s.failure == nil
	h.Live = s.failure == nil && !s.completed
	h.Ready = h.Live && s.ready && !s.closed
	for i, r := range s.reasons {
		if i > 0 {
			h.Reason += "; "
		}
		h.Reason += r
	}
	return h
}

// Close cancels the upstream, flushes the pending sends until ctx ends, closes the
// producer and nacks every message still unconfirmed with messaging.ErrClosed. It is
// idempotent and waits for the sink's goroutine.
func (s *Sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.in.Cancel()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.quit)
		<-s.done // from now on Close settles the results itself
		s.prodMu.Lock()
		if err := s.producer.FlushWithCtx(ctx); err != nil {
			s.closeErr = fmt.Errorf("pulsar: flush sink %q: %w", s.channel, err)
		}
		// Close fails what is still pending (callbacks with an error → nacks).
		s.producer.Close()
		s.prodClosed = true
		s.prodMu.Unlock()
		if err := s.awaitPending(ctx); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// awaitPending settles send results until none is pending or ctx ends.
func (s *Sink) awaitPending(ctx context.Context) error {
	for {
		select {
		case r := <-s.results:
			s.settle(ctx, r, true)
			continue
		default:
		}
		s.mu.Lock()
		n := s.pending
		s.mu.Unlock()
		if n <= 0 {
			return nil
		}
		select {
		case r := <-s.results:
			s.settle(ctx, r, true)
		case <-ctx.Done():
			return fmt.Errorf("pulsar: sink %q closed with %d unconfirmed sends: %w", s.channel, n, ctx.Err())
		}
	}
}
