package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// DefaultSubscription is the retention subscription of a dead-letter topic: the durable
// subscription that keeps its messages stored on a real cluster until they are redriven or
// purged, and the one [Peek] and [Redrive] read.
const DefaultSubscription = "bq-dlq"

// maxSubscriptionName bounds a subscription name, in bytes.
const maxSubscriptionName = 256

// ErrSubscription is matched (errors.Is) by every *[SubscriptionError].
var ErrSubscription = errors.New("dlq: subscription")

// ErrInvalidSubscriptionName is wrapped by the *[SubscriptionError] returned for a
// subscription name that cannot be used ([ValidateSubscriptionName]).
var ErrInvalidSubscriptionName = errors.New("dlq: invalid subscription name")

// ErrSubscriptionNotFound is wrapped by the *[SubscriptionError] [Peek] and a dry-run
// [Redrive] return when the topic or its retention subscription does not exist: they never
// create either.
var ErrSubscriptionNotFound = errors.New("dlq: subscription not found")

// SubscriptionError says which subscription of which topic could not be used, why, and how
// to fix it. It matches [ErrSubscription] with errors.Is and unwraps to the cause (the
// client's or the admin API's error, [ErrInvalidSubscriptionName] or
// [ErrSubscriptionNotFound]).
type SubscriptionError struct {
	// Topic is the topic (or partition), as given; "" when only the name was checked.
	Topic string
	// Subscription is the subscription name, as given.
	Subscription string
	// Reason says what went wrong.
	Reason string
	// Fix says what an operator can do about it ("" when nothing specific).
	Fix string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *SubscriptionError) Error() string {
	var b strings.Builder
	b.WriteString("dlq: subscription ")
	fmt.Fprintf(&b, "%q", e.Subscription)
	if e.Topic != "" {
		fmt.Fprintf(&b, " on %q", e.Topic)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *SubscriptionError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrSubscription].
func (*SubscriptionError) Is(target error) bool { return target == ErrSubscription }

// ValidateSubscriptionName returns a *[SubscriptionError] wrapping
// [ErrInvalidSubscriptionName] when name cannot be a subscription name: empty, longer than
// 256 bytes, not UTF-8, or containing white space or control characters (which Pulsar's
// admin tools and URLs do not carry faithfully).
func ValidateSubscriptionName(name string) error {
	bad := func(reason string) error {
		return &SubscriptionError{Subscription: name, Reason: reason, Err: ErrInvalidSubscriptionName}
	}
	switch {
	case name == "":
		return bad("the name is empty")
	case len(name) > maxSubscriptionName:
		return bad(fmt.Sprintf("the name is longer than %d bytes", maxSubscriptionName))
	case !utf8.ValidString(name):
		return bad("the name is not UTF-8")
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return bad("the name has white space or a control character")
		}
	}
	return nil
}

// EnsureOption configures [EnsureSubscription].
type EnsureOption func(*ensureConfig)

type ensureConfig struct {
	subType apulsar.SubscriptionType
}

// WithSubscriptionType is the type [EnsureSubscription] attaches with. Give the type the
// subscription's consumers use: attaching to an idle subscription with another type makes
// the broker replace its dispatcher, and with it the redelivery counts a Shared or
// Key_Shared dispatcher keeps. Default: apulsar.Shared (an extra Shared consumer joins a
// busy Shared subscription without displacing anyone).
func WithSubscriptionType(t apulsar.SubscriptionType) EnsureOption {
	return func(c *ensureConfig) { c.subType = t }
}

// EnsureSubscription makes sure the durable subscription exists on topic (on every
// partition of a partitioned topic), so that the broker keeps every message written to
// topic from then on until that subscription acknowledges it. Call it before the first
// write to a dead-letter topic (with the queue's retention subscription, [DefaultSubscription]
// unless configured) and before a publisher's first write to a queue whose consumers have
// not subscribed yet: on a real cluster without a retention policy, messages written to a
// topic with no subscription are deleted when the broker trims its ledgers.
//
// It attaches a consumer with no receiver queue (it asks the broker for no message) at the
// earliest position, then closes it: nothing is delivered, acknowledged or redelivered, and
// an existing subscription keeps its position. A subscription already held by a consumer of
// another type (ConsumerBusy) exists, which is all it checks. It creates the topic when it
// does not exist and the broker allows that.
//
// Each attach is bounded by the client's operation timeout; ctx is checked before each.
//
// It returns a *[SubscriptionError] naming the topic, the subscription and the fix when the
// broker refuses (auto subscription or topic creation off, no permission), and a
// *[TopicError] or ErrInvalidOptions for bad arguments.
func EnsureSubscription(ctx context.Context, client apulsar.Client, topic, subscription string, opts ...EnsureOption) error {
	if client == nil {
		return fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if err := ValidateSubscriptionName(subscription); err != nil {
		return err
	}
	cfg := ensureConfig{subType: apulsar.Shared}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch cfg.subType {
	case apulsar.Exclusive, apulsar.Shared, apulsar.Failover, apulsar.KeyShared:
	default:
		return fmt.Errorf("%w: subscription type %d", ErrInvalidOptions, cfg.subType)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dlq: ensure subscription %q on %q: %w", subscription, topic, err)
	}
	partitions, err := client.TopicPartitions(topic)
	if err != nil {
		return subscriptionFailure(topic, subscription, err)
	}
	for _, p := range partitions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("dlq: ensure subscription %q on %q: %w", subscription, p, err)
		}
		c, err := client.Subscribe(apulsar.ConsumerOptions{
			Topic: p, SubscriptionName: subscription, Type: cfg.subType,
			SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
			EnableZeroQueueConsumer:     true,
		})
		if err != nil {
			if strings.Contains(err.Error(), "ConsumerBusy") {
				continue // held by a consumer of another type: it exists
			}
			return subscriptionFailure(p, subscription, err)
		}
		c.Close()
	}
	return nil
}

// subscriptionFailure turns a client error into a *SubscriptionError with the fix its
// server error calls for.
func subscriptionFailure(topic, sub string, err error) error {
	se := &SubscriptionError{Topic: topic, Subscription: sub, Reason: "cannot make sure it exists", Err: err}
	create := fmt.Sprintf("create it with `bq subscription create --topic %s --name %s` "+
		"(or `pulsar-admin topics create-subscription -s %s -m earliest %s`)", topic, sub, sub, topic)
	msg := err.Error()
	switch {
	case strings.Contains(msg, "SubscriptionNotFound"):
		se.Reason = "the broker does not create subscriptions on demand (allowAutoSubscriptionCreation=false)"
		se.Fix = "create it with `pulsar-admin topics create-subscription -s " + sub + " -m earliest " + topic +
			"`, or allow auto subscription creation for the namespace"
	case strings.Contains(msg, "TopicNotFound"):
		se.Reason = "the topic does not exist and the broker does not create topics on demand"
		se.Fix = "create the topic (`pulsar-admin topics create " + topic + "`), then " + create
	case strings.Contains(msg, "AuthorizationError"), strings.Contains(msg, "AuthenticationError"):
		se.Reason = "the client may not subscribe"
		se.Fix = "grant the client's role the consume permission on the topic's namespace, or " + create + " as an admin"
	default:
		se.Fix = create
	}
	return se
}
