package dlq_test

import (
	"fmt"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
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
