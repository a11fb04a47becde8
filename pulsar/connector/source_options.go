package connector

import (
	"context"
	"errors"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Default values of [SourceOptions].
const (
	DefaultMaxInflight = 256
)

// FailureStrategy is what a Source does with a nacked message.
type FailureStrategy string

// The failure strategies a Source implements.
const (
	// FailureBabelQueue retries (republish or nack, [SourceOptions].RetryStrategy) until
	// MaxAttempts deliveries, then dead-letters; DropMessage acks, ToDeadLetter
	// dead-letters at once. It is the Consumer's own settlement, through the message's
	// bqpulsar.Delivery.
	FailureBabelQueue FailureStrategy = "babelqueue"
	// FailureNack negatively acknowledges: the broker redelivers after the nack delay.
	FailureNack FailureStrategy = "nack"
	// FailureFail records a fatal failure, signals OnError downstream and stops
	// receiving; the message stays unacknowledged.
	FailureFail FailureStrategy = "fail"
	// FailureIgnore logs a warning and acknowledges.
	FailureIgnore FailureStrategy = "ignore"
	// FailureContinue only logs: the message stays unacknowledged and its slot is freed;
	// the ack timeout (required) negatively acknowledges it later, so that the broker
	// redelivers it.
	FailureContinue FailureStrategy = "continue"
	// FailureReconsumeLater calls the client's ReconsumeLaterWithCustomProperties (the
	// subscription is created with RetryEnable): the message goes to the client's retry
	// topic, and to its dead-letter topic after DLQ.MaxDeliveries.
	FailureReconsumeLater FailureStrategy = "reconsume-later"
)

// ErrSourceFailed is the error a Source signals downstream after a nack under the
// fail strategy; it wraps the nack's reason.
var ErrSourceFailed = errors.New("pulsar: source failed")

// IncomingMetadata describes a message received by a [Source]; stages read it with
// messaging.MetadataOf[IncomingMetadata].
type IncomingMetadata struct {
	MessageID       apulsar.MessageID
	Topic           string
	Key             string
	OrderingKey     string
	Properties      map[string]string // the message's properties; do not modify
	PublishTime     time.Time
	EventTime       time.Time
	RedeliveryCount uint32
	ProducerName    string
	// Attempts is the reconciled number of earlier deliveries (the larger of a valid
	// bq-attempts, the envelope's attempts and the redelivery count).
	Attempts int
	// URN is the routing URN of a BabelQueue envelope (a usable bq-job property wins over
	// the body's job); "" for other payloads. A BabelQueue addition.
	URN string
}

// InitialPosition is where a Source starts a subscription that does not exist yet; an
// existing subscription keeps its cursor, as Pulsar does.
type InitialPosition int

// The initial positions of a new subscription.
const (
	// PositionEarliest starts at the oldest message the topic holds, so that a job
	// published before the first subscriber is not skipped. The default.
	PositionEarliest InitialPosition = iota
	// PositionLatest starts after the last message published.
	PositionLatest
)

// SourceOptions configure [NewSource].
type SourceOptions struct {
	// Channel names the source in health reports and logs. Default: the first topic.
	Channel string
	// Consumer are the client options of the subscription: Topic or Topics,
	// SubscriptionName and Type are required (Type is taken as declared, so the zero
	// value is Exclusive). ReceiverQueueSize 0 means min(1000, 2 × MaxInflight).
	Consumer apulsar.ConsumerOptions
	// InitialPosition is where a new subscription starts; it replaces
	// Consumer.SubscriptionInitialPosition. Default: [PositionEarliest].
	InitialPosition InitialPosition
	// MaxInflight bounds the delivered-but-unsettled messages.
	// Default: 256.
	MaxInflight int
	// CompleteAtEnd completes the stream after the last message present when the source
	// was created (GetLastMessageIDs). Default: false.
	CompleteAtEnd bool
	// FailureStrategy is what a nack does. Default: [FailureBabelQueue].
	FailureStrategy FailureStrategy
	// MaxAttempts is the number of deliveries in total, the first included. Default: 3.
	MaxAttempts int
	// RetryStrategy is how [FailureBabelQueue] retries. Default: retry.Republish;
	// retry.Nack needs a Shared or Key_Shared subscription.
	RetryStrategy retry.Strategy
	// RetryDelay delays a republished retry (a nack's own Delay wins). Default: 0.
	RetryDelay time.Duration
	// DeadLetter configures dead-lettering. Default: the zero value, "<queue>.dlq".
	DeadLetter dlq.Config
	// SenderOptions adjusts the options of the retry and dead-letter producers.
	SenderOptions func(*apulsar.ProducerOptions)
	// CumulativeAck acknowledges cumulatively (ack-strategy=cumulative): AckCumulative on the last message of the settled prefix of each topic
	// (partition), in delivery order, so that no acknowledgement covers a message that
	// may still be nacked. It needs an Exclusive or Failover subscription and cannot be
	// combined with [FailureReconsumeLater] (the client acknowledges the original itself,
	// after writing the retry copy). Default: false, every settlement acknowledges
	// individually.
	CumulativeAck bool
	// AckTimeout nacks a delivered message left unsettled for longer, with an error
	// wrapping messaging.ErrSettleTimeout, through the failure strategy; a later
	// settlement by the stage is then ignored (it gets messaging.ErrAlreadySettled).
	// Default: 0, off.
	AckTimeout time.Duration
	// ReconsumeDelay is the delay of [FailureReconsumeLater] when the nack names none.
	// Default: 3 s.
	ReconsumeDelay time.Duration
	// NoRetentionSubscription turns off the retention subscription of the dead-letter
	// topics: by default the source makes sure, before its first write to a dead-letter
	// topic, that the queue's retention subscription (DeadLetter's Subscription, "bq-dlq"
	// by default) exists on it, because Pulsar deletes messages no durable subscription
	// needs unless the namespace has a retention policy. Set it only where such a policy
	// keeps the dead letters. Default: false.
	NoRetentionSubscription bool
	// MaxMessageSize bounds the settlement writes, as bqpulsar.WithMaxMessageSize does for
	// a Consumer: a larger dead-letter copy is truncated, a larger retry copy dead-lettered.
	// Default: 0, 5 MiB less 64 KiB.
	MaxMessageSize int
	// DeadLetterHook is called after a message was written to its dead-letter topic.
	DeadLetterHook func(ctx context.Context, md IncomingMetadata, reason error)
	// Envelopes says the payloads are BabelQueue envelopes (the babelqueue codec): under
	// [FailureBabelQueue] a poison body is then dead-lettered at once, before delivery, as
	// the Consumer does. With another codec, a body that is not an envelope is delivered.
	// Default: false.
	Envelopes bool
	// Hooks are given to the source's Consumer, in order, as bqpulsar.WithHooks options:
	// its Delivery hooks open a context per delivery and receive its settlement, its Event
	// hooks every event (failures included: gate rejections, poison, failed settlement
	// writes and acks, receive failures, routing mismatches). Handler and Publish hooks do
	// not apply. Default: none.
	Hooks []bqpulsar.Hooks
	// Logger receives the source's logs. Default: zap.NewNop().
	Logger *zap.Logger
	// Transactions settles every message in a Pulsar transaction of this timeout
	// (bqpulsar.WithTransactions): the acknowledgement, or the retry republish or
	// dead-letter copy with the acknowledgement, is committed at once. A [Sink] that sends a
	// message carrying the incoming message's metadata (a stage's messaging.WithPayload, say)
	// sends it inside that transaction, so the outgoing write and the incoming
	// acknowledgement are committed together. The client must be created with
	// ClientOptions.EnableTransaction and the broker must run its transaction coordinator;
	// NewSource fails with an error matching bqpulsar.ErrTransactions otherwise. It cannot be
	// combined with CumulativeAck, [FailureContinue] or [FailureReconsumeLater], whose
	// acknowledgements the transaction cannot hold. Default: 0, off.
	Transactions time.Duration
}

// validateSource validates o and fills its defaults.
func validateSource(o *SourceOptions) error {
	co := o.Consumer
	topics := co.Topics
	if co.Topic != "" {
		topics = append([]string{co.Topic}, topics...)
	}
	switch {
	case len(topics) == 0:
		return fmt.Errorf("%w: source without a topic", bqpulsar.ErrInvalidOption)
	case co.SubscriptionName == "":
		return fmt.Errorf("%w: source without a subscription name", bqpulsar.ErrInvalidOption)
	case co.TopicsPattern != "":
		return fmt.Errorf("%w: a source takes topics, not a pattern", bqpulsar.ErrInvalidOption)
	}
	if o.Channel == "" {
		o.Channel = topics[0]
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.MaxInflight < 0 {
		return fmt.Errorf("%w: max in-flight %d is negative", bqpulsar.ErrInvalidOption, o.MaxInflight)
	}
	if o.FailureStrategy == "" {
		o.FailureStrategy = FailureBabelQueue
	}
	switch o.FailureStrategy {
	case FailureBabelQueue, FailureNack, FailureFail, FailureIgnore, FailureContinue:
	case FailureReconsumeLater:
		if o.Consumer.EnableZeroQueueConsumer {
			return fmt.Errorf("%w: reconsume-later cannot be combined with a zero-queue consumer", bqpulsar.ErrInvalidOption)
		}
		o.Consumer.RetryEnable = true
	default:
		return fmt.Errorf("%w: failure strategy %q", bqpulsar.ErrInvalidOption, o.FailureStrategy)
	}
	if o.CumulativeAck {
		switch {
		case co.Type == apulsar.Shared:
			return fmt.Errorf("%w: cumulative acknowledgement on a Shared subscription", bqpulsar.ErrInvalidOption)
		case co.Type == apulsar.KeyShared:
			return fmt.Errorf("%w: cumulative acknowledgement on a Key_Shared subscription", bqpulsar.ErrInvalidOption)
		case o.FailureStrategy == FailureReconsumeLater:
			return fmt.Errorf("%w: cumulative acknowledgement cannot be combined with reconsume-later", bqpulsar.ErrInvalidOption)
		}
	}
	if err := validateTransactions(o); err != nil {
		return err
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = retry.DefaultMaxAttempts
	}
	if o.FailureStrategy == FailureContinue && o.AckTimeout <= 0 {
		return fmt.Errorf("%w: failure strategy continue needs an ack timeout", bqpulsar.ErrInvalidOption)
	}
	if o.ReconsumeDelay == 0 {
		o.ReconsumeDelay = 3 * time.Second
	}
	if o.MaxAttempts < 0 || o.RetryDelay < 0 || o.AckTimeout < 0 || o.ReconsumeDelay < 0 {
		return fmt.Errorf("%w: max attempts %d, retry delay %s", bqpulsar.ErrInvalidOption, o.MaxAttempts, o.RetryDelay)
	}
	if err := o.DeadLetter.Validate(); err != nil {
		return fmt.Errorf("%w: %w", bqpulsar.ErrInvalidOption, err)
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	// The retry strategy is checked against the subscription type by the Consumer.
	return nil
}

// validateTransactions refuses what a transaction cannot settle: a cumulative
// acknowledgement (the engine acknowledges each message in its own transaction), the ack
// timeout's redelivery of continue, and the client's own retry topic of reconsume-later.
func validateTransactions(o *SourceOptions) error {
	switch {
	case o.Transactions < 0:
		return fmt.Errorf("%w: transaction timeout %s is negative", bqpulsar.ErrInvalidOption, o.Transactions)
	case o.Transactions == 0:
		return nil
	case o.CumulativeAck:
		return fmt.Errorf("%w: transactions cannot be combined with cumulative acknowledgement", bqpulsar.ErrInvalidOption)
	case o.FailureStrategy == FailureContinue, o.FailureStrategy == FailureReconsumeLater:
		return fmt.Errorf("%w: transactions cannot be combined with failure strategy %s", bqpulsar.ErrInvalidOption, o.FailureStrategy)
	}
	return nil
}
