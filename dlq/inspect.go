package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// DefaultPeekLimit is the number of messages [Peek] returns when no limit is given.
const DefaultPeekLimit = 100

// DefaultIdleTimeout is how long [Redrive] and [Purge] wait for a further message before
// they consider the retention subscription read to its end.
const DefaultIdleTimeout = time.Second

// ErrInvalidOptions is wrapped by the errors [Peek], [Redrive], [Purge] and
// [EnsureSubscription] return for options they cannot use.
var ErrInvalidOptions = errors.New("dlq: invalid options")

// Kind classifies a dead-letter message.
type Kind int

const (
	// KindAnnotated is an envelope with a dead_letter block (a message that failed, or had no
	// handler): the only kind [Redrive] moves back.
	KindAnnotated Kind = iota + 1
	// KindPoison is the ADR-0035 copy of a body that was not an acceptable envelope:
	// {"raw":…,"raw_base64"?:…,"dead_letter":{"reason":"poison",…}}.
	KindPoison
	// KindRaw is anything else, typically a message rejected by the bq-schema-version gate,
	// copied byte for byte with no dead_letter block.
	KindRaw
)

// String returns "annotated", "poison" or "raw".
func (k Kind) String() string {
	switch k {
	case KindAnnotated:
		return "annotated"
	case KindPoison:
		return "poison"
	case KindRaw:
		return "raw"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Message is one dead letter pending on a retention subscription.
type Message struct {
	// ID is the Pulsar message id.
	ID apulsar.MessageID
	// Topic is the topic (partition) it was read from.
	Topic string
	// PublishTime is when it was written to the dead-letter topic.
	PublishTime time.Time
	// Key is its Pulsar key. Read through the admin API ([Peek], a dry-run [Redrive]), the
	// key of a message that was not batched reaches us in an HTTP header, which keeps the
	// characters up to U+00FF but the ASCII control characters other than TAB: those, and
	// the characters beyond U+00FF, read as spaces (the C1 controls, U+0080 to U+009F, are
	// kept). A batched message's key, and every key that [Redrive] and [Purge] read, are
	// exact.
	Key string
	// OrderingKey is its Pulsar ordering key.
	OrderingKey string
	// Properties are its Pulsar properties; through the admin API, those of a message that
	// was not batched are held to the same characters as its Key (a control character in a
	// property value survives: the broker escapes it in JSON).
	Properties map[string]string
	// Payload is the message body as stored.
	Payload []byte
	// Kind classifies it.
	Kind Kind
	// Envelope is the decoded body for KindAnnotated and KindPoison, nil for KindRaw.
	Envelope *envelope.Envelope
	// Reason is dead_letter.reason ("" for KindRaw).
	Reason envelope.Reason
	// URN is the envelope's URN ("" for KindPoison and KindRaw).
	URN string
	// RoutingURN is the URN the consumer routed the message by, the one a redrive keeps and
	// filters on: a usable (present, not blank) bq-job property, else URN.
	RoutingURN string
}

func classify(m apulsar.Message) Message {
	return classified(Message{
		ID: m.ID(), Topic: m.Topic(), PublishTime: m.PublishTime(), Key: m.Key(), OrderingKey: m.OrderingKey(),
		Properties: m.Properties(), Payload: m.Payload(),
	})
}

// classified sets Kind, Envelope, Reason, URN and RoutingURN from Payload and Properties.
func classified(out Message) Message {
	out.Kind = KindRaw
	env, err := envelope.Decode(out.Payload)
	if err != nil || env.DeadLetter == nil {
		return out
	}
	out.Envelope, out.Reason = env, env.DeadLetter.Reason
	if env.DeadLetter.Reason == envelope.ReasonPoison && envelope.IsBlank(env.URN()) {
		out.Kind = KindPoison
		return out
	}
	out.Kind, out.URN, out.RoutingURN = KindAnnotated, env.URN(), env.URN()
	if pj, ok := binding.RoutedJob(out.Properties); ok {
		out.RoutingURN = pj
	}
	return out
}

// PeekOptions configures [Peek].
type PeekOptions struct {
	// Topic is the dead-letter topic. Required.
	Topic string
	// Subscription is the retention subscription whose pending messages are shown.
	// Default (""): [DefaultSubscription].
	Subscription string
	// Limit is the most messages returned. Default (0): [DefaultPeekLimit].
	Limit int
}

func (o PeekOptions) subscription() string {
	if o.Subscription == "" {
		return DefaultSubscription
	}
	return o.Subscription
}

// Peek returns the dead letters still pending on the retention subscription of a
// dead-letter topic, oldest first (partition after partition), up to the limit: those a
// redrive or a purge has acknowledged are not shown. It is strictly read-only: it reads
// through the admin API (the partition count, the subscription list, then "peek messages"
// at positions 1, 2, … of the subscription, which skips acknowledged entries and moves no
// cursor), so it creates no topic and no subscription, acknowledges nothing and changes no
// redelivery count.
//
// It returns a *[SubscriptionError] wrapping [ErrSubscriptionNotFound] when the topic or
// the subscription does not exist, and an error wrapping [ErrInvalidOptions] for bad options.
// A batch entry is shown whole, even when some of its messages were acknowledged one by one.
func Peek(ctx context.Context, admin *Admin, opts PeekOptions) ([]Message, error) {
	if admin == nil {
		return nil, fmt.Errorf("%w: nil admin", ErrInvalidOptions)
	}
	if err := ValidateTopic(opts.Topic); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	sub := opts.subscription()
	if err := ValidateSubscriptionName(sub); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultPeekLimit
	}
	var out []Message
	err := admin.pending(ctx, opts.Topic, sub, func(m Message) bool {
		out = append(out, m)
		return len(out) < limit
	})
	return out, err
}

// pending calls visit with each message pending on sub of topic (every partition), until
// visit returns false or none is left.
func (a *Admin) pending(ctx context.Context, topic, sub string, visit func(Message) bool) error {
	targets, err := a.partitions(ctx, topic)
	if err != nil {
		return fmt.Errorf("dlq: peek %q: %w", topic, err)
	}
	for _, t := range targets {
		subs, found, err := a.Subscriptions(ctx, t)
		if err != nil {
			return fmt.Errorf("dlq: peek %q: %w", t, err)
		}
		if !found || !slices.Contains(subs, sub) {
			return notRetained(t, sub, found)
		}
	}
	for _, t := range targets {
		for n := 1; ; n++ {
			msgs, ok, err := a.peekNth(ctx, t, sub, n)
			if err != nil {
				return fmt.Errorf("dlq: peek %q: %w", t, err)
			}
			if !ok {
				break
			}
			for _, m := range msgs {
				if !visit(m) {
					return nil
				}
			}
		}
	}
	return nil
}

// partitions returns the partitions of topic, or topic itself when it is not partitioned.
func (a *Admin) partitions(ctx context.Context, topic string) ([]string, error) {
	parts, err := a.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	if parts == 0 {
		return []string{topic}, nil
	}
	targets := make([]string, parts)
	for i := range parts {
		targets[i] = topic + "-partition-" + strconv.Itoa(i)
	}
	return targets, nil
}

func notRetained(topic, sub string, topicFound bool) error {
	reason := "the topic does not exist"
	if topicFound {
		reason = "the topic has no such subscription"
	}
	return &SubscriptionError{
		Topic: topic, Subscription: sub, Reason: reason, Err: ErrSubscriptionNotFound,
		Fix: "nothing is retained there: a consumer ensures the retention subscription before its first " +
			"dead letter; to keep dead letters written by older consumers, run `bq subscription create --topic " +
			topic + " --name " + sub + "` (what was trimmed before is gone); for another subscription give its name",
	}
}
