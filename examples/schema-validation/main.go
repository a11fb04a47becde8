// Schema-validation shows per-URN payload validation against a registry.json (the
// BabelQueue schema registry's format, embedded in the binary): the checked publisher
// refuses an invalid order with every violation and sends nothing; an invalid order sent
// by a producer that does not check (a legacy service, say) is dead-lettered by the
// consumer on its first delivery, reason failed, the violations in its error, and the
// handler only ever sees valid orders.
//
//	go run ./examples/schema-validation
package main

import (
	"context"
	"embed"
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
	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

//go:embed registry
var registry embed.FS

const ordersURN = "urn:babel:orders:created"

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID       int    `json:"order_id"`
	Cents    int64  `json:"total_cents"`
	Currency string `json:"currency,omitempty"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("schema-validation: %v", err)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	provider, err := schema.NewRegistryProviderFS(registry, "registry/registry.json")
	if err != nil {
		return fmt.Errorf("load the registry: %w", err)
	}
	fmt.Fprintf(w, "registry: schemas for %v\n", provider.URNs())

	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	topic := env.Topic("orders")
	dlqTopic := topic + ".dlq"

	raw, err := bqpulsar.NewPublisher(env.Client, topic)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	pub, err := schema.NewPublisher(raw, provider)
	if err != nil {
		return errors.Join(err, raw.Close()) //nolint:contextcheck // Close takes no ctx
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it

	// 1. The checked publisher refuses invalid data and sends nothing.
	_, err = pub.Publish(ctx, ordersURN, Order{ID: 0, Cents: -5, Currency: "GBP"})
	var ve *schema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("an invalid order was not refused: %w", err)
	}
	fmt.Fprintf(w, "publish refused: %d violations\n", len(ve.Violations))
	for _, v := range ve.Violations {
		fmt.Fprintf(w, "  %s (%s)\n", v, v.Keyword)
	}
	if _, err := pub.Publish(ctx, ordersURN, Order{ID: 1, Cents: 1250, Currency: "EUR"}); err != nil {
		return fmt.Errorf("publish a valid order: %w", err)
	}
	fmt.Fprintln(w, "published order 1 (valid)")

	// 2. A producer that does not check sends an invalid order anyway.
	if _, err := pub.Unwrap().Publish(ctx, ordersURN, map[string]any{"order_id": 2, "total_cents": "12.50"}); err != nil {
		return fmt.Errorf("publish unchecked: %w", err)
	}
	fmt.Fprintln(w, "published order 2 unchecked (total_cents is a string)")

	// 3. The consumer dead-letters it at once; the handler sees only valid orders.
	var mu sync.Mutex
	var handled []int
	done := make(chan struct{})
	consumer, err := bqpulsar.NewConsumer(env.Client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("fulfilment", apulsar.Shared),
		bqpulsar.WithConsumerOptions(func(o *apulsar.ConsumerOptions) {
			o.SubscriptionInitialPosition = apulsar.SubscriptionPositionEarliest
		}),
		bqpulsar.WithMaxAttempts(5), // a validation failure never uses them
		bqpulsar.WithHooks(bqpulsar.Hooks{Handler: schema.Middleware(provider)}),
		bqpulsar.Handle(ordersURN, func(_ context.Context, e *envelope.Envelope, _ apulsar.Message) error {
			var o Order
			if err := e.Bind(&o); err != nil {
				return fmt.Errorf("bind order: %w", err)
			}
			mu.Lock()
			handled = append(handled, o.ID)
			mu.Unlock()
			return nil
		}),
	)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()
	reader, err := env.Client.CreateReader(apulsar.ReaderOptions{Topic: dlqTopic, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		return fmt.Errorf("read %s: %w", dlqTopic, err)
	}
	defer reader.Close()

	var dead *envelope.Envelope
	var readErr error
	go func() {
		defer close(done)
		msg, err := reader.Next(ctx)
		if err != nil {
			readErr = fmt.Errorf("read the dead letter: %w", err)
			return
		}
		dead, readErr = envelope.Decode(msg.Payload())
	}()
	if err := exampleenv.RunUntil(ctx, done, consumer); err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	dl := dead.DeadLetter
	if dl == nil || dl.Error == nil {
		return errors.New("the dead-letter copy has no dead_letter block with an error")
	}
	fmt.Fprintf(w, "dead letter on %s: reason=%s attempts=%d data=%s\n  error=%q\n",
		dlqTopic, dl.Reason, dl.Attempts, dead.Data, *dl.Error)
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(w, "done: handled orders %v\n", handled)
	return nil
}
