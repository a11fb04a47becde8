package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// DefaultRedriveSubscription is the subscription [Redrive] reads the dead-letter topic with.
const DefaultRedriveSubscription = "bq-redrive"

// The message properties Redrive rewrites (the BabelQueue Pulsar binding's names).
const (
	propJob           = "bq-job"
	propTraceID       = "bq-trace-id"
	propMessageID     = "bq-message-id"
	propSchemaVersion = "bq-schema-version"
	propSourceLang    = "bq-source-lang"
	propAttempts      = "bq-attempts"
	propDelay         = "bq-delay"
)

// RedriveOptions configures [Redrive].
type RedriveOptions struct {
	// Topic is the dead-letter topic to move messages from. Required.
	Topic string
	// Target is the topic the messages go back to. Default (""): Topic without its ".dlq"
	// suffix (an error when it has none).
	Target string
	// Subscription is the durable subscription used to read Topic. Default (""):
	// [DefaultRedriveSubscription]. Messages it skips stay unacknowledged in it, so a later
	// run sees them again.
	Subscription string
	// URN, when not empty, moves only messages whose envelope URN is exactly this.
	URN string
	// Reason, when not empty, moves only messages whose dead_letter.reason is this.
	Reason envelope.Reason
	// Limit is the most messages moved (or, with DryRun, reported as movable). Default (0):
	// no limit.
	Limit int
	// DryRun reports what would move without publishing or acknowledging anything.
	DryRun bool
	// IdleTimeout ends the run when no further message arrives for that long. Default (0):
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
}

// RedriveReport says what [Redrive] did.
type RedriveReport struct {
	// Moved are the messages published back to the target and acknowledged in the
	// dead-letter topic (with DryRun: the messages that would move).
	Moved []Message
	// Skipped counts annotated messages left in place because they did not match the filters.
	Skipped int
	// Poison are poison copies ({"raw":…}): reported, never republished, left in place.
	Poison []Message
	// Raw are messages without a dead_letter block (typically gate rejections): reported,
	// never republished, left in place.
	Raw []Message
}

// Redrive moves dead-lettered messages back to their queue. For each annotated message
// that matches the filters it publishes the envelope with the dead_letter block removed and
// attempts reset to 0 (everything else byte for byte: data, unknown keys, meta), with its
// properties kept except the bq-* ones, which are projected again (bq-attempts "0", no
// bq-delay), and its key; and it acknowledges the dead-letter copy only after that publish
// succeeded. Poison copies and raw copies are reported and left in place; so are messages
// that do not match. It stops at the limit, at the end of the topic (no message for the
// idle timeout) or when ctx ends, and returns the report so far with any error: a failed
// publish stops the run and leaves that message unacknowledged.
func Redrive(ctx context.Context, client apulsar.Client, opts RedriveOptions) (RedriveReport, error) {
	var rep RedriveReport
	if client == nil {
		return rep, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := ValidateTopic(opts.Topic); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	target := opts.Target
	if target == "" {
		if !strings.HasSuffix(opts.Topic, Suffix) || len(opts.Topic) == len(Suffix) {
			return rep, fmt.Errorf("%w: topic %q has no %q suffix; give a target", ErrInvalidOptions, opts.Topic, Suffix)
		}
		target = strings.TrimSuffix(opts.Topic, Suffix)
	}
	if err := ValidateTopic(target); err != nil {
		return rep, fmt.Errorf("%w: target: %w", ErrInvalidOptions, err)
	}
	sub := opts.Subscription
	if sub == "" {
		sub = DefaultRedriveSubscription
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}

	c, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: opts.Topic, SubscriptionName: sub, Type: apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return rep, fmt.Errorf("dlq: redrive %q: subscribe: %w", opts.Topic, err)
	}
	defer c.Close()
	var p apulsar.Producer
	if !opts.DryRun {
		p, err = client.CreateProducer(apulsar.ProducerOptions{Topic: target, DisableBatching: true})
		if err != nil {
			return rep, fmt.Errorf("dlq: redrive to %q: create producer: %w", target, err)
		}
		defer p.Close()
	}

	for opts.Limit <= 0 || len(rep.Moved) < opts.Limit {
		m, err := nextWithin(ctx, idle, c.Receive)
		if errors.Is(err, errIdle) {
			return rep, nil
		}
		if err != nil {
			return rep, fmt.Errorf("dlq: redrive %q: %w", opts.Topic, err)
		}
		dm := classify(m)
		switch {
		case dm.Kind == KindPoison:
			rep.Poison = append(rep.Poison, dm)
			continue
		case dm.Kind == KindRaw:
			rep.Raw = append(rep.Raw, dm)
			continue
		case opts.URN != "" && dm.URN != opts.URN, opts.Reason != "" && dm.Reason != opts.Reason:
			rep.Skipped++
			continue
		case opts.DryRun:
			rep.Moved = append(rep.Moved, dm)
			continue
		}
		pm, err := redriveMessage(dm)
		if err != nil {
			return rep, fmt.Errorf("dlq: redrive %q: %w", opts.Topic, err)
		}
		if _, err := p.Send(ctx, pm); err != nil {
			return rep, fmt.Errorf("dlq: redrive to %q: %w", target, err)
		}
		if err := c.Ack(m); err != nil {
			// Published but not acknowledged: the message will be redriven again (a
			// duplicate with the same meta.id), never lost.
			return rep, fmt.Errorf("dlq: redrive %q: ack after publish: %w", opts.Topic, err)
		}
		rep.Moved = append(rep.Moved, dm)
	}
	return rep, nil
}

func redriveMessage(dm Message) (*apulsar.ProducerMessage, error) {
	out := dm.Envelope.WithoutDeadLetter().WithAttempts(0)
	payload, err := out.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	props := maps.Clone(dm.Properties)
	if props == nil {
		props = map[string]string{}
	}
	delete(props, propDelay)
	props[propJob] = out.URN()
	props[propTraceID] = out.TraceID
	props[propMessageID] = out.Meta.ID
	props[propSchemaVersion] = strconv.Itoa(out.Meta.SchemaVersion)
	props[propSourceLang] = out.Meta.Lang
	props[propAttempts] = "0"
	return &apulsar.ProducerMessage{Payload: payload, Properties: props, Key: dm.Key, OrderingKey: dm.OrderingKey}, nil
}
