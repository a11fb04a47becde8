package pulsar

import (
	"fmt"
	"maps"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// defaultMaxPending is the default bound of [Publisher.PublishAsync]'s pending sends.
const defaultMaxPending = 1000

// defaultCloseTimeout bounds the flush of [Publisher.Close] and the drain of
// [Consumer.Close] by default.
const defaultCloseTimeout = 10 * time.Second

// PublisherOption configures [NewPublisher] and [WrapProducer].
type PublisherOption interface {
	applyPublisher(c *publisherConfig) error
}

type publisherConfig struct {
	commonConfig
	queue        string
	maxPending   int
	producerOpts func(*apulsar.ProducerOptions)
	initialSubs  []string
}

func defaultPublisherConfig() publisherConfig {
	return publisherConfig{
		commonConfig: defaultCommonConfig(),
		maxPending:   defaultMaxPending,
	}
}

type publisherOptionFunc func(c *publisherConfig) error

func (f publisherOptionFunc) applyPublisher(c *publisherConfig) error { return f(c) }

// publisherSet is consumerSet's twin for publisher options.
func publisherSet(err error, set func(c *publisherConfig)) PublisherOption {
	return publisherOptionFunc(setter(err, set))
}

// WithMaxPending bounds the sends [Publisher.PublishAsync] keeps in flight; a further call
// blocks until one completes or its ctx ends. Default: 1000. n < 1 is refused.
func WithMaxPending(n int) PublisherOption {
	return publisherSet(refuse(n < 1, "max pending %d is below 1", n), func(c *publisherConfig) { c.maxPending = n })
}

// WithProducerOptions lets the caller adjust the apulsar.ProducerOptions [NewPublisher]
// creates its producer with (batching, compression, send timeout, …); the topic is set
// before and after f runs. The options f is given batch per key
// (apulsar.KeyBasedBatchBuilder), which Key_Shared subscriptions need: the broker dispatches
// a whole batch to one consumer, so a batch mixing keys would break the key-to-consumer
// affinity; set BatcherBuilderType to apulsar.DefaultBatchBuilder where no subscription is
// Key_Shared. It is the one escape hatch to pulsar-client-go settings. Default:
// none. Ignored by [WrapProducer].
func WithProducerOptions(f func(o *apulsar.ProducerOptions)) PublisherOption {
	return publisherSet(nil, func(c *publisherConfig) { c.producerOpts = f })
}

// WithInitialSubscription makes sure, before the publisher's first send (with that send's
// context), that the named durable subscriptions exist on the publisher's topic, starting at
// the earliest message, without consuming anything (see dlq.EnsureSubscription); a failure is
// the send's error, and the next send tries again. Use it when a service may publish before
// its first consumer has subscribed: Apache Pulsar keeps no message on a topic that has had no
// subscription unless the namespace has a retention policy (the default retention is zero), so
// jobs published then are deleted at the broker's next trim. Name the subscriptions the
// consumers will use. Pulsar's Java ProducerBuilder.initialSubscriptionName does the same;
// pulsar-client-go has no option for it. Ignored by [WrapProducer]. A blank or invalid name is
// refused. Default: none.
func WithInitialSubscription(names ...string) PublisherOption {
	var err error
	for _, n := range names {
		if verr := dlq.ValidateSubscriptionName(n); verr != nil && err == nil {
			err = fmt.Errorf("%w: initial subscription: %w", ErrInvalidOption, verr)
		}
	}
	return publisherSet(err, func(c *publisherConfig) { c.initialSubs = append(c.initialSubs, names...) })
}

// CommonOption is both a [PublisherOption] and a [ConsumerOption]: [WithLogger],
// [WithCloseTimeout] and [WithHooks] configure publishers and consumers alike.
type CommonOption interface {
	PublisherOption
	ConsumerOption
}

// commonConfig is what publishers and consumers configure alike.
type commonConfig struct {
	logger       *zap.Logger
	closeTimeout time.Duration
	hooks        []Hooks
}

func defaultCommonConfig() commonConfig {
	return commonConfig{logger: zap.NewNop(), closeTimeout: defaultCloseTimeout}
}

type commonOption func(c *commonConfig) error

func (o commonOption) applyPublisher(c *publisherConfig) error { return o(&c.commonConfig) }
func (o commonOption) applyConsumer(c *consumerConfig) error   { return o(&c.commonConfig) }

// commonSet is consumerSet's twin for the options of publishers and consumers alike.
func commonSet(err error, set func(c *commonConfig)) CommonOption {
	return commonOption(setter(err, set))
}

// WithCloseTimeout bounds how long Close waits: the publisher's flush of pending sends, or
// the consumer's drain of in-flight messages. Default: 10 s. d ≤ 0 is refused.
func WithCloseTimeout(d time.Duration) CommonOption {
	return commonSet(refuse(d <= 0, "close timeout %s is not positive", d), func(c *commonConfig) { c.closeTimeout = d })
}

// WithLogger sets the logger of a publisher or consumer. Default: zap.NewNop(). A nil
// logger is refused. Give the client the same logger through [NewClientLogger].
func WithLogger(l *zap.Logger) CommonOption {
	return commonSet(refuse(l == nil, "nil logger"), func(c *commonConfig) { c.logger = l })
}

// invalid wraps the error of a check an option makes in [ErrInvalidOption]; nil stays nil.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidOption, err)
}

// refuse returns the error of an option that refuses its value when refused is true (an
// error wrapping [ErrInvalidOption], format and args saying why), nil otherwise.
func refuse(refused bool, format string, args ...any) error {
	if !refused {
		return nil
	}
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// PublishOption configures one publish.
type PublishOption interface {
	applyPublish(o *publishOptions) error
}

type publishOptions struct {
	traceID     string
	queue       string
	delay       time.Duration
	deliverAt   time.Time
	headers     map[string]string // the caller's map, unless ownHeaders
	ownHeaders  bool              // headers is the publish's own: a merge of several WithHeaders, or a held copy
	key         string
	orderingKey string
	messageID   string
}

type publishOptionFunc func(o *publishOptions) error

func (f publishOptionFunc) applyPublish(o *publishOptions) error { return f(o) }

// WithTraceID continues a trace: the envelope's trace_id (and bq-trace-id) is id. Default:
// in a program that imports package bqotel, the active trace of the publish's ctx when it
// carries an OpenTelemetry span context (its trace id as a UUID-shaped string:
// 4bf92f3577b34da6a3ce929d0e0e4736 is written 4bf92f35-77b3-4da6-a3ce-929d0e0e4736); else a
// fresh random UUID, a new trace. A blank id
// is refused. Ignored by [Publisher.PublishEnvelope], whose envelope already has its trace
// id.
func WithTraceID(id string) PublishOption {
	return idOption{id: id, trace: true}
}

// WithMessageID sets meta.id (and bq-message-id) instead of a fresh UUID v4, for producers
// that derive idempotency keys themselves. Default: a new UUID. A blank id is refused.
// Ignored by [Publisher.PublishEnvelope].
func WithMessageID(id string) PublishOption {
	return idOption{id: id}
}

// idOption is [WithTraceID] (trace) or [WithMessageID]: a blank id is refused.
type idOption struct {
	id    string
	trace bool
}

func (o idOption) applyPublish(p *publishOptions) error {
	target, what := &p.messageID, "message"
	if o.trace {
		target, what = &p.traceID, "trace"
	}
	if envelope.IsBlank(o.id) {
		return refuse(true, "blank %s id", what)
	}
	*target = o.id
	return nil
}

// QueueOption is both a [PublisherOption] and a [PublishOption]: [WithQueue] sets a
// publisher's default queue or one publish's queue.
type QueueOption interface {
	PublisherOption
	PublishOption
}

// WithQueue sets the logical queue name written to meta.queue. As a [PublisherOption] it
// sets the publisher's default; as a [PublishOption] it overrides it for one message
// (ignored by [Publisher.PublishEnvelope]). Default: the queue name of the publisher's topic
// (its last segment without -partition-<n>, see [dlq.QueueName]). An invalid name (empty,
// containing '/') is refused.
func WithQueue(name string) QueueOption {
	return queueOption(name)
}

type queueOption string

func (q queueOption) check() error {
	if err := dlq.ValidateQueueName(string(q)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return nil
}

func (q queueOption) applyPublisher(c *publisherConfig) error {
	if err := q.check(); err != nil {
		return err
	}
	c.queue = string(q)
	return nil
}

func (q queueOption) applyPublish(o *publishOptions) error {
	if err := q.check(); err != nil {
		return err
	}
	o.queue = string(q)
	return nil
}

// WithDelay delays delivery by d (apulsar.ProducerMessage.DeliverAfter) and adds the
// bq-delay property, d in whole milliseconds. d ≤ 0 means no delay and no bq-delay.
// Pulsar honours delays only on Shared and Key_Shared subscriptions; Exclusive and Failover
// subscriptions receive the message at once. Default: no delay.
func WithDelay(d time.Duration) PublishOption {
	return publishOptionFunc(func(o *publishOptions) error {
		o.delay = d
		o.deliverAt = time.Time{}
		return nil
	})
}

// WithDeliverAt delivers the message at t (apulsar.ProducerMessage.DeliverAt) and adds the
// bq-delay property, the time left until t in whole milliseconds when publishing. A t not
// in the future means no delay and no bq-delay. As for [WithDelay], only Shared and
// Key_Shared subscriptions honour it. Default: no delay.
func WithDeliverAt(t time.Time) PublishOption {
	return publishOptionFunc(func(o *publishOptions) error {
		o.deliverAt = t
		o.delay = 0
		return nil
	})
}

// WithHeaders merges extra properties (W3C traceparent, tracestate, bq-replay-bypass, …)
// into the message's properties. Empty keys or values are dropped, and a contract property
// (bq-job, bq-trace-id, bq-message-id, bq-schema-version, bq-source-lang, bq-attempts,
// bq-delay) always wins a clash. Several WithHeaders merge, the later winning. h is only
// read, and not kept after the publish call returns (a publish held for a transaction keeps
// a copy). Default: none.
func WithHeaders(h map[string]string) PublishOption {
	return publishOptionFunc(func(o *publishOptions) error {
		switch {
		case len(h) == 0:
		case o.headers == nil:
			// The one map of the common case is read where the message's properties are
			// filled (buildInto, which drops the empty keys and values), not copied here.
			o.headers = h
		default:
			if !o.ownHeaders {
				o.headers, o.ownHeaders = maps.Clone(o.headers), true
			}
			for k, v := range h {
				if k != "" && v != "" {
					o.headers[k] = v
				}
			}
		}
		return nil
	})
}

// WithKey sets the message key (apulsar.ProducerMessage.Key): partition routing, Key_Shared
// affinity, compaction. Default: none.
func WithKey(key string) PublishOption {
	return publishOptionFunc(func(o *publishOptions) error {
		o.key = key
		return nil
	})
}

// WithOrderingKey sets the ordering key (apulsar.ProducerMessage.OrderingKey), which
// Key_Shared subscriptions use instead of the key when set. Default: none.
func WithOrderingKey(key string) PublishOption {
	return publishOptionFunc(func(o *publishOptions) error {
		o.orderingKey = key
		return nil
	})
}
