package pulsar

import (
	"cmp"
	"context"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// HandlerFunc handles one message. env is the decoded envelope with attempts set to the
// reconciled count (the number of earlier deliveries), msg the Pulsar message. Return nil to
// acknowledge; an error (or a panic, which is recovered) counts as a failed delivery. ctx
// ends when the consumer's drain deadline passes. env is shared with the settlement that
// follows: do not modify it.
type HandlerFunc func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error

// ConsumerOption configures [NewConsumer] and [WrapConsumer].
type ConsumerOption interface {
	applyConsumer(c *consumerConfig) error
}

type consumerOptionFunc func(c *consumerConfig) error

func (f consumerOptionFunc) applyConsumer(c *consumerConfig) error { return f(c) }

// consumerSet returns the option that refuses with err when it is not nil and applies set
// otherwise (see setter).
func consumerSet(err error, set func(c *consumerConfig)) ConsumerOption {
	return consumerOptionFunc(setter(err, set))
}

// setter is the apply function of an option whose check is made when the option is built
// and whose effect is set: it refuses with err when err is not nil, and applies set
// otherwise.
func setter[C any](err error, set func(c *C)) func(c *C) error {
	return func(c *C) error {
		if err == nil {
			set(c)
		}
		return err
	}
}

type consumerConfig struct {
	commonConfig
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
	unknown            HandlerFunc   // HandleUnknown's; nil: retry, then dead-letter
	nackDelay          time.Duration
	consumerOpts       func(*apulsar.ConsumerOptions)
	senderOpts         func(*apulsar.ProducerOptions)
	senderFactory      func(topic string) (seam.Sender, func(), error) // tests and WrapConsumer without client
	initialPosition    apulsar.SubscriptionInitialPosition
	noRetention        bool
	maxMessageSize     int
	retention          func(ctx context.Context, topic, deadLetterTopic string) error
	settlerWrap        func(apulsar.Consumer) seam.Settler
	noGate             bool
	poisonDelivered    bool
	txnTimeout         time.Duration // WithTransactions; 0 = off
	txns               *transactions // opened by NewConsumer or WrapConsumer when txnTimeout > 0
}

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		commonConfig: defaultCommonConfig(),
		subType:      apulsar.Exclusive,
		handlers:     map[string]HandlerFunc{},
		policy:       retry.DefaultPolicy(),
		concurrency:  1,
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
	return consumerSet(refuse(p != apulsar.SubscriptionPositionEarliest && p != apulsar.SubscriptionPositionLatest,
		"unknown initial position %d", p), func(c *consumerConfig) { c.initialPosition = p })
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
	return consumerSet(nil, func(c *consumerConfig) { c.noRetention = !on })
}

// WithMaxMessageSize bounds what the consumer writes to settle a message, in bytes (payload
// and properties). A dead-letter copy larger than n (a poison body re-escaped, a huge error
// text) is replaced by a truncated, marked copy that fits: the dead-letter block, the
// original's size and SHA-256 and its first 64 KiB (see envelope.TruncatedCopy); the
// decision is logged at ERROR and reported as an [EventTruncated] carrying an error
// matching [ErrTruncated], and the original is acknowledged once the copy is written.
// A retry copy larger than n goes to the dead-letter path. A copy the broker refuses as too
// big anyway is truncated further and written once more. Match it to the broker's
// maxMessageSize. Default: 5 MiB less 64 KiB (Pulsar's default limit, with room for the
// metadata). n < 64 KiB is refused.
func WithMaxMessageSize(n int) ConsumerOption {
	return consumerSet(refuse(n < 64<<10, "max message size %d is below 64 KiB", n), func(c *consumerConfig) { c.maxMessageSize = n })
}

// WithTopic adds a topic to consume (a partitioned topic means all its partitions);
// several WithTopic add several topics. At least one topic is needed by [NewConsumer];
// ignored by [WrapConsumer]. An invalid topic name is refused.
func WithTopic(topic string) ConsumerOption {
	return consumerSet(invalid(dlq.ValidateTopic(topic)), func(c *consumerConfig) { c.topics = append(c.topics, topic) })
}

// WithSubscription sets the subscription name and type. Required by [NewConsumer]. With
// [WrapConsumer] it declares what the wrapped consumer's subscription is: the name then
// names it in events and logs only, and the type decides the retry strategies allowed
// (WrapConsumer cannot ask the wrapped consumer for it; undeclared means Exclusive, the safe
// assumption). Default: none; Exclusive for WrapConsumer.
func WithSubscription(name string, t apulsar.SubscriptionType) ConsumerOption {
	return consumerSet(cmp.Or(refuse(envelope.IsBlank(name), "blank subscription name"), checkSubType(t)), func(c *consumerConfig) {
		c.subscription, c.subType, c.subTypeSet = name, t, true
	})
}

// checkSubType refuses a subscription type the binding does not know.
func checkSubType(t apulsar.SubscriptionType) error {
	switch t {
	case apulsar.Exclusive, apulsar.Shared, apulsar.Failover, apulsar.KeyShared:
		return nil
	default:
		return refuse(true, "unknown subscription type %d", t)
	}
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
	return consumerSet(refuse(n < 1, "max attempts %d is below 1", n), func(c *consumerConfig) { c.maxAttempts = n })
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
	return consumerSet(invalid(p.Validate()), func(c *consumerConfig) { c.policy = p })
}

// WithDeadLetter configures dead-letter topics (see [dlq.Config]). Default: on, every queue
// to "<queue>.dlq" in its namespace; turn it off with dlq.Off() or per queue.
func WithDeadLetter(cfg dlq.Config) ConsumerOption {
	return consumerSet(invalid(cfg.Validate()), func(c *consumerConfig) { c.deadLetter = cfg })
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
	return consumerSet(refuse(n < 1, "concurrency %d is below 1", n), func(c *consumerConfig) { c.concurrency = n })
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
	return consumerSet(refuse(n < 1, "max in-flight %d is below 1", n), func(c *consumerConfig) { c.maxInflight = n })
}

// WithUnreachableTimeout says what [Consumer.Run] does when the broker is gone. The Pulsar
// client does not tell: its Receive blocks while it reconnects in the background. So a
// consumer made with a client that has received nothing for 5 s (or a quarter of d, if
// shorter) asks the broker about its topic, and does so again at that interval while
// nothing arrives. While those probes fail or go unanswered, the broker counts as
// unreachable: an [EventError] carries an *[UnreachableError] when it starts, and
// [Consumer.Health] is not ready, with the reason. With d = 0 Run goes on trying for ever
// and the health recovers when the broker answers again; with d > 0 Run stops once the
// broker has been unreachable for d and returns the *[UnreachableError] (it matches
// [ErrUnreachable]). Default: 0. d < 0 is refused. [Consumer.Next] probes the same way and
// reports the same, but never stops. After each probe the broker answered, the consumer
// also asks whether the broker still holds it (see [ErrStranded]).
func WithUnreachableTimeout(d time.Duration) ConsumerOption {
	return consumerSet(refuse(d < 0, "unreachable timeout %s is negative", d), func(c *consumerConfig) { c.unreachableTimeout = d })
}

// HandleUnknown registers h for the messages whose routing URN has no handler. Its nil
// settles the message as acknowledged; its error or panic settles it as a message without a
// handler (retried, then dead-lettered with reason unknown_urn), and is reported as an
// [EventFailed]. Either way the [EventUnknownURN] comes first. Without it, such messages are
// retried and then dead-lettered with reason unknown_urn. h is not wrapped by the Handler
// hooks. A nil h is refused. Default: none.
func HandleUnknown(h HandlerFunc) ConsumerOption {
	return consumerSet(refuse(h == nil, "nil unknown-URN handler"), func(c *consumerConfig) { c.unknown = h })
}

// WithNackRedeliveryDelay sets the delay before the broker redelivers a negatively
// acknowledged message, for the Pulsar consumer [NewConsumer] subscribes. Default: the
// client's (1 min). d ≤ 0 is refused. Ignored by [WrapConsumer].
func WithNackRedeliveryDelay(d time.Duration) ConsumerOption {
	return consumerSet(refuse(d <= 0, "nack redelivery delay %s is not positive", d), func(c *consumerConfig) { c.nackDelay = d })
}

// WithConsumerOptions lets the caller adjust the apulsar.ConsumerOptions [NewConsumer]
// subscribes with (initial position, receiver queue size, …); topics, subscription name and
// type are set again after f runs. It is the one escape hatch to pulsar-client-go settings.
// Default: none. Ignored by [WrapConsumer].
func WithConsumerOptions(f func(o *apulsar.ConsumerOptions)) ConsumerOption {
	return consumerSet(nil, func(c *consumerConfig) { c.consumerOpts = f })
}

// WithSenderOptions lets the caller adjust the apulsar.ProducerOptions of the producers the
// consumer creates for retries and dead letters (send timeout, compression, …); the topic
// is set after f runs. Default: batches of one message (each retry or dead letter is sent
// on its own, synchronously, without the batching delay) and the client's defaults
// otherwise.
func WithSenderOptions(f func(o *apulsar.ProducerOptions)) ConsumerOption {
	return consumerSet(nil, func(c *consumerConfig) { c.senderOpts = f })
}

// frontOption applies what a front other than Run and Next changes (seam.FrontOption).
func frontOption(f seam.Front) ConsumerOption {
	return consumerSet(nil, func(c *consumerConfig) {
		c.settlerWrap, c.noGate, c.poisonDelivered = f.Settler, f.NoGate, f.PoisonDelivered
	})
}
