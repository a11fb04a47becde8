package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// RedriveOptions configures [Redrive].
type RedriveOptions struct {
	// Topic is the dead-letter topic to move messages from. Required.
	Topic string
	// Target is the topic the messages go back to. Default (""): Topic without its ".dlq"
	// suffix (an error when it has none).
	Target string
	// Subscription is the durable subscription Topic is read and acknowledged on. Default
	// (""): [DefaultSubscription], the retention subscription. Messages a run skips stay
	// unacknowledged on it, so a later run (and [Peek]) sees them again.
	Subscription string
	// URN, when not empty, moves only messages whose routing URN ([Message.RoutingURN]: a
	// usable bq-job property, else the envelope's URN) is exactly this.
	URN string
	// Reason, when not empty, moves only messages whose dead_letter.reason is this.
	Reason envelope.Reason
	// Limit is the most messages moved (or, with DryRun, reported as movable). Default (0):
	// no limit.
	Limit int
	// DryRun reports what would move and changes nothing: it reads through Admin ([Peek]'s
	// way), so it publishes, acknowledges, creates and redelivers nothing.
	DryRun bool
	// Admin is the admin API client a dry run reads through. Required with DryRun, unused
	// otherwise.
	Admin *Admin
	// IdleTimeout ends a run (not a dry run) when no further message arrives for that long.
	// Default (0): [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// Progress, when not nil, is called once for each message the run has read and dealt
	// with (moved, or with DryRun found movable: moved is true; skipped by the filters, or
	// left as a poison or raw copy: false), in order, from the goroutine that called
	// Redrive, so that a caller can show progress. Default (nil): no call.
	Progress func(m Message, moved bool)
}

// RedriveReport says what [Redrive] did.
type RedriveReport struct {
	// Moved are the messages published back to the target and acknowledged on the
	// subscription (with DryRun: the messages that would move).
	Moved []Message
	// Skipped counts annotated messages left in place because they did not match the filters.
	Skipped int
	// Poison are poison copies ({"raw":…}): reported, never republished, left in place.
	Poison []Message
	// Raw are messages without a dead_letter block (typically gate rejections): reported,
	// never republished, left in place.
	Raw []Message
}

// sort files one message into the report; it returns true when it is to move.
func (r *RedriveReport) sort(dm Message, urn string, reason envelope.Reason) bool {
	switch {
	case dm.Kind == KindPoison:
		r.Poison = append(r.Poison, dm)
	case dm.Kind == KindRaw:
		r.Raw = append(r.Raw, dm)
	case urn != "" && dm.RoutingURN != urn, reason != "" && dm.Reason != reason:
		r.Skipped++
	default:
		return true
	}
	return false
}

// Redrive moves dead-lettered messages back to their queue. It reads the dead-letter topic
// on its retention subscription (an Exclusive consumer, which the broker gives no
// redelivery count to, created at the earliest position if missing). For each annotated
// message that matches the filters it publishes the envelope with the dead_letter block
// removed and attempts reset to 0 (everything else byte for byte: data, unknown keys,
// meta), with its properties kept except the bq-* ones, which are projected again
// (bq-attempts "0", no bq-delay) but for bq-job, which keeps the routing URN the consumer
// used, so the handler that failed gets it again; and its key. It acknowledges the
// dead-letter copy on the subscription only after that publish succeeded. Poison copies and
// raw copies are reported and left in place; so are messages that do not match. It stops
// at the limit, at the end of the subscription (no message for the idle timeout) or when
// ctx ends, and returns the report so far with any error: a failed publish stops the run
// and leaves that message unacknowledged.
//
// With DryRun it only reads, through opts.Admin, the messages pending on the subscription
// ([Peek]'s strictly read-only way) and reports what would move.
func Redrive(ctx context.Context, client apulsar.Client, opts RedriveOptions) (RedriveReport, error) {
	var rep RedriveReport
	target, err := opts.validate(client)
	if err != nil {
		return rep, err
	}
	sub := opts.Subscription
	if sub == "" {
		sub = DefaultSubscription
	}
	if opts.DryRun {
		err := opts.Admin.pending(ctx, opts.Topic, sub, func(dm Message) bool {
			moved := rep.sort(dm, opts.URN, opts.Reason)
			if moved {
				rep.Moved = append(rep.Moved, dm)
			}
			opts.progress(dm, moved)
			return opts.Limit <= 0 || len(rep.Moved) < opts.Limit
		})
		return rep, err
	}

	c, err := subscribeRetention(client, opts.Topic, sub)
	if err != nil {
		return rep, err
	}
	defer c.Close()
	p, err := client.CreateProducer(apulsar.ProducerOptions{Topic: target, DisableBatching: true})
	if err != nil {
		return rep, fmt.Errorf("dlq: redrive to %q: create producer: %w", target, err)
	}
	defer p.Close()

	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
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
		if !rep.sort(dm, opts.URN, opts.Reason) {
			opts.progress(dm, false)
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
		opts.progress(dm, true)
	}
	return rep, nil
}

func (o RedriveOptions) progress(m Message, moved bool) {
	if o.Progress != nil {
		o.Progress(m, moved)
	}
}

func (o RedriveOptions) validate(client apulsar.Client) (string, error) {
	if client == nil && !o.DryRun {
		return "", fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if o.DryRun && o.Admin == nil {
		return "", fmt.Errorf("%w: a dry run reads through the admin API: give RedriveOptions.Admin", ErrInvalidOptions)
	}
	if err := ValidateTopic(o.Topic); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.Subscription != "" {
		if err := ValidateSubscriptionName(o.Subscription); err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
	}
	if o.Limit < 0 {
		return "", fmt.Errorf("%w: negative limit %d", ErrInvalidOptions, o.Limit)
	}
	target := o.Target
	if target == "" {
		if !strings.HasSuffix(o.Topic, Suffix) || len(o.Topic) == len(Suffix) {
			return "", fmt.Errorf("%w: topic %q has no %q suffix; give a target", ErrInvalidOptions, o.Topic, Suffix)
		}
		target = strings.TrimSuffix(o.Topic, Suffix)
	}
	if err := ValidateTopic(target); err != nil {
		return "", fmt.Errorf("%w: target: %w", ErrInvalidOptions, err)
	}
	return target, nil
}

// subscribeRetention attaches an Exclusive consumer to the retention subscription: the
// broker keeps no redelivery count for Exclusive subscriptions, so what a run reads and
// leaves is seen unchanged by the next one.
func subscribeRetention(client apulsar.Client, topic, sub string) (apulsar.Consumer, error) {
	c, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: sub, Type: apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		AckWithResponse:             true, // an acknowledgement counts once the broker confirmed it
	})
	if err != nil {
		se := subscriptionFailure(topic, sub, err)
		if strings.Contains(err.Error(), "ConsumerBusy") {
			se = &SubscriptionError{
				Topic: topic, Subscription: sub, Reason: "another consumer holds it", Err: err,
				Fix: "wait for the other redrive or purge to end; nothing else should consume the retention subscription",
			}
		}
		return nil, se
	}
	return c, nil
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
	delete(props, binding.Delay)
	binding.Project(props, out)
	props[binding.Job] = dm.RoutingURN // the routing decision the failed delivery was made by
	return &apulsar.ProducerMessage{Payload: payload, Properties: props, Key: dm.Key, OrderingKey: dm.OrderingKey}, nil
}
