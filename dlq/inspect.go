package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// DefaultPeekLimit is the number of messages [Peek] returns when no limit is given.
const DefaultPeekLimit = 100

// DefaultIdleTimeout is how long [Peek] and [Redrive] wait for a further message before
// they consider the dead-letter topic read to its end.
const DefaultIdleTimeout = time.Second

// ErrInvalidOptions is wrapped by the errors [Peek] and [Redrive] return for options they
// cannot use.
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

// Message is one message of a dead-letter topic.
type Message struct {
	// ID is the Pulsar message id.
	ID apulsar.MessageID
	// Topic is the topic (partition) it was read from.
	Topic string
	// PublishTime is when it was written to the dead-letter topic.
	PublishTime time.Time
	// Key is its Pulsar key.
	Key string
	// OrderingKey is its Pulsar ordering key.
	OrderingKey string
	// Properties are its Pulsar properties.
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
}

func classify(m apulsar.Message) Message {
	out := Message{
		ID: m.ID(), Topic: m.Topic(), PublishTime: m.PublishTime(), Key: m.Key(), OrderingKey: m.OrderingKey(),
		Properties: m.Properties(), Payload: m.Payload(), Kind: KindRaw,
	}
	env, err := envelope.Decode(out.Payload)
	if err != nil || env.DeadLetter == nil {
		return out
	}
	out.Envelope, out.Reason = env, env.DeadLetter.Reason
	if env.DeadLetter.Reason == envelope.ReasonPoison && envelope.IsBlank(env.URN()) {
		out.Kind = KindPoison
		return out
	}
	out.Kind, out.URN = KindAnnotated, env.URN()
	return out
}

// PeekOptions configures [Peek].
type PeekOptions struct {
	// Topic is the dead-letter topic. Required.
	Topic string
	// Limit is the most messages returned. Default (0): [DefaultPeekLimit].
	Limit int
	// IdleTimeout ends the read when no further message arrives for that long. Default (0):
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
}

// Peek returns the first messages of a dead-letter topic, oldest first, without consuming
// them: it reads with a non-durable reader, so no subscription is created or moved. It stops
// at the limit, when the topic has no further message ([DefaultIdleTimeout] without one), or
// when ctx ends (then it returns what it read and ctx's error).
func Peek(ctx context.Context, client apulsar.Client, opts PeekOptions) ([]Message, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := ValidateTopic(opts.Topic); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultPeekLimit
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	r, err := client.CreateReader(apulsar.ReaderOptions{Topic: opts.Topic, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		return nil, fmt.Errorf("dlq: peek %q: create reader: %w", opts.Topic, err)
	}
	defer r.Close()
	var out []Message
	for len(out) < limit {
		m, err := nextWithin(ctx, idle, r.Next)
		if errors.Is(err, errIdle) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("dlq: peek %q: %w", opts.Topic, err)
		}
		out = append(out, classify(m))
	}
	return out, nil
}

// errIdle says that no message arrived within the idle timeout: the end of the topic.
var errIdle = errors.New("dlq: idle")

// nextWithin calls next with a ctx that also ends after idle; it returns errIdle when only
// the idle timeout ended it.
func nextWithin(ctx context.Context, idle time.Duration, next func(context.Context) (apulsar.Message, error)) (apulsar.Message, error) {
	ictx, cancel := context.WithTimeout(ctx, idle)
	defer cancel()
	m, err := next(ictx)
	switch {
	case err == nil:
		return m, nil
	case ctx.Err() != nil:
		return nil, ctx.Err() //nolint:wrapcheck // the caller wraps it with the topic
	case ictx.Err() != nil:
		return nil, errIdle
	default:
		return nil, err
	}
}
