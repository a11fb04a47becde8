package pulsar

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Consumer receives BabelQueue envelopes from Pulsar and dispatches them by URN, with the
// contract's gate, retries and dead letters. Build it with [NewConsumer] or [WrapConsumer],
// run it with [Consumer.Run] and stop it with [Consumer.Close].
type Consumer struct {
	cfg         consumerConfig
	eng         *engine
	recv        seam.Receiver
	settler     seam.Settler
	ownConsumer apulsar.Consumer // the consumer NewConsumer subscribed (its resubscriber); nil when wrapped
	resub       *resubscriber    // the same, to subscribe again when stranded (resubscribe.go); nil when wrapped
	inflight    atomic.Int64     // messages being handled or settled

	// The unreachable-broker watchdog (watchdog.go): probe asks the broker about a topic
	// (nil without a client); received counts the messages received (the watchdog compares
	// it from one tick to the next, so the receive loop reads no clock); probeTopic is the
	// topic of the first one, for a wrapped consumer; check asks whether the broker still
	// holds the consumer (resubscribe.go), after a probe that the broker answered.
	probe        func(topic string) error
	check        func() error
	strandChecks atomic.Int64    // checks that ended
	pullWatch    <-chan struct{} // the watchdog of the pull style, closed when it ended; nil before the first Next
	received     atomic.Uint64
	probeTopic   atomic.Pointer[string]
	probes       sync.WaitGroup // probes still running (the client bounds each one)

	// The pull style (delivery.go): closing ends every Next when Close starts; gate bounds
	// the unsettled deliveries; out holds them, for Close to nack what is left.
	closing     context.Context //nolint:containedctx // the consumer's lifetime, cancelled by Close
	stopClosing context.CancelFunc
	gate        *inflightGate
	pulls       sync.WaitGroup // calls of Next in progress
	pullMu      sync.Mutex
	pullParent  context.Context //nolint:containedctx // the ctx of the first Next, to reuse its receive context
	pullCtx     context.Context //nolint:containedctx // pullParent's receive context, ended by Close too
	outMu       sync.Mutex
	out         map[*Delivery]struct{}

	mu      sync.Mutex
	closed  bool
	running bool
	style   int                // styleNone, styleRun or stylePull (guarded by mu)
	stop    context.CancelFunc // cancels the running receive loop
	runDone chan struct{}      // closed when Run returns

	closeOnce sync.Once
	closeErr  error
	teardown  chan struct{} // closed when Close's teardown ended, possibly after Close returned
	stage     atomic.Pointer[string]
}

// NewConsumer subscribes to the configured topics on client and returns a consumer that
// owns that subscription, and the producers it creates for retries and dead letters:
// [Consumer.Close] closes them, never the client. Required options: [WithTopic] (one
// or several) and [WithSubscription]; [Consumer.Run] needs at least one [Handle] or [HandleUnknown].
// Errors wrap [ErrInvalidOption] for a refused configuration, or are the client's error from
// Subscribe. A broker that answers that the topic is temporarily unavailable (it is being
// unloaded or moved) is asked again, with pauses of 100 ms doubling to 1 s, for up to 30 s.
func NewConsumer(client apulsar.Client, opts ...ConsumerOption) (*Consumer, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOption)
	}
	cfg, err := consumerSetup(opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.topics) == 0 {
		return nil, fmt.Errorf("%w: no topic (use WithTopic)", ErrInvalidOption)
	}
	if cfg.subscription == "" {
		return nil, fmt.Errorf("%w: no subscription (use WithSubscription)", ErrInvalidOption)
	}
	if err := checkStrategy(cfg); err != nil {
		return nil, err
	}
	if cfg.txnTimeout > 0 { // before subscribing: a refused consumer leaves no subscription behind
		if cfg.txns, err = newTransactions(client, cfg.txnTimeout); err != nil {
			return nil, err
		}
	}
	co := apulsar.ConsumerOptions{SubscriptionInitialPosition: cfg.initialPosition}
	if cfg.consumerOpts != nil {
		cfg.consumerOpts(&co)
	}
	co.Topics, co.Topic, co.TopicsPattern = cfg.topics, "", ""
	co.SubscriptionName = cfg.subscription
	co.Type = cfg.subType
	if cfg.nackDelay > 0 {
		co.NackRedeliveryDelay = cfg.nackDelay
	}
	if cfg.policy.Strategy == retry.Nack && cfg.policy.Backoff.Initial > 0 && co.NackBackoffPolicy == nil {
		co.NackBackoffPolicy = seam.NackBackoff(cfg.policy.Backoff)
	}
	subscribe := func(watch apulsar.ConsumerInterceptor) (apulsar.Consumer, error) {
		o := co
		o.Interceptors = append(slices.Clip(co.Interceptors), watch)
		pc, err := whileTransient(cfg.logger, "subscribe", func() (apulsar.Consumer, error) { return client.Subscribe(o) })
		if err != nil {
			return nil, fmt.Errorf("pulsar: subscribe %q to %v: %w", cfg.subscription, cfg.topics, wrapConnectError("", err))
		}
		return pc, nil
	}
	resub, err := newResubscriber(subscribe)
	if err != nil {
		return nil, err
	}
	if !cfg.noRetention && cfg.senderFactory == nil {
		cfg.retention = retentionFor(client, cfg.deadLetter)
	}
	settler := settlerOf(cfg, resub)
	if cfg.txns != nil {
		if err := cfg.txns.settleWith(settler); err != nil {
			resub.Close()
			return nil, err
		}
	}
	c := newConsumer(cfg, resub, settler, clientSenders(client, cfg))
	c.ownConsumer, c.resub = resub, resub
	resub.onReport(c.reportLost)
	c.probe = topicProbe(client)
	c.check = func() error { return strandCheck(resub) }
	return c, nil
}

// WrapConsumer returns a Consumer over an existing Pulsar consumer, which it never closes.
// Declare its subscription type with [WithSubscription] (undeclared means Exclusive,
// where retries by nack are refused). client creates the producers for retries and dead
// letters (closed by [Consumer.Close]); it may be nil only when no retry republish or
// dead-letter write can happen (retry.Nack and dead letters off).
func WrapConsumer(client apulsar.Client, pc apulsar.Consumer, opts ...ConsumerOption) (*Consumer, error) {
	if pc == nil {
		return nil, fmt.Errorf("%w: nil consumer", ErrInvalidOption)
	}
	cfg, err := consumerSetup(opts)
	if err != nil {
		return nil, err
	}
	if err := checkStrategy(cfg); err != nil {
		return nil, err
	}
	factory := cfg.senderFactory
	if factory == nil {
		if client == nil {
			if cfg.policy.Strategy != retry.Nack || !cfg.deadLetter.Disabled {
				return nil, fmt.Errorf("%w: nil client, but retries republish or dead letters are on", ErrInvalidOption)
			}
			factory = func(topic string) (seam.Sender, func(), error) {
				return nil, nil, fmt.Errorf("%w: no client to create a producer for %q", ErrInvalidOption, topic)
			}
		} else {
			factory = clientSenders(client, cfg)
			if !cfg.noRetention {
				cfg.retention = retentionFor(client, cfg.deadLetter)
			}
		}
	}
	settler := settlerOf(cfg, pc)
	if cfg.txnTimeout > 0 {
		if cfg.txns, err = newTransactions(client, cfg.txnTimeout); err != nil {
			return nil, err
		}
		if err := cfg.txns.settleWith(settler); err != nil {
			return nil, err
		}
	}
	c := newConsumer(cfg, pc, settler, factory)
	if client != nil {
		c.probe = topicProbe(client)
		c.check = func() error { return strandCheck(pc) }
	}
	return c, nil
}

func consumerSetup(opts []ConsumerOption) (consumerConfig, error) {
	cfg := defaultConsumerConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyConsumer(&cfg); err != nil {
			return cfg, err
		}
	}
	if cfg.maxInflight > 0 && cfg.maxInflight < cfg.concurrency {
		return cfg, fmt.Errorf("%w: max in-flight %d is below the concurrency %d", ErrInvalidOption,
			cfg.maxInflight, cfg.concurrency)
	}
	if hooks := newHookSet(cfg.hooks, cfg.logger); hooks != nil {
		for urn, h := range cfg.handlers {
			cfg.handlers[urn] = hooks.wrap(h)
		}
	}
	return cfg, nil
}

// settlerOf returns the settler of a consumer over pc (seam.Front's Settler).
func settlerOf(cfg consumerConfig, pc apulsar.Consumer) seam.Settler {
	if cfg.settlerWrap != nil {
		if s := cfg.settlerWrap(pc); s != nil {
			return s
		}
	}
	return pc
}

func checkStrategy(cfg consumerConfig) error {
	return checkRetryStrategy(cfg.policy.Strategy, cfg.subType)
}

func clientSenders(client apulsar.Client, cfg consumerConfig) func(topic string) (seam.Sender, func(), error) {
	if cfg.senderFactory != nil {
		return cfg.senderFactory
	}
	return producerSenders(client, cfg.senderOpts)
}

func newConsumer(cfg consumerConfig, recv seam.Receiver, settler seam.Settler, factory func(string) (seam.Sender, func(), error)) *Consumer {
	maxAttempts := cfg.policy.Attempts()
	if cfg.maxAttempts > 0 {
		maxAttempts = cfg.maxAttempts
	}
	eng := newEngine(engineConfig{
		Subscription:   cfg.subscription,
		Type:           cfg.subType,
		MaxAttempts:    maxAttempts,
		Policy:         cfg.policy,
		BrokerDelay:    cfg.subType == apulsar.Shared || cfg.subType == apulsar.KeyShared,
		DeadLetter:     cfg.deadLetter,
		SettleRejects:  !cfg.poisonDelivered,
		Gate:           !cfg.noGate,
		Logger:         cfg.logger,
		Hooks:          newHookSet(cfg.hooks, cfg.logger),
		Senders:        factory,
		Retention:      cfg.retention,
		MaxMessageSize: cfg.maxMessageSize,
		Txns:           cfg.txns,
	}, settler)
	c := &Consumer{
		cfg:     cfg,
		eng:     eng,
		recv:    queuedFirst(recv),
		settler: settler,
		out:     map[*Delivery]struct{}{},
	}
	c.gate = newInflightGate(c.maxInflight())
	c.closing, c.stopClosing = context.WithCancel(context.Background())
	return c
}

// Run receives and handles messages until ctx ends, [Consumer.Close] is called, the Pulsar
// consumer fails for good (it was closed), or the broker stayed unreachable for the
// [WithUnreachableTimeout] (off by default: Run goes on trying). It then stops receiving,
// negatively acknowledges the messages received but not yet started (the broker redelivers
// them), lets in-flight messages finish within the close timeout ([WithCloseTimeout]; after
// it their ctx is cancelled), and returns ctx.Err(), [ErrClosed], the fatal *[ReceiveError]
// or the *[UnreachableError]. Run may be called again after it returned, but not
// concurrently ([ErrRunning]).
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.running:
		c.mu.Unlock()
		return ErrRunning
	case c.style == stylePull:
		c.mu.Unlock()
		return ErrStyle
	case len(c.cfg.handlers) == 0 && c.cfg.unknown == nil:
		c.mu.Unlock()
		return fmt.Errorf("%w: no handler (use Handle or HandleUnknown); a consumer without one is for Next", ErrInvalidOption)
	case c.cfg.poisonDelivered:
		c.mu.Unlock()
		return fmt.Errorf("%w: Run needs an envelope: a consumer that delivers poison is for Next", ErrInvalidOption)
	}
	c.style = styleRun
	rctx, stopCause := context.WithCancelCause(ctx)
	stop := func() { stopCause(nil) }
	c.running, c.stop, c.runDone = true, stop, make(chan struct{})
	done := c.runDone
	c.mu.Unlock()
	defer func() {
		stop()
		c.mu.Lock()
		c.running, c.stop = false, nil
		c.mu.Unlock()
		close(done)
	}()

	// Work outlives ctx so that in-flight messages are settled; the drain deadline, which
	// starts when the receive loop is told to stop, ends it.
	wctx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	wctx = withConsumerInfo(wctx, c.eng.info) // once per Run: admission then adds nothing
	defer cancelWork()
	var timerMu sync.Mutex
	var drainTimer *time.Timer
	stopWatch := context.AfterFunc(rctx, func() {
		timerMu.Lock()
		defer timerMu.Unlock()
		drainTimer = time.AfterFunc(c.cfg.closeTimeout, func() {
			c.cfg.logger.Warn("drain deadline passed; cancelling in-flight handlers",
				zap.Duration("timeout", c.cfg.closeTimeout))
			cancelWork()
		})
	})
	defer func() {
		stopWatch()
		timerMu.Lock()
		if drainTimer != nil {
			drainTimer.Stop()
		}
		timerMu.Unlock()
	}()
	watchDone := c.watch(rctx, stopCause)
	var pool *workerPool
	if c.cfg.concurrency > 1 {
		pool = newWorkerPool(c.cfg.concurrency, func() func(apulsar.Message) {
			var slot deliverySlot // the worker's own
			return func(msg apulsar.Message) { c.process(wctx, msg, &slot) }
		}, c.gate.release)
	}
	fatal := c.receiveLoop(rctx, wctx, pool)
	stop()
	<-watchDone
	if pool != nil {
		for _, msg := range pool.close() {
			c.settler.Nack(msg) // received, never started: the broker redelivers it
			c.gate.release()
		}
		pool.wg.Wait()
	}
	var unreachable *UnreachableError
	switch {
	case fatal != nil:
		return fatal
	case ctx.Err() != nil:
		return ctx.Err() //nolint:wrapcheck // Run documents that it returns ctx.Err() as is
	case errors.As(context.Cause(rctx), &unreachable):
		return unreachable
	default:
		return ErrClosed
	}
}

// maxInflight is the consumer's in-flight bound, of Run's worker pool and of Next alike:
// [WithMaxInflight], or 4 × the concurrency.
func (c *Consumer) maxInflight() int {
	if c.cfg.maxInflight > 0 {
		return c.cfg.maxInflight
	}
	return inflightPerWorker * c.cfg.concurrency
}

func (c *Consumer) receiveLoop(rctx, wctx context.Context, pool *workerPool) error {
	var gate *inflightGate
	if pool != nil {
		gate = c.gate // one message at a time without a pool: no bound to keep
	}
	var slot deliverySlot // the receive loop's, when it handles the messages itself
	return c.eng.pump(rctx, c.recv, gate, func(msg apulsar.Message) bool {
		c.received.Add(1)
		if c.probeTopic.Load() == nil {
			topic := msg.Topic()
			c.probeTopic.Store(&topic)
		}
		if pool == nil {
			c.process(wctx, msg, &slot)
			return true
		}
		if !pool.submit(msg, orderingKey(msg)) {
			c.settler.Nack(msg)
			c.gate.release()
			return false
		}
		return true
	})
}

// orderingKey returns the key whose messages are handled in order: the ordering key, else
// the message key; "" for none.
func orderingKey(msg apulsar.Message) string {
	if key := msg.OrderingKey(); key != "" {
		return key
	}
	return msg.Key()
}

// closeGrace is how long Close waits, after the close timeout, for the settlements of the
// handlers cancelled at the drain deadline and for the producers and the Pulsar consumer to
// close.
const closeGrace = 500 * time.Millisecond

// Close stops the consumer, in this order: the receive loop stops, and the messages
// received but not yet started are negatively acknowledged; in-flight messages finish
// within the close timeout ([WithCloseTimeout]), after which their ctx is cancelled; the
// producers created for retries and dead letters are closed; and the Pulsar consumer is
// closed when [NewConsumer] subscribed it (a wrapped one is left open).
//
// Close returns within the close timeout plus half a second, even when the broker is gone
// (the client's Close of a consumer then waits for its reconnection attempts, up to the
// client's operation timeout). When that deadline passes, Close logs what it is still
// waiting for, leaves that step to finish on its own goroutine (which ends when the client
// gives up, or when the client is closed), and returns a *[CloseTimeoutError]. Otherwise it
// returns nil. It is idempotent: later calls return the first call's result at once.
func (c *Consumer) Close() error {
	c.closeOnce.Do(func() {
		deadline := time.Now().Add(c.cfg.closeTimeout + closeGrace)
		c.mu.Lock()
		c.closed = true
		stop, done := c.stop, c.runDone
		c.mu.Unlock()
		if stop != nil {
			stop()
		}
		c.stopClosing() // every Next returns
		var unsettled error
		finished := make(chan struct{})
		c.teardown = finished
		c.setStage("the drain of in-flight messages")
		go func() {
			defer close(finished)
			if done != nil {
				<-done
			}
			c.setStage("the negative acknowledgement of unsettled deliveries")
			unsettled = c.nackUnsettled()
			c.setStage("the closing of the retry and dead-letter producers")
			c.eng.close()
			// The probes end before the Pulsar consumer closes: the client does not answer a
			// GetLastMessageIDs that is between two of its tries when the consumer closes.
			c.setStage("a broker probe")
			if w := c.pullWatchdog(); w != nil {
				<-w
			}
			c.probes.Wait()
			if c.ownConsumer != nil {
				c.setStage("the Pulsar consumer's Close")
				c.ownConsumer.Close()
			}
		}()
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		select {
		case <-finished:
			c.closeErr = unsettled
		case <-timer.C:
			pending := *c.stage.Load()
			c.cfg.logger.Warn("close deadline passed; abandoning the rest of the close to a goroutine",
				zap.Duration("timeout", c.cfg.closeTimeout+closeGrace), zap.String("waiting_for", pending))
			c.closeErr = &CloseTimeoutError{Timeout: c.cfg.closeTimeout + closeGrace, Pending: pending}
		}
	})
	return c.closeErr
}

func (c *Consumer) setStage(s string) { c.stage.Store(&s) }

// pullWatchdog returns the channel closed when the pull style's watchdog ended; nil when Next
// was never called.
func (c *Consumer) pullWatchdog() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pullWatch
}

// ErrCloseTimeout is matched by the *[CloseTimeoutError] that [Consumer.Close] and
// [Publisher.Close] return when their deadline passed.
var ErrCloseTimeout = errors.New("pulsar: close timed out")

// CloseTimeoutError is returned by [Consumer.Close] and [Publisher.Close] when the close
// timeout (plus half a second) passed before the close ended. Pending names the step still running; it goes on
// in the background and ends on its own. It matches [ErrCloseTimeout].
type CloseTimeoutError struct {
	Timeout time.Duration
	Pending string
}

func (e *CloseTimeoutError) Error() string {
	return fmt.Sprintf("pulsar: close timed out after %s, still waiting for %s", e.Timeout, e.Pending)
}

// Unwrap returns [ErrCloseTimeout], which the error matches.
func (*CloseTimeoutError) Unwrap() error { return ErrCloseTimeout }

// Health reports the consumer's health: live until it is closed or its Pulsar consumer
// failed for good; ready while live, the broker answers (see [WithUnreachableTimeout]), and
// its last receive, acknowledgement and settlement write (retry republish, dead-letter
// write) succeeded. Reasons name what failed.
func (c *Consumer) Health() Health { return c.eng.status() }

// InFlight returns the number of messages the consumer is handling or settling now: under
// [Consumer.Run] those in a handler or its settlement, under [Consumer.Next] the deliveries
// returned and not yet settled.
func (c *Consumer) InFlight() int { return int(c.inflight.Load()) }
