// Redrive dead-letters a few messages (a handler that rejects them, one delivery only, and
// a message without a handler), lists the dead-letter topic without consuming it, does a
// dry run, then moves back only the messages of one URN, as an operator would after a fix.
//
//	go run ./examples/redrive
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

const (
	urnCreated  = "urn:babel:orders:created"
	urnArchived = "urn:babel:orders:archived" // nobody handles it: dead-lettered as unknown_urn
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("redrive: %v", err)
	}
}

// consumeUntil runs the consumer until n messages have been settled one way or another.
func consumeUntil(ctx context.Context, c *bqpulsar.Consumer, settled *atomic.Int64, n int64) error {
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(runCtx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for settled.Load() < n && ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("consume: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for %d settlements: %w", n, err)
	}
	return nil
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("orders")
	dlqTopic := topic + ".dlq"
	// The retention subscription keeps the dead letters on a real cluster until they are
	// redriven (the consumer makes sure of it too, before its first dead letter).
	if err := dlq.EnsureSubscription(ctx, env.Client, dlqTopic, dlq.DefaultSubscription); err != nil {
		return fmt.Errorf("retention subscription: %w", err)
	}

	var fixed atomic.Bool
	var settled, handled atomic.Int64
	consumer, err := bqpulsar.NewConsumer(env.Client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("fulfilment", apulsar.Shared),
		bqpulsar.WithMaxAttempts(1), // no retry: straight to the dead-letter topic
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
			if e.Kind == bqpulsar.EventHandled || e.Kind == bqpulsar.EventDeadLettered {
				settled.Add(1)
			}
		}}),
		bqpulsar.Handle(urnCreated, func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
			if !fixed.Load() {
				return errors.New("tax rules not loaded")
			}
			handled.Add(1)
			fmt.Fprintf(w, "handled %s, data %s, attempts %d\n", e.URN(), e.Data, e.Attempts)
			return nil
		}),
	)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()

	pub, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	for i, urn := range []string{urnCreated, urnCreated, urnArchived} {
		if _, err := pub.Publish(ctx, urn, map[string]any{"order_id": 3001 + i}); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	if err := consumeUntil(ctx, consumer, &settled, 3); err != nil {
		return err
	}

	msgs, err := dlq.Peek(ctx, env.Admin, dlq.PeekOptions{Topic: dlqTopic})
	if err != nil {
		return fmt.Errorf("peek: %w", err)
	}
	fmt.Fprintf(w, "%s holds %d message(s):\n", dlqTopic, len(msgs))
	for _, m := range msgs {
		fmt.Fprintf(w, "  %s reason=%s attempts=%d\n", m.URN, m.Reason, m.Envelope.DeadLetter.Attempts)
	}

	opts := dlq.RedriveOptions{Topic: dlqTopic, URN: urnCreated, IdleTimeout: 500 * time.Millisecond, DryRun: true, Admin: env.Admin}
	report, err := dlq.Redrive(ctx, env.Client, opts)
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	fmt.Fprintf(w, "dry run: would move %d, skip %d\n", len(report.Moved), report.Skipped)

	fixed.Store(true) // the fix is deployed
	opts.DryRun = false
	if report, err = dlq.Redrive(ctx, env.Client, opts); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	fmt.Fprintf(w, "redrive: moved %d, skipped %d (left in %s)\n", len(report.Moved), report.Skipped, dlqTopic)
	if err := consumeUntil(ctx, consumer, &settled, 5); err != nil {
		return err
	}
	fmt.Fprintf(w, "done: %d redriven order(s) handled\n", handled.Load())
	return nil
}
