// Quickstart is the BabelQueue Pulsar SDK's main job in one program: it publishes a batch
// of orders, consumes them with a URN-routed handler that fails some of them, and shows
// the retries, the dead-letter topic and a redrive, then prints a summary.
//
//	go run ./examples/quickstart
//
// It uses the broker at PULSAR_URL, or starts the embedded Pulsar-protocol broker, so it
// runs on a fresh machine with nothing installed but Go.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID         int   `json:"order_id"`
	TotalCents int64 `json:"total_cents"`
}

const (
	orders     = 20
	urnCreated = "urn:babel:orders:created"
)

var (
	errGateway   = errors.New("payment gateway timeout")
	errInventory = errors.New("inventory service offline")
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("quickstart: %v", err)
	}
}

// stats counts what the consumer did, from its observer.
type stats struct {
	handled, retried, deadLettered atomic.Int64
	changed                        chan struct{} // poked on every outcome
}

func (s *stats) Observe(e bqpulsar.Event) {
	switch e.Kind {
	case bqpulsar.EventHandled:
		s.handled.Add(1)
	case bqpulsar.EventRetried:
		s.retried.Add(1)
	case bqpulsar.EventDeadLettered:
		s.deadLettered.Add(1)
	default:
		return
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *stats) String() string {
	return fmt.Sprintf("%d handled, %d retried, %d dead-lettered", s.handled.Load(), s.retried.Load(), s.deadLettered.Load())
}

// waitFor prints progress until cond holds, or fails when ctx ends.
func waitFor(ctx context.Context, w io.Writer, s *stats, what string, cond func() bool) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (%s): %w", what, s, ctx.Err())
		case <-s.changed:
		case <-tick.C:
			if now := s.String(); now != last {
				fmt.Fprintf(w, "   … %s\n", now)
				last = now
			}
		}
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
	dlqTopic := topic + ".dlq" // the per-queue dead-letter topic, on by default
	// The retention subscription keeps the dead letters on a real cluster until they are
	// redriven (the consumer makes sure of it too, before its first dead letter).
	if err := dlq.EnsureSubscription(ctx, env.Client, dlqTopic, dlq.DefaultSubscription); err != nil {
		return fmt.Errorf("retention subscription: %w", err)
	}

	// The handler: orders ending in 5 or 0 meet a flaky gateway once; every seventh order
	// needs the inventory service, which is down until we say otherwise.
	var inventoryUp atomic.Bool
	var mu sync.Mutex
	attempts := map[int]int{}
	handle := func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
		var o Order
		if err := e.Bind(&o); err != nil {
			return fmt.Errorf("bind order: %w", err)
		}
		mu.Lock()
		attempts[o.ID]++
		n := attempts[o.ID]
		mu.Unlock()
		switch {
		case o.ID%7 == 0 && !inventoryUp.Load():
			return fmt.Errorf("order %d: %w", o.ID, errInventory)
		case o.ID%5 == 0 && n == 1:
			return fmt.Errorf("order %d: %w", o.ID, errGateway)
		}
		return nil
	}

	s := &stats{changed: make(chan struct{}, 1)}
	consumer, err := bqpulsar.NewConsumer(env.Client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("fulfilment", apulsar.Shared),
		bqpulsar.Handle(urnCreated, handle),
		bqpulsar.WithRetry(retry.Policy{
			MaxAttempts: 3, // three deliveries in all, then the dead-letter topic
			Strategy:    retry.Republish,
			Backoff:     retry.Backoff{Initial: 200 * time.Millisecond, Multiplier: 2, Jitter: 0.2},
		}),
		bqpulsar.WithConcurrency(4),
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: s.Observe}),
	)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- consumer.Run(runCtx) }()
	defer func() {
		stop()
		if rerr := <-errc; rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = errors.Join(err, fmt.Errorf("consumer: %w", rerr))
		}
	}()

	// 1. Publish.
	pub, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	for i := 1; i <= orders; i++ {
		if _, err := pub.Publish(ctx, urnCreated, Order{ID: 1000 + i, TotalCents: int64(i) * 199}); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	fmt.Fprintf(w, "1. published %d orders to %s\n", orders, topic)

	// 2. Consume until every order is either handled or dead-lettered.
	const doomed = 3 // 1001, 1008 and 1015 are multiples of 7
	fmt.Fprintln(w, "2. consuming (orders ending in 5 or 0 fail once; every seventh order fails until the inventory is back)")
	if err := waitFor(ctx, w, s, "the first pass", func() bool {
		return s.handled.Load() == orders-doomed && s.deadLettered.Load() == doomed
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "   first pass: %s\n", s)

	// 3. Inspect the dead-letter topic without consuming it.
	dead, err := dlq.Peek(ctx, env.Admin, dlq.PeekOptions{Topic: dlqTopic})
	if err != nil {
		return fmt.Errorf("peek %s: %w", dlqTopic, err)
	}
	fmt.Fprintf(w, "3. %s holds %d message(s):\n", dlqTopic, len(dead))
	for _, m := range dead {
		dl := m.Envelope.DeadLetter
		fmt.Fprintf(w, "   %s after %d attempts: %s\n", dl.Reason, dl.Attempts, deref(dl.Error))
	}

	// 4. The inventory is back: redrive the dead letters to the queue.
	inventoryUp.Store(true)
	report, err := dlq.Redrive(ctx, env.Client, dlq.RedriveOptions{Topic: dlqTopic, IdleTimeout: 500 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	fmt.Fprintf(w, "4. redrove %d message(s) to %s (attempts reset, dead_letter block removed)\n", len(report.Moved), topic)
	if err := waitFor(ctx, w, s, "the redriven orders", func() bool { return s.handled.Load() == orders }); err != nil {
		return err
	}

	fmt.Fprintf(w, "done: %d published, %d handled, %d retried, %d dead-lettered, %d redriven\n",
		orders, s.handled.Load(), s.retried.Load(), s.deadLettered.Load(), len(report.Moved))
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "(no error text)"
	}
	return *s
}
