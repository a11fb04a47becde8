// Publish-consume publishes a few orders and consumes them with a handler routed by URN.
//
//	go run ./examples/publish-consume
//
// It uses the broker at PULSAR_URL, or starts an embedded one.
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

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID    int   `json:"order_id"`
	Cents int64 `json:"total_cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("publish-consume: %v", err)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("orders")
	const n = 5

	// Subscribe first, so the subscription exists before the messages are published.
	var handled atomic.Int32
	done := make(chan struct{})
	consumer, err := bqpulsar.NewConsumer(env.Client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("fulfilment", apulsar.Shared),
		bqpulsar.Handle("urn:babel:orders:created", func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
			var o Order
			if err := e.Bind(&o); err != nil {
				return fmt.Errorf("bind order: %w", err)
			}
			fmt.Fprintf(w, "handled order %d (%d cents), attempt %d\n", o.ID, o.Cents, e.Attempts+1)
			if handled.Add(1) == n {
				close(done)
			}
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
	for i := 1; i <= n; i++ {
		if _, err := pub.Publish(ctx, "urn:babel:orders:created", Order{ID: 1000 + i, Cents: int64(i) * 250}); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	fmt.Fprintf(w, "published %d orders to %s\n", n, topic)

	if err := exampleenv.RunUntil(ctx, done, consumer); err != nil {
		return fmt.Errorf("handled %d of %d orders: %w", handled.Load(), n, err)
	}
	fmt.Fprintf(w, "done: %d published, %d handled\n", n, n)
	return nil
}
