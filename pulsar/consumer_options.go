package pulsar

import (
	"context"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// HandlerFunc handles one message. env is the decoded envelope with attempts set to the
// reconciled count (the number of earlier deliveries), msg the Pulsar message. Return nil to
// acknowledge; an error (or a panic, which is recovered) counts as a failed delivery. ctx
// ends when the consumer's drain deadline passes. env is shared with the settlement that
// follows: do not modify it.
type HandlerFunc func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error

// ErrorHook receives the consumer's errors: gate rejections, poison, unknown URNs without a
// hook, handler failures, exhausted messages dropped, settlement failures (failed republish,
// dead-letter write or ack) and receive failures. env is nil when the payload was not
// decoded; msg is nil for receive failures. It is called from the goroutine handling the
// message; a panic in it is recovered and logged.
type ErrorHook func(err error, env *envelope.Envelope, msg apulsar.Message)

// UnknownURNHook is called for a message whose routing URN has no handler; the message is
// then acknowledged. If it panics, the panic is reported to the error hook and the message is
// treated as an unknown URN without a hook (retried, then dead-lettered).
type UnknownURNHook func(env *envelope.Envelope, msg apulsar.Message)

// RoutingMismatchHook is called when the bq-job property and the body's URN differ; the
// property wins the routing. A panic in it is recovered and logged; settlement is unchanged.
type RoutingMismatchHook func(propertyURN, bodyURN string, env *envelope.Envelope, msg apulsar.Message)

// ConsumerOption configures [NewConsumer] and [WrapConsumer].
type ConsumerOption interface {
	applyConsumer(c *consumerConfig) error
}

type consumerOptionFunc func(c *consumerConfig) error

func (f consumerOptionFunc) applyConsumer(c *consumerConfig) error { return f(c) }

type consumerConfig struct {
	topics             []string
	subscription       string
	subType            apulsar.SubscriptionType
	subTypeSet         bool
	handlers           map[string]HandlerFunc
	policy             retry.Policy
	maxAttempts        int // from WithMaxAttempts; 0 = policy's
	deadLetter         dlq.Config
	concurrency        int
	maxInflight        int           // 0 = inflightPerWorker × concurrency
	unreachableTimeout time.Duration // 0 = keep trying
	onError            ErrorHook
	onUnknown          UnknownURNHook
	onMismatch         RoutingMismatchHook
	logger             *zap.Logger
	observer           Observer
	closeTimeout       time.Duration
	nackDelay          time.Duration
	consumerOpts       func(*apulsar.ConsumerOptions)
	senderOpts         func(*apulsar.ProducerOptions)
	senderFactory      func(topic string) (Sender, func(), error) // tests and WrapConsumer without client
	middleware         []Middleware
	deliveryHooks      []DeliveryHook
	initialPosition    apulsar.SubscriptionInitialPosition
	noRetention        bool
	maxMessageSize     int
	retention          func(ctx context.Context, topic, deadLetterTopic string) error
	settlerWrap        func(apulsar.Consumer) Settler
	noGate             bool
	poisonDelivered    bool
}

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		subType:      apulsar.Exclusive,
		handlers:     map[string]HandlerFunc{},
		policy:       retry.DefaultPolicy(),
		concurrency:  1,
		logger:       zap.NewNop(),
		closeTimeout: defaultCloseTimeout,
		// A job queue must not skip jobs published before its first worker subscribed.
		initialPosition: apulsar.SubscriptionPositionEarliest,
	}
}

// WithInitialPosition sets where [NewConsumer] starts a subscription that does not exist
// yet: apulsar.SubscriptionPositionEarliest (the oldest message the topic still holds) or
// apulsar.SubscriptionPositionLatest (only messages published from now on). An existing
// subscription keeps its cursor whatever this says, as Pulsar does. Default: Earliest, so
// that a job queue does not skip jobs published before its first worker started (the
// client's own default is Latest). Ignored by [WrapConsumer].
func WithInitialPosition(p apulsar.SubscriptionInitialPosition) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		switch p {
		case apulsar.SubscriptionPositionEarliest, apulsar.SubscriptionPositionLatest:
		default:
			return fmt.Errorf("%w: unknown initial position %d", ErrInvalidOption, p)
		}
		c.initialPosition = p
		return nil
	})
}

// WithRetentionSubscription says whether the consumer makes sure, before its first write to
// a dead-letter topic, that the queue's retention subscription exists on it (dlq.Config's
// Subscription, "bq-dlq" by default). Apache Pulsar keeps a message only while a durable
// subscription still needs it unless the namespace has a retention policy, and the default
// retention is zero: dead letters written to a topic nobody subscribes to are deleted when
// the broker trims its ledgers. If the subscription cannot be made (auto subscription
// creation off, no permission), the dead-letter write counts as failed: the original is
// negatively acknowledged, nothing is acked or lost, and the error names the topic, the
// subscription and the fix. Turn it off only where a retention policy keeps the dead letters
// anyway. Default: on.
func WithRetentionSubscription(on bool) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.noRetention = !on
		return nil
	})
}

// WithMaxMessageSize bounds what the consumer writes to settle a message, in bytes (payload
// and properties). A dead-letter copy larger than n (a poison body re-escaped, a huge error
// text) is replaced by a truncated, marked copy that fits: the dead-letter block, the
// original's size and SHA-256 and its first 64 KiB (see envelope.TruncatedCopy); the
// decision is logged at ERROR, reported to the error hook as a *[TruncatedError] and to the
// observer as [EventTruncated], and the original is acknowledged once the copy is written.
// A retry copy larger than n goes to the dead-letter path. A copy the broker refuses as too
// big anyway is truncated further and written once more. Match it to the broker's
// maxMessageSize. Default: 5 MiB less 64 KiB (Pulsar's default limit, with room for the
// metadata). n < 64 KiB is refused.
func WithMaxMessageSize(n int) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if n < 64<<10 {
			return fmt.Errorf("%w: max message size %d is below 64 KiB", ErrInvalidOption, n)
		}
		c.maxMessageSize = n
		return nil
	})
}

// WithTopic adds a topic to consume (a partitioned topic means all its partitions). At
// least one topic is needed by [NewConsumer]; ignored by [WrapConsumer].
func WithTopic(topic string) ConsumerOption {
	return WithTopics(topic)
}

// WithTopics adds topics to consume. See [WithTopic].
func WithTopics(topics ...string) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		for _, t := range topics {
			if err := dlq.ValidateTopic(t); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidOption, err)
			}
			c.topics = append(c.topics, t)
		}
		return nil
	})
}

// WithSubscription sets the subscription name and type. Required by [NewConsumer]. With
// [WrapConsumer] it declares what the wrapped consumer's subscription is: the name then
// names it in events and logs only, and the type decides the retry strategies allowed
// (WrapConsumer cannot ask the wrapped consumer for it; undeclared means Exclusive, the safe
// assumption). Default: none; Exclusive for WrapConsumer.
func WithSubscription(name string, t apulsar.SubscriptionType) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if envelope.IsBlank(name) {
			return fmt.Errorf("%w: blank subscription name", ErrInvalidOption)
		}
		c.subscription = name
		return setSubType(c, t)
	})
}

func setSubType(c *consumerConfig, t apulsar.SubscriptionType) error {
	switch t {
	case apulsar.Exclusive, apulsar.Shared, apulsar.Failover, apulsar.KeyShared:
	default:
		return fmt.Errorf("%w: unknown subscription type %d", ErrInvalidOption, t)
	}
	c.subType = t
	c.subTypeSet = true
	return nil
}

// Handle registers h for urn (exact match). Registering a URN twice, a blank URN or a nil
// handler is refused.
func Handle(urn string, h HandlerFunc) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		switch {
		case envelope.IsBlank(urn):
			return fmt.Errorf("%w: blank urn", ErrInvalidOption)
		case h == nil:
			return fmt.Errorf("%w: nil handler for %q", ErrInvalidOption, urn)
		}
		if _, dup := c.handlers[urn]; dup {
			return fmt.Errorf("%w: a handler for %q is already registered", ErrInvalidOption, urn)
		}
		c.handlers[urn] = h
		return nil
	})
}

// WithMaxAttempts sets the number of deliveries in total, the first included: 1 means no
// retry. It wins over the policy's MaxAttempts whatever the option order. Default: 3. n < 1
// is refused.
func WithMaxAttempts(n int) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: max attempts %d is below 1", ErrInvalidOption, n)
		}
		c.maxAttempts = n
		return nil
	})
}

// WithRetry sets the retry policy: attempts (0 keeps the default 3), strategy and backoff.
// [retry.Nack] is refused on Exclusive and Failover subscriptions (and on a wrapped consumer
// whose type is not declared Shared or Key_Shared): there the broker does not raise the
// redelivery count, so the message would loop forever.
//
// The backoff delays each retry. With [retry.Republish] on Shared and Key_Shared
// subscriptions the copy is sent with DeliverAfter (the broker holds it back, the consumer
// goes on at once); on Exclusive and Failover, where the broker ignores delays, the
// consumer waits the backoff itself before republishing, which holds back that worker (and,
// with [WithConcurrency](1), the whole subscription, preserving order). With [retry.Nack]
// the backoff becomes the consumer's NackBackoffPolicy when [NewConsumer] subscribes.
// Default: [retry.DefaultPolicy] (3 attempts, republish, 1 s doubling to 1 min, 20 % jitter).
func WithRetry(p retry.Policy) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		c.policy = p
		return nil
	})
}

// WithDeadLetter configures dead-letter topics (see [dlq.Config]). Default: on, every queue
// to "<queue>.dlq" in its namespace; turn it off with dlq.Off() or per queue.
func WithDeadLetter(cfg dlq.Config) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		c.deadLetter = cfg
		return nil
	})
}

// WithConcurrency handles up to n messages at once, on n workers. Messages with the same
// ordering key (or, without one, the same key) are handled one at a time, in the order
// received; messages of other keys, and messages without a key, do not wait for them: each
// idle worker takes the oldest received message whose key is not being handled. So a slow
// handler or a blocked settlement (a dead-letter write waiting for its send timeout) holds
// back only its own key, and the worker it occupies. The consumer holds at most
// [WithMaxInflight] messages received but not yet settled (queued, being handled, or being
// settled); when that many are held, it stops receiving until one is settled. Default: 1,
// handled one at a time on the receiving goroutine (a slow message then holds back every
// key). n < 1 is refused.
func WithConcurrency(n int) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d is below 1", ErrInvalidOption, n)
		}
		c.concurrency = n
		return nil
	})
}

// inflightPerWorker times the concurrency is the default of [WithMaxInflight].
const inflightPerWorker = 4

// WithMaxInflight bounds the messages a consumer with [WithConcurrency](n > 1) holds,
// received but not yet settled: the ones queued behind a busy key or waiting for a worker,
// and the ones being handled or settled. At the bound the consumer stops receiving (the
// client's receiver queue then fills, and the broker stops dispatching) until one is
// settled. Messages held but not yet started when the consumer stops are negatively
// acknowledged, so the broker redelivers them. A larger bound lets more messages of other
// keys pass a busy key, at the cost of memory and of redeliveries after a connection loss.
// The same bound holds the deliveries [Consumer.Next] returned and that are not yet
// settled: at the bound Next waits. Default: 4 × the concurrency.
// n below the concurrency is refused.
func WithMaxInflight(n int) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: max in-flight %d is below 1", ErrInvalidOption, n)
		}
		c.maxInflight = n
		return nil
	})
}

// WithUnreachableTimeout says what [Consumer.Run] does when the broker is gone. The Pulsar
// client does not tell: its Receive blocks while it reconnects in the background. So a
// consumer made with a client that has received nothing for 5 s (or a quarter of d, if
// shorter) asks the broker about its topic, and does so again at that interval while
// nothing arrives. While those probes fail or go unanswered, the broker counts as
// unreachable: the error hook gets an *[UnreachableError] when it starts, and
// [Consumer.Health] is not ready, with the reason. With d = 0 Run goes on trying for ever
// and the health recovers when the broker answers again; with d > 0 Run stops once the
// broker has been unreachable for d and returns the *[UnreachableError] (it matches
// [ErrUnreachable]). Default: 0. d < 0 is refused.
func WithUnreachableTimeout(d time.Duration) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: unreachable timeout %s is negative", ErrInvalidOption, d)
		}
		c.unreachableTimeout = d
		return nil
	})
}

// OnError sets the error hook (see [ErrorHook]). Default: none (errors are still logged).
func OnError(h ErrorHook) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.onError = h
		return nil
	})
}

// OnUnknownURN sets the hook for messages without a handler (see [UnknownURNHook]). Default:
// none: such messages are retried and then dead-lettered with reason unknown_urn.
func OnUnknownURN(h UnknownURNHook) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.onUnknown = h
		return nil
	})
}

// OnRoutingMismatch sets the hook called when bq-job and the body's URN differ (see
// [RoutingMismatchHook]). Default: none.
func OnRoutingMismatch(h RoutingMismatchHook) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.onMismatch = h
		return nil
	})
}

// WithObserver adds an observer of pipeline events (see [Observer]); several observers all
// see every event, in the order given (a metrics observer beside your own, say). A nil
// observer is ignored. Default: none.
func WithObserver(o Observer) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		switch {
		case o == nil:
		case c.observer == nil:
			c.observer = o
		default:
			prev := c.observer
			c.observer = ObserverFunc(func(e Event) {
				prev.Observe(e)
				o.Observe(e)
			})
		}
		return nil
	})
}

// WithNackRedeliveryDelay sets the delay before the broker redelivers a negatively
// acknowledged message, for the Pulsar consumer [NewConsumer] subscribes. Default: the
// client's (1 min). d ≤ 0 is refused. Ignored by [WrapConsumer].
func WithNackRedeliveryDelay(d time.Duration) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: nack redelivery delay %s is not positive", ErrInvalidOption, d)
		}
		c.nackDelay = d
		return nil
	})
}

// WithConsumerOptions lets the caller adjust the apulsar.ConsumerOptions [NewConsumer]
// subscribes with (initial position, receiver queue size, …); topics, subscription name and
// type are set again after f runs. It is the one escape hatch to pulsar-client-go settings.
// Default: none. Ignored by [WrapConsumer].
func WithConsumerOptions(f func(o *apulsar.ConsumerOptions)) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.consumerOpts = f
		return nil
	})
}

// WithSenderOptions lets the caller adjust the apulsar.ProducerOptions of the producers the
// consumer creates for retries and dead letters (send timeout, compression, …); the topic
// is set after f runs. Default: batches of one message (each retry or dead letter is sent
// on its own, synchronously, without the batching delay) and the client's defaults
// otherwise.
func WithSenderOptions(f func(o *apulsar.ProducerOptions)) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.senderOpts = f
		return nil
	})
}

// WithSettler replaces the acknowledgements of the consumer's subscription: wrap receives
// the Pulsar consumer (subscribed by [NewConsumer], or the one given to [WrapConsumer]) and
// returns the [Settler] every settlement then goes through. It is the seam of a front with
// its own acknowledgement policy: package connector acknowledges cumulatively through it.
// A wrap returning nil is refused. Default: the Pulsar consumer's own Ack and Nack.
func WithSettler(wrap func(pc apulsar.Consumer) Settler) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		if wrap == nil {
			return fmt.Errorf("%w: nil settler", ErrInvalidOption)
		}
		c.settlerWrap = wrap
		return nil
	})
}

// WithSchemaGate says whether admission applies the schema-version gate (ADR-0037): a
// message whose bq-schema-version property is rejected is settled at once, never handled.
// Turning it off is for fronts whose payloads are not the contract's (package connector,
// under failure strategies other than babelqueue). Default: on.
func WithSchemaGate(on bool) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.noGate = !on
		return nil
	})
}

// WithPoisonSettled says whether admission settles a payload that is not an acceptable
// envelope (the raw copy to the dead-letter topic at once, ADR-0035). Off, such a payload is
// returned by [Consumer.Next] with a nil [Delivery.Envelope], for a front with a codec of
// its own (package connector); settling it with an error matching [ErrPoison] then takes
// the poison path. [Consumer.Run] always needs an envelope: Run refuses a consumer with it
// off. Default: on.
func WithPoisonSettled(on bool) ConsumerOption {
	return consumerOptionFunc(func(c *consumerConfig) error {
		c.poisonDelivered = !on
		return nil
	})
}

// NackBackoff adapts a retry.Backoff to apulsar.NackBackoffPolicy, for
// apulsar.ConsumerOptions.NackBackoffPolicy: the n-th redelivery (the 0-based redelivery
// count) waits the backoff's delay of retry n+1. A consumer whose retry strategy is
// retry.Nack uses it with its policy's backoff unless the consumer options set a policy.
func NackBackoff(b retry.Backoff) apulsar.NackBackoffPolicy { return nackBackoff{b: b} }
