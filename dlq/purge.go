package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// PurgeOptions configures [Purge].
type PurgeOptions struct {
	// Topic is the dead-letter topic. Required.
	Topic string
	// Subscription is the subscription to acknowledge on. Default (""): [DefaultSubscription].
	Subscription string
	// URN, when not empty, purges only messages whose routing URN ([Message.RoutingURN]) is
	// exactly this (so no poison or raw copy).
	URN string
	// Reason, when not empty, purges only messages whose dead_letter.reason is this (poison
	// included; raw copies have none).
	Reason envelope.Reason
	// Limit is the most messages purged. Default (0): no limit.
	Limit int
	// IdleTimeout ends the run when no further message arrives for that long. Default (0):
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
}

// PurgeReport says what [Purge] did.
type PurgeReport struct {
	// Purged are the messages acknowledged on the subscription: gone from [Peek] and
	// [Redrive], and free for the broker to delete once no other subscription needs them.
	Purged []Message
	// Skipped counts messages left in place because they did not match the filters.
	Skipped int
}

// Purge discards dead letters: it acknowledges the matching messages pending on the
// retention subscription (every message, of every kind, without filters), with an
// Exclusive consumer, and leaves the others unacknowledged. The subscription itself stays,
// so dead letters written later are kept as before. It stops at the limit, at the end of
// the subscription (no message for the idle timeout) or when ctx ends, and returns the
// report so far with any error.
func Purge(ctx context.Context, client apulsar.Client, opts PurgeOptions) (PurgeReport, error) {
	var rep PurgeReport
	if client == nil {
		return rep, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := ValidateTopic(opts.Topic); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	sub := opts.Subscription
	if sub == "" {
		sub = DefaultSubscription
	}
	if err := ValidateSubscriptionName(sub); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if opts.Limit < 0 {
		return rep, fmt.Errorf("%w: negative limit %d", ErrInvalidOptions, opts.Limit)
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	c, err := subscribeRetention(client, opts.Topic, sub)
	if err != nil {
		return rep, err
	}
	defer c.Close()
	for opts.Limit <= 0 || len(rep.Purged) < opts.Limit {
		m, err := nextWithin(ctx, idle, c.Receive)
		if errors.Is(err, errIdle) {
			return rep, nil
		}
		if err != nil {
			return rep, fmt.Errorf("dlq: purge %q: %w", opts.Topic, err)
		}
		dm := classify(m)
		if (opts.URN != "" && dm.RoutingURN != opts.URN) || (opts.Reason != "" && dm.Reason != opts.Reason) {
			rep.Skipped++
			continue
		}
		if err := c.Ack(m); err != nil {
			return rep, fmt.Errorf("dlq: purge %q: ack: %w", opts.Topic, err)
		}
		rep.Purged = append(rep.Purged, dm)
	}
	return rep, nil
}
