// Retry-and-dead-letter shows bounded retries and the per-queue dead-letter topic: one
// order fails once and succeeds on its retry, another always fails and ends in
// "<queue>.dlq" with a dead_letter block that says why, after maxAttempts deliveries.
//
//	go run ./examples/retry-and-dead-letter
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID    int   `json:"order_id"`
	Cents int64 `json:"total_cents"`
}

// errGatewayDown is the transient failure of the demo's payment gateway.
var errGatewayDown = errors.New("payment gateway timeout")

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("retry-and-dead-letter: %v", err)
	}
}

// tally counts the consumer's outcomes and says when the demo is complete.
type tally struct {
	mu                             sync.Mutex
	handled, retried, deadLettered int
	done                           chan struct{}
}

func (t *tally) Observe(e bqpulsar.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Kind { //nolint:exhaustive // only outcomes are counted
	case bqpulsar.EventHandled:
		t.handled++
	case bqpulsar.EventRetried:
		t.retried++
	case bqpulsar.EventDeadLettered:
		t.deadLettered++
	}
	if t.handled == 2 && t.deadLettered == 1 && t.done != nil {
		close(t.done)
		t.done = nil
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("orders")
	dlqTopic := topic + ".dlq"

	var mu sync.Mutex
	seen := map[int]int{}
	t := &tally{done: make(chan struct{})}
	done := t.done
	consumer, err := bqpulsar.NewConsumer(env.Client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("payments", apulsar.Shared),
		bqpulsar.WithMaxAttempts(3), // three deliveries in all, the first included
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: t.Observe}),
		bqpulsar.Handle("urn:babel:orders:created", func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
			var o Order
			if err := e.Bind(&o); err != nil {
				return fmt.Errorf("bind order: %w", err)
			}
			mu.Lock()
			seen[o.ID]++
			n := seen[o.ID]
			mu.Unlock()
			switch {
			case o.Cents < 0:
				fmt.Fprintf(w, "order %d: attempt %d fails (negative total)\n", o.ID, n)
				return fmt.Errorf("order %d: negative total %d", o.ID, o.Cents)
			case o.ID == 2 && n == 1:
				fmt.Fprintf(w, "order %d: attempt %d fails (%v)\n", o.ID, n, errGatewayDown)
				return errGatewayDown
			default:
				fmt.Fprintf(w, "order %d: attempt %d succeeds\n", o.ID, n)
				return nil
			}
		}),
	)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()

	// Read the dead-letter topic from its start, without consuming it.
	reader, err := env.Client.CreateReader(apulsar.ReaderOptions{Topic: dlqTopic, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		return fmt.Errorf("read %s: %w", dlqTopic, err)
	}
	defer reader.Close()

	pub, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	for _, o := range []Order{{ID: 1, Cents: 500}, {ID: 2, Cents: 700}, {ID: 3, Cents: -100}} {
		if _, err := pub.Publish(ctx, "urn:babel:orders:created", o); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}

	if err := exampleenv.RunUntil(ctx, done, consumer); err != nil {
		return err
	}

	msg, err := reader.Next(ctx)
	if err != nil {
		return fmt.Errorf("read the dead letter: %w", err)
	}
	dead, err := envelope.Decode(msg.Payload())
	if err != nil {
		return fmt.Errorf("decode the dead letter: %w", err)
	}
	dl := dead.DeadLetter
	if dl == nil {
		return errors.New("the dead-letter copy has no dead_letter block")
	}
	fmt.Fprintf(w, "dead letter on %s: reason=%s attempts=%d original_queue=%s error=%q\n",
		dlqTopic, dl.Reason, dl.Attempts, dl.OriginalQueue, deref(dl.Error))
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(w, "done: %d handled, %d retried, %d dead-lettered\n", t.handled, t.retried, t.deadLettered)
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
