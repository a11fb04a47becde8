package pulsar_test

import (
	"context"
	"fmt"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// Publish one message and consume it, on the embedded broker.
func Example() {
	ctx := context.Background()
	broker, err := pulsartest.Start(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	client, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:    broker.URL(),
		Logger: bqpulsar.NewClientLogger(zap.NewNop()),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	const topic = "persistent://public/default/example-orders"
	handled := make(chan string, 1)
	consumer, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("billing", apulsar.Shared),
		bqpulsar.Handle("urn:babel:orders:created", func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
			var order struct{ Order int }
			if err := env.Bind(&order); err != nil {
				return err
			}
			handled <- fmt.Sprintf("%s order %d (attempts %d)", env.URN(), order.Order, env.Attempts)
			return nil
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx) }()

	publisher, err := bqpulsar.NewPublisher(client, topic)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := publisher.Publish(ctx, "urn:babel:orders:created", map[string]any{"order": 42}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-handled)

	stop()
	fmt.Println(<-done)
	if err := consumer.Close(); err != nil {
		fmt.Println(err)
	}
	if err := publisher.Close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// urn:babel:orders:created order 42 (attempts 0)
	// context canceled
}
