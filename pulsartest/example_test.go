package pulsartest_test

import (
	"context"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// The real pulsar-client-go talks to the embedded broker over TCP.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := pulsartest.Start(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	if err := b.CreatePartitionedTopic("orders", 2); err != nil {
		fmt.Println(err)
		return
	}

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: b.URL(), Logger: plog.DefaultNopLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: "orders", SubscriptionName: "billing", AckWithResponse: true, // Ack returns once the broker has it
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer consumer.Close()
	producer, err := client.CreateProducer(apulsar.ProducerOptions{Topic: "orders"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer producer.Close()

	if _, err := producer.Send(ctx, &apulsar.ProducerMessage{Payload: []byte("order 1042")}); err != nil {
		fmt.Println(err)
		return
	}
	m, err := consumer.Receive(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(m.Payload()), "backlog before ack:", b.Backlog("orders", "billing"))
	if err := consumer.Ack(m); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("backlog after ack:", b.Backlog("orders", "billing"))
	// Output:
	// order 1042 backlog before ack: 1
	// backlog after ack: 0
}
