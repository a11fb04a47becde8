package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// Publisher publishes BabelQueue envelopes to one Pulsar topic. It is safe for concurrent
// use. Build it with [NewPublisher] (it then owns its producer) or [WrapProducer]. Called
// with the ctx of a handler of a consumer with [WithTransactions], it sends inside that
// delivery's transaction: the broker holds the message until the transaction ends (see
// [WithTransactions] for what an abort leaves).
type Publisher struct {
	producer seam.MessageProducer
	closeFn  func() // closes the producer the publisher created; nil when wrapped
	topic    string
	queue    string
	logger   *zap.Logger
	timeout  time.Duration
	pending  chan struct{}         // semaphore of PublishAsync's sends in flight
	queueOpt []envelope.MakeOption // envelope.WithQueue(queue), built once
	hooks    *hookSet              // nil without Publish hooks
	// partitioned is true when topic is a partitioned topic (asked only with hooks, for
	// OutgoingMessage.Partitioned).
	partitioned bool
	initial     *initialSubscriptions // nil without WithInitialSubscription

	// recycle is true when the outgoing messages may be reused once the client is done with
	// them: the Publisher created the producer (so its Send waits for the receipt unless ctx
	// ends), without chunking (whose callback may run while later chunks are still being
	// cut from the payload) or interceptors (which could keep the message). Publish hooks
	// may read the message until their outcome function returns, which is called before
	// the message is reused.
	recycle bool
	outs    sync.Pool // *outMsg, when recycle

	mu     sync.RWMutex // guards closed and wg.Add against Close
	closed bool
	wg     sync.WaitGroup // PublishAsync callbacks not yet run

	closeOnce sync.Once
	closeErr  error
}

// NewPublisher creates a producer for topic on client and returns a Publisher that owns
// it: [Publisher.Close] closes that producer, never the client. Options: [WithQueue],
// [WithMaxPending], [WithProducerOptions], [WithCloseTimeout],
// [WithLogger], [WithInitialSubscription], [WithHooks]. Errors wrap [ErrInvalidOption]
// for a bad option or topic, a *[ConnectError] when the broker could not be reached (it
// unwraps to the client's error), or are the client's error from CreateProducer. An initial
// subscription that cannot be made fails the first send with a *dlq.SubscriptionError. A
// broker that answers that the topic is temporarily unavailable is asked again, as by
// [NewConsumer], for up to 30 s.
func NewPublisher(client apulsar.Client, topic string, opts ...PublisherOption) (*Publisher, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	}
	cfg, err := publisherSetup(topic, opts)
	if err != nil {
		return nil, err
	}
	po := apulsar.ProducerOptions{Topic: topic, BatcherBuilderType: apulsar.KeyBasedBatchBuilder}
	if cfg.producerOpts != nil {
		cfg.producerOpts(&po)
		po.Topic = topic
	}
	p, err := whileTransient(cfg.logger, "create producer", func() (apulsar.Producer, error) { return client.CreateProducer(po) })
	if err != nil {
		return nil, fmt.Errorf("pulsar: create producer for %q: %w", topic, wrapConnectError("", err))
	}
	pub := newPublisher(p, p.Close, topic, cfg)
	pub.recycle = !po.EnableChunking && po.Interceptors == nil
	if pub.hooks != nil {
		pub.partitioned = isPartitioned(client, topic)
	}
	if len(cfg.initialSubs) > 0 {
		pub.initial = &initialSubscriptions{client: client, names: cfg.initialSubs}
	}
	return pub, nil
}

// isPartitioned reports whether topic is a partitioned topic, by the client's lookup of its
// partitions (a topic named as one partition is not: its producer has no choice to make). A
// failed lookup says false: the topic's producer was just created, so it is not expected.
func isPartitioned(client apulsar.Client, topic string) bool {
	if isPartition(topic) {
		return false
	}
	parts, err := client.TopicPartitions(topic)
	return err == nil && len(parts) > 0 && isPartition(parts[0])
}

// isPartition reports whether topic names one partition of a partitioned topic
// ("…-partition-<n>").
func isPartition(topic string) bool {
	parent, err := dlq.ParentTopic(topic)
	return err == nil && parent != topic
}

// initialSubscriptions are the durable subscriptions [WithInitialSubscription] makes sure of
// before the publisher's first send, with that send's context; a failure is returned by the
// send and tried again by the next one.
type initialSubscriptions struct {
	client apulsar.Client
	names  []string
	done   atomic.Bool
	mu     sync.Mutex
}

func (s *initialSubscriptions) ensure(ctx context.Context, topic string) error {
	if s == nil || s.done.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done.Load() {
		return nil
	}
	for _, sub := range s.names {
		if err := dlq.EnsureSubscription(ctx, s.client, topic, sub); err != nil {
			return fmt.Errorf("pulsar: publish to %q: initial subscription: %w", topic, wrapConnectError("", err))
		}
	}
	s.done.Store(true)
	return nil
}

// WrapProducer returns a Publisher over an existing producer. [Publisher.Close] flushes
// it but does not close it: the caller keeps ownership. Options as for [NewPublisher]
// ([WithProducerOptions] does not apply).
func WrapProducer(p apulsar.Producer, opts ...PublisherOption) (*Publisher, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil producer", ErrInvalidOption)
	}
	return wrapMessageProducer(p, p.Topic(), opts)
}

func wrapMessageProducer(p seam.MessageProducer, topic string, opts []PublisherOption) (*Publisher, error) {
	cfg, err := publisherSetup(topic, opts)
	if err != nil {
		return nil, err
	}
	return newPublisher(p, nil, topic, cfg), nil
}

func publisherSetup(topic string, opts []PublisherOption) (publisherConfig, error) {
	cfg := defaultPublisherConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyPublisher(&cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.queue == "" {
		q, err := dlq.QueueName(topic)
		if err != nil {
			return cfg, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		cfg.queue = q
	} else if err := dlq.ValidateTopic(topic); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return cfg, nil
}

func newPublisher(p seam.MessageProducer, closeFn func(), topic string, cfg publisherConfig) *Publisher {
	return &Publisher{
		producer: p,
		closeFn:  closeFn,
		topic:    topic,
		queue:    cfg.queue,
		logger:   cfg.logger,
		timeout:  cfg.closeTimeout,
		pending:  make(chan struct{}, cfg.maxPending),
		queueOpt: []envelope.MakeOption{envelope.WithQueue(cfg.queue)},
		hooks:    publishHooks(cfg.hooks, cfg.logger),
	}
}

// Pending returns the number of asynchronous sends in flight.
func (p *Publisher) Pending() int { return len(p.pending) }

// Topic returns the topic the publisher sends to.
func (p *Publisher) Topic() string { return p.topic }

// Publish builds an envelope for urn and data ([envelope.Make]), sends it and waits for the
// broker's receipt. It returns meta.id, the message's idempotency key. ctx bounds the whole
// delivery. data is a JSON object: nil, a map, a struct, or json.RawMessage/[]byte holding
// an object. Errors: [ErrClosed], [ErrInvalidOption], the envelope package's
// ErrInvalidURN/ErrInvalidData, or the send's error. With the ctx of a handler of a
// consumer [WithTransactions], the send is held back until the handler returned nil and
// then made inside the delivery's transaction: Publish returns meta.id at once.
func (p *Publisher) Publish(ctx context.Context, urn string, data any, opts ...PublishOption) (string, error) {
	var po publishOptions
	env, err := p.build(ctx, &po, urn, data, opts)
	if err != nil {
		return "", err
	}
	return p.send(ctx, env, &po)
}

// PublishEnvelope sends a ready envelope as it is (its trace id, meta.id, queue and
// attempts) and waits for the receipt. Delay, header and key options apply; WithTraceID,
// WithMessageID and WithQueue are ignored. It returns env.Meta.ID.
func (p *Publisher) PublishEnvelope(ctx context.Context, env *envelope.Envelope, opts ...PublishOption) (string, error) {
	if env == nil {
		return "", fmt.Errorf("%w: nil envelope", ErrInvalidOption)
	}
	var po publishOptions
	if err := applyPublishOptions(&po, opts); err != nil {
		return "", err
	}
	return p.send(ctx, env, &po)
}

// PublishAsync builds and enqueues a message like [Publisher.Publish] without waiting for
// the receipt: done is called exactly once, from a client goroutine, with meta.id and the
// send's outcome. At most [WithMaxPending] sends are in flight; when that many are, the call
// blocks until one completes or ctx ends. ctx bounds that wait and the enqueue, not the
// delivery. When PublishAsync returns an error, nothing was sent and done is never called.
// With the ctx of a handler of a consumer [WithTransactions], the send is held back until
// the handler returned nil (done is then called from the settlement, with the send's
// outcome) and dropped when it failed (done is told that nothing was sent).
func (p *Publisher) PublishAsync(ctx context.Context, urn string, data any, done func(messageID string, err error), opts ...PublishOption) error {
	return p.publishAsync(ctx, false, urn, data, done, opts)
}

// TryPublishAsync is [Publisher.PublishAsync] without the wait: when [WithMaxPending] sends
// are already in flight it fails at once with [ErrFull] (and done is never called).
func (p *Publisher) TryPublishAsync(ctx context.Context, urn string, data any, done func(messageID string, err error), opts ...PublishOption) error {
	return p.publishAsync(ctx, true, urn, data, done, opts)
}

func (p *Publisher) publishAsync(ctx context.Context, try bool, urn string, data any, done func(string, error), opts []PublishOption) error {
	if err := p.ready(ctx); err != nil {
		return err
	}
	var po publishOptions
	env, err := p.build(ctx, &po, urn, data, opts)
	if err != nil {
		return err
	}
	st := txnStateOf(ctx)
	if st != nil && st.hold(heldSend{p: p, env: env, po: po, async: true, done: done}) {
		return nil // sent inside the transaction once the handler succeeded; done is told then
	}
	om, err := p.message(env, &po)
	if err != nil {
		return err
	}
	if try {
		select {
		case p.pending <- struct{}{}:
		default:
			p.release(om)
			return ErrFull
		}
	} else {
		select {
		case p.pending <- struct{}{}: // a free slot: no need to watch ctx
		default:
			select {
			case p.pending <- struct{}{}:
			case <-ctx.Done():
				p.release(om)
				return fmt.Errorf("pulsar: publish to %q: waiting for a pending slot: %w", p.topic, ctx.Err())
			}
		}
	}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		<-p.pending
		p.release(om)
		return ErrClosed
	}
	p.wg.Add(1)
	p.mu.RUnlock()
	om.id, om.done = env.Meta.ID, done
	om.finish = p.beforeSend(ctx, env, &om.pm, st)
	p.producer.SendAsync(ctx, &om.pm, om.callback)
	return nil
}

// ready makes sure of the initial subscriptions before the first send, with ctx; once Close
// has started it returns [ErrClosed] instead, so that a closed publisher makes none. The
// caller checks for a closed publisher afterwards as well.
func (p *Publisher) ready(ctx context.Context) error {
	if p.initial == nil || p.initial.done.Load() {
		return nil
	}
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return p.initial.ensure(ctx, p.topic)
}

// sent is the end of an asynchronous send: the client's callback of om.
func (p *Publisher) sent(om *outMsg, mid apulsar.MessageID, err error) {
	defer p.wg.Done()
	<-p.pending
	id, done, finish := om.id, om.done, om.finish
	if finish != nil {
		finish(mid, err) // before the release: a Publish hook may read the message until its outcome returns
	}
	p.release(om) // the client is done with the message once it calls back
	if err != nil {
		err = fmt.Errorf("pulsar: publish to %q: %w", p.topic, err)
	}
	if done != nil {
		done(id, err)
	}
}

func applyPublishOptions(po *publishOptions, opts []PublishOption) error {
	if len(opts) == 0 {
		return nil
	}
	// The options are interface calls, so what they write to escapes: they write to a heap
	// copy, made only when there are options, and po can stay on the caller's stack.
	heap := new(publishOptions)
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyPublish(heap); err != nil {
			return err
		}
	}
	*po = *heap
	return nil
}

// build makes the envelope of a publish. Its trace_id is WithTraceID's, else the active
// trace's of ctx (seam.ActiveTraceID, which package bqotel sets), else a fresh random UUID.
func (p *Publisher) build(ctx context.Context, po *publishOptions, urn string, data any, opts []PublishOption) (*envelope.Envelope, error) {
	if err := applyPublishOptions(po, opts); err != nil {
		return nil, err
	}
	if po.traceID == "" && seam.ActiveTraceID != nil {
		po.traceID = seam.ActiveTraceID(ctx)
	}
	mo := p.queueOpt // the common case: no per-message option, nothing to allocate
	if po.queue != "" || po.traceID != "" || po.messageID != "" {
		queue := p.queue
		if po.queue != "" {
			queue = po.queue
		}
		mo = make([]envelope.MakeOption, 1, 3)
		mo[0] = envelope.WithQueue(queue)
		if po.traceID != "" {
			mo = append(mo, envelope.WithTraceID(po.traceID))
		}
		if po.messageID != "" {
			mo = append(mo, envelope.WithMessageID(po.messageID))
		}
	}
	env, err := envelope.Make(urn, data, mo...)
	if err != nil {
		return nil, fmt.Errorf("pulsar: publish to %q: %w", p.topic, err)
	}
	return env, nil
}

// outMsg is one outgoing message: the client's message, its property map and its encoded
// payload, and for an asynchronous send what its callback needs. With recycle, it is reused
// once the client has called back (so a message costs no allocation of its own).
type outMsg struct {
	pm       apulsar.ProducerMessage
	props    map[string]string
	buf      []byte
	id       string
	done     func(string, error)
	finish   func(apulsar.MessageID, error)
	callback func(apulsar.MessageID, *apulsar.ProducerMessage, error) // calls p.sent(om, …), made once per outMsg
}

// maxRecycledPayload bounds the payload buffer kept for reuse, so that one large message
// does not pin its buffer for ever.
const maxRecycledPayload = 64 << 10

func (p *Publisher) outMsg() *outMsg {
	if p.recycle {
		if om, ok := p.outs.Get().(*outMsg); ok {
			return om
		}
	}
	om := &outMsg{props: make(map[string]string, 8)}
	om.callback = func(mid apulsar.MessageID, _ *apulsar.ProducerMessage, err error) { p.sent(om, mid, err) }
	return om
}

// release returns om for reuse (with recycle); om must not be used afterwards.
func (p *Publisher) release(om *outMsg) {
	if !p.recycle {
		return
	}
	clear(om.props) // om.pm is overwritten whole by the next buildInto
	om.id, om.done, om.finish = "", nil, nil
	if cap(om.buf) > maxRecycledPayload {
		om.buf = nil
	}
	p.outs.Put(om)
}

func (p *Publisher) message(env *envelope.Envelope, po *publishOptions) (*outMsg, error) {
	om := p.outMsg()
	var err error
	if p.recycle {
		om.buf, err = env.AppendEncode(om.buf[:0])
	} else {
		om.buf, err = env.Encode() // the client's message keeps it: never reused
	}
	if err != nil {
		p.release(om)
		return nil, fmt.Errorf("pulsar: publish to %q: %w", p.topic, err)
	}
	var now time.Time // the clock only matters to a DeliverAt
	if !po.deliverAt.IsZero() {
		now = time.Now()
	}
	buildInto(&om.pm, om.props, seam.Outgoing{
		Payload: om.buf, Env: env, Headers: po.headers,
		Key: po.key, OrderingKey: po.orderingKey,
		Delay: po.delay, DeliverAt: po.deliverAt,
	}, now)
	return om, nil
}

func (p *Publisher) send(ctx context.Context, env *envelope.Envelope, po *publishOptions) (string, error) {
	if err := p.ready(ctx); err != nil {
		return "", err
	}
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return "", ErrClosed
	}
	st := txnStateOf(ctx)
	if st != nil && st.hold(heldSend{p: p, env: env, po: *po}) {
		return env.Meta.ID, nil // sent inside the transaction once the handler succeeded
	}
	om, err := p.message(env, po)
	if err != nil {
		return "", err
	}
	finish := p.beforeSend(ctx, env, &om.pm, st)
	mid, err := p.producer.Send(ctx, &om.pm)
	if finish != nil {
		finish(mid, err)
	}
	if err == nil || ctx.Err() == nil {
		// Send returned through the client's callback: the client is done with the message.
		// (When ctx ended, Send may have returned with the message still in flight.)
		p.release(om)
	}
	if err != nil {
		return "", fmt.Errorf("pulsar: publish to %q: %w", p.topic, err)
	}
	return env.Meta.ID, nil
}

// beforeSend puts msg in the transaction of st, the state that ctx carries (txnStateOf, nil
// for none), runs the publish hooks on msg and returns the function that reports the send's
// outcome to them, or nil without hooks.
func (p *Publisher) beforeSend(ctx context.Context, env *envelope.Envelope, msg *apulsar.ProducerMessage, st *txnState) func(apulsar.MessageID, error) {
	if st != nil {
		msg.Transaction = st.txn // a handler's publish joins its delivery's transaction (WithTransactions)
	}
	if p.hooks == nil {
		return nil // and no OutgoingMessage to allocate
	}
	return p.hooks.publishing(ctx, &OutgoingMessage{Topic: p.topic, Envelope: env, Message: msg, Partitioned: p.partitioned})
}

// Close stops the publisher, in this order: new publishes fail with [ErrClosed]; pending
// asynchronous sends are flushed and their callbacks awaited (both bounded by
// [WithCloseTimeout]); then the producer is closed when the publisher created it. It is
// idempotent and returns the flush error, if any. A wrapped producer is not closed, so a
// callback whose send it has not ended within the close timeout runs later, when it does;
// Close then returns an error matching context.DeadlineExceeded. The producer's own Close
// (which waits for the broker, up to the client's operation timeout when it is gone) is
// bounded as the consumer's is: past the close timeout plus half a second, Close returns a
// *[CloseTimeoutError] and the producer's Close goes on in the background.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		deadline := time.Now().Add(p.timeout + closeGrace)
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		defer cancel()
		if err := p.producer.FlushWithCtx(ctx); err != nil {
			p.closeErr = fmt.Errorf("pulsar: close publisher for %q: flush: %w", p.topic, err)
			p.logger.Warn("publisher flush failed on close", zap.String("topic", p.topic), zap.Error(err))
		}
		if p.closeFn == nil {
			// A wrapped producer stays open: its pending sends end when the caller's
			// producer ends them, and their callbacks run then, after Close if need be.
			if !waitGroup(ctx, &p.wg) && p.closeErr == nil {
				p.closeErr = fmt.Errorf("pulsar: close publisher for %q: callbacks of pending sends: %w", p.topic, ctx.Err())
			}
			return
		}
		// Closing the producer fails whatever is still pending, which runs the callbacks.
		waitGroup(ctx, &p.wg)
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			p.closeFn()
			p.wg.Wait()
		}()
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		select {
		case <-closed:
		case <-timer.C:
			const pending = "the Pulsar producer's Close"
			p.logger.Warn("close deadline passed; abandoning the rest of the close to a goroutine",
				zap.String("topic", p.topic), zap.Duration("timeout", p.timeout+closeGrace), zap.String("waiting_for", pending))
			p.closeErr = errors.Join(p.closeErr, &CloseTimeoutError{Timeout: p.timeout + closeGrace, Pending: pending})
		}
	})
	return p.closeErr
}

// waitGroup waits for wg or ctx, whichever comes first. The helper goroutine it may start
// ends when wg does: the callers wait on wg afterwards, except [Publisher.Close] over a
// wrapped producer, whose pending sends end when the caller's producer ends them.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
