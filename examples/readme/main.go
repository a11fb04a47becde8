// Readme is the README's Publish snippet followed by its Consume snippet, as one program:
// the test beside it checks that the README shows exactly this code, and that the message
// published before the consumer subscribed is delivered.
//
//	go run ./examples/readme
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
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/examples/internal/exampleenv"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID int `json:"order_id"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		log.Fatalf("readme: %v", err)
	}
}

func run(ctx context.Context, w io.Writer) (err error) {
	env, err := exampleenv.Connect(ctx, w, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	billed := func(o Order) {
		fmt.Fprintf(w, "billed order %d\n", o.ID)
		stop() // the program's end: Run returns
	}
	err = readme(ctx, env.URL, env.Topic("orders"), zap.NewNop(), billed)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		fmt.Fprintln(w, "done")
		return nil
	}
	return err
}

// readme holds the README's code; only serviceURL and topic differ from what it shows (the
// README names "pulsar://localhost:6650" and "persistent://public/default/orders").
func readme(ctx context.Context, serviceURL, topic string, logger *zap.Logger, billed func(Order)) error {
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	bill := func(_ context.Context, o Order) error {
		if o.ID == 0 {
			return errors.New("an order without an id")
		}
		billed(o)
		return nil
	}

	// README: publish
	client, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:    serviceURL,                       // "pulsar://localhost:6650"
		Logger: bqpulsar.NewClientLogger(logger), // the client logs through your *zap.Logger
	})
	if err != nil {
		return err
	}
	defer client.Close()

	pub, err := bqpulsar.NewPublisher(client, topic) // "persistent://public/default/orders"
	if err != nil {
		return err
	}
	defer pub.Close()

	id, err := pub.Publish(ctx, "urn:babel:orders:created", Order{ID: 1042},
		bqpulsar.WithKey("customer-7"),
		bqpulsar.WithHeaders(map[string]string{"traceparent": tp}), // bq-* keys always win
	)
	if err != nil {
		return err
	}
	log.Printf("published %s", id)
	// README: end

	// README: consume
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("billing", apulsar.Shared), // a new subscription starts at Earliest
		bqpulsar.Handle("urn:babel:orders:created", func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			var o Order
			if err := env.Bind(&o); err != nil {
				return err // counts as a failed delivery: retried, then dead-lettered
			}
			return bill(ctx, o)
		}),
		bqpulsar.WithMaxAttempts(5),
		bqpulsar.WithConcurrency(8), // same key or ordering key: handled in order
		bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
			if e.Kind == bqpulsar.EventFailed || e.Kind == bqpulsar.EventError {
				log.Printf("consume: %s: %v", e.Kind, e.Err)
			}
		}}),
	)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run(ctx) // until ctx ends
	// README: end
}
