package pulsar

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Consumer receives BabelQueue envelopes from Pulsar and dispatches them by URN, with the
// contract's gate, retries and dead letters. Build it with [NewConsumer] or [WrapConsumer],
// run it with [Consumer.Run] and stop it with [Consumer.Close].
type Consumer struct {
	cfg         consumerConfig
	eng         *engine.Engine
	recv        Receiver
	settler     Settler
	ownConsumer apulsar.Consumer // the consumer NewConsumer subscribed; nil when wrapped
	seed        maphash.Seed
	inflight    atomic.Int64 // messages being handled or settled

	mu      sync.Mutex
	closed  bool
	running bool
	stop    context.CancelFunc // cancels the running receive loop
	runDone chan struct{}      // closed when Run returns

	closeOnce sync.Once
}

// NewConsumer subscribes to the configured topics on client and returns a consumer that
// owns that subscription, and the producers it creates for retries and dead letters:
// [Consumer.Close] closes them, never the client. Required options: [WithTopic] (or
// [WithTopics]), [WithSubscription], and at least one [Handle] or an [OnUnknownURN] hook.
// Errors wrap [ErrInvalidOption] for a refused configuration, or are the client's error from
// Subscribe.
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
		co.NackBackoffPolicy = nackBackoff{b: cfg.policy.Backoff}
	}
	pc, err := client.Subscribe(co)
	if err != nil {
		return nil, fmt.Errorf("pulsar: subscribe %q to %v: %w", cfg.subscription, cfg.topics, WrapConnectError("", err))
	}
	if !cfg.noRetention && cfg.senderFactory == nil {
		cfg.retention = engine.RetentionFor(client, cfg.deadLetter)
	}
	c := newConsumer(cfg, pc, pc, clientSenders(client, cfg))
	c.ownConsumer = pc
	return c, nil
}

// WrapConsumer returns a Consumer over an existing Pulsar consumer, which it never closes.
// Declare its subscription type with [WithSubscriptionType] (undeclared means Exclusive,
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
			factory = func(topic string) (Sender, func(), error) {
				return nil, nil, fmt.Errorf("%w: no client to create a producer for %q", ErrInvalidOption, topic)
			}
		} else {
			factory = clientSenders(client, cfg)
			if !cfg.noRetention {
				cfg.retention = engine.RetentionFor(client, cfg.deadLetter)
			}
		}
	}
	return newConsumer(cfg, pc, pc, factory), nil
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
	if len(cfg.handlers) == 0 && cfg.onUnknown == nil {
		return cfg, fmt.Errorf("%w: no handler (use Handle or OnUnknownURN)", ErrInvalidOption)
	}
	if len(cfg.middleware) > 0 {
		for urn, h := range cfg.handlers {
			cfg.handlers[urn] = chain(h, cfg.middleware)
		}
	}
	return cfg, nil
}

func checkStrategy(cfg consumerConfig) error {
	return engine.CheckRetryStrategy(cfg.policy.Strategy, cfg.subType)
}

func clientSenders(client apulsar.Client, cfg consumerConfig) func(topic string) (Sender, func(), error) {
	if cfg.senderFactory != nil {
		return cfg.senderFactory
	}
	return engine.ClientSenders(client, cfg.senderOpts)
}

func newConsumer(cfg consumerConfig, recv Receiver, settler Settler, factory func(string) (Sender, func(), error)) *Consumer {
	maxAttempts := cfg.policy.Attempts()
	if cfg.maxAttempts > 0 {
		maxAttempts = cfg.maxAttempts
	}
	eng := engine.New(engine.Config{
		Subscription:   cfg.subscription,
		MaxAttempts:    maxAttempts,
		Policy:         cfg.policy,
		BrokerDelay:    cfg.subType == apulsar.Shared || cfg.subType == apulsar.KeyShared,
		DeadLetter:     cfg.deadLetter,
		SettleRejects:  true,
		Gate:           true,
		Logger:         cfg.logger,
		Observer:       cfg.observer,
		OnError:        cfg.onError,
		OnMismatch:     cfg.onMismatch,
		DeliveryHooks:  cfg.deliveryHooks,
		Senders:        factory,
		Retention:      cfg.retention,
		MaxMessageSize: cfg.maxMessageSize,
	}, settler)
	return &Consumer{
		cfg:     cfg,
		eng:     eng,
		recv:    recv,
		settler: settler,
		seed:    maphash.MakeSeed(),
	}
}

// MaxAttempts returns the configured number of deliveries, the first included.
func (c *Consumer) MaxAttempts() int { return c.eng.MaxAttempts() }

// Run receives and handles messages until ctx ends, [Consumer.Close] is called, or the
// Pulsar consumer fails for good (it was closed). It then stops receiving, lets in-flight
// messages finish within the close timeout ([WithCloseTimeout]; after it their ctx is
// cancelled), and returns ctx.Err(), [ErrClosed], or the fatal *[ReceiveError]. A message
// received but not yet started when Run stops is negatively acknowledged. Run may be called
// again after it returned, but not concurrently ([ErrRunning]).
func (c *Consumer) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.running:
		c.mu.Unlock()
		return ErrRunning
	}
	rctx, stop := context.WithCancel(ctx)
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
	var pool *workerPool
	if c.cfg.concurrency > 1 {
		pool = newWorkerPool(c.cfg.concurrency, func(msg apulsar.Message) { c.process(wctx, msg) })
	}
	fatal := c.receiveLoop(rctx, wctx, pool)
	if pool != nil {
		pool.close()
		<-pool.done
	}
	switch {
	case fatal != nil:
		return fatal
	case ctx.Err() != nil:
		return ctx.Err() //nolint:wrapcheck // Run documents that it returns ctx.Err() as is
	default:
		return ErrClosed
	}
}

func (c *Consumer) receiveLoop(rctx, wctx context.Context, pool *workerPool) error {
	return c.eng.Pump(rctx, c.recv, nil, func(msg apulsar.Message) bool {
		if pool == nil {
			c.process(wctx, msg)
			return true
		}
		if !pool.submit(rctx, msg, c.keyIndex(msg, pool.n)) {
			c.settler.Nack(msg)
			return false
		}
		return true
	})
}

// keyIndex returns the worker of a keyed message, or -1 for any worker.
func (c *Consumer) keyIndex(msg apulsar.Message, n int) int {
	key := msg.OrderingKey()
	if key == "" {
		key = msg.Key()
	}
	if key == "" {
		return -1
	}
	return int(maphash.String(c.seed, key) % uint64(n)) //nolint:gosec // n is a small positive int
}

// Close stops the consumer, in this order: the receive loop stops; in-flight messages
// finish within the close timeout ([WithCloseTimeout]), after which their ctx is cancelled;
// the producers created for retries and dead letters are closed; and the Pulsar consumer is
// closed when [NewConsumer] subscribed it (a wrapped one is left open). It waits for every
// goroutine the consumer started, including a producer creation in progress (bounded by the
// client's operation timeout), is idempotent, and returns nil.
func (c *Consumer) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		stop, done := c.stop, c.runDone
		c.mu.Unlock()
		if stop != nil {
			stop()
			<-done
		}
		c.eng.Close()
		if c.ownConsumer != nil {
			c.ownConsumer.Close()
		}
	})
	return nil
}

// nackBackoff adapts a retry.Backoff to apulsar.NackBackoffPolicy.
type nackBackoff struct{ b retry.Backoff }

func (n nackBackoff) Next(redeliveryCount uint32) time.Duration {
	return n.b.Delay(int(min(redeliveryCount, 1<<20)) + 1)
}

// workerPool runs handlers on n goroutines. Keyed messages go to their worker's channel, so
// one key is handled in order; others go to the shared channel, served by any idle worker.
type workerPool struct {
	n      int
	keyed  []chan apulsar.Message
	shared chan apulsar.Message
	done   chan struct{}
}

func newWorkerPool(n int, work func(apulsar.Message)) *workerPool {
	p := &workerPool{n: n, keyed: make([]chan apulsar.Message, n), shared: make(chan apulsar.Message), done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := range n {
		p.keyed[i] = make(chan apulsar.Message)
		wg.Add(1)
		go func(own chan apulsar.Message) {
			defer wg.Done()
			shared := p.shared
			for own != nil || shared != nil {
				select {
				case m, ok := <-own:
					if !ok {
						own = nil
						continue
					}
					work(m)
				case m, ok := <-shared:
					if !ok {
						shared = nil
						continue
					}
					work(m)
				}
			}
		}(p.keyed[i])
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return p
}

func (p *workerPool) submit(ctx context.Context, msg apulsar.Message, idx int) bool {
	ch := p.shared
	if idx >= 0 {
		ch = p.keyed[idx]
	}
	select {
	case ch <- msg:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *workerPool) close() {
	for _, ch := range p.keyed {
		close(ch)
	}
	close(p.shared)
}

// Health reports the consumer's health: live until it is closed or its Pulsar consumer
// failed for good; ready while live and its last receive, acknowledgement and settlement
// write (retry republish, dead-letter write) succeeded. Reasons name what failed.
func (c *Consumer) Health() Health { return c.eng.Health() }

// InFlight returns the number of messages the consumer is handling or settling now.
func (c *Consumer) InFlight() int { return int(c.inflight.Load()) }
