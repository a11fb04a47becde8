package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

func ExampleTopicFor() {
	topic, err := dlq.TopicFor("persistent://public/default/orders-partition-3")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(topic)
	// Output: persistent://public/default/orders.dlq
}

func ExampleConfig_TopicFor() {
	cfg := dlq.Config{Queues: map[string]dlq.QueueConfig{"metrics": {Disabled: true}}}
	for _, topic := range []string{"persistent://acme/shop/orders", "persistent://acme/shop/metrics"} {
		dlt, on, err := cfg.TopicFor(topic)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%q %v\n", dlt, on)
	}
	// Output:
	// "persistent://acme/shop/orders.dlq" true
	// "" false
}

// Keep the dead letters of a queue, inspect them without consuming them, then move them
// back to their queue, on the embedded broker (with its admin API).
func ExampleRedrive() {
	ctx := context.Background()
	broker, err := pulsartest.Start(ctx, pulsartest.WithAdminHTTP("127.0.0.1:0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: broker.URL(), Logger: bqpulsar.NewClientLogger(nil)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	admin, err := dlq.NewAdmin(broker.AdminURL())
	if err != nil {
		fmt.Println(err)
		return
	}

	// A consumer ensures the retention subscription before its first dead letter, so that
	// the broker keeps them; then it writes this copy after the last failed delivery.
	if err := dlq.EnsureSubscription(ctx, client, "orders.dlq", dlq.DefaultSubscription); err != nil {
		fmt.Println(err)
		return
	}
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 7}, envelope.WithQueue("orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, err := env.ToDeadLetter(envelope.DeadLetterInfo{
		Reason: envelope.ReasonFailed, Cause: errors.New("tax rules not loaded"), Attempts: 3,
	}).Encode()
	if err != nil {
		fmt.Println(err)
		return
	}
	producer, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders.dlq"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := producer.Send(ctx, &apulsar.ProducerMessage{Payload: body}); err != nil {
		fmt.Println(err)
		return
	}
	producer.Close()

	msgs, err := dlq.Peek(ctx, admin, dlq.PeekOptions{Topic: "orders.dlq"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range msgs {
		fmt.Printf("%s %s %s after %d attempts: %s\n", m.Kind, m.URN, m.Reason,
			m.Envelope.DeadLetter.Attempts, *m.Envelope.DeadLetter.Error)
	}

	report, err := dlq.Redrive(ctx, client, dlq.RedriveOptions{Topic: "orders.dlq", IdleTimeout: 200 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range report.Moved {
		fmt.Printf("moved %s back to orders\n", m.URN)
	}
	// Output:
	// annotated urn:babel:orders:created failed after 3 attempts: tax rules not loaded
	// moved urn:babel:orders:created back to orders
}
