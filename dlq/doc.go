// Package dlq names, configures and operates BabelQueue dead-letter topics on Apache Pulsar.
//
// # Naming
//
// A BabelQueue queue is one Pulsar topic; its logical name ([QueueName]) is the last
// segment of the topic without a "-partition-<n>" suffix. The dead-letter topic of a queue
// is "<queue>.dlq" in the same tenant and namespace ([TopicFor]); retries and dead letters
// of a partition go to the parent topic ([ParentTopic]).
//
//	dlq.TopicFor("persistent://public/default/orders-partition-3")
//	// "persistent://public/default/orders.dlq"
//
// # Configuration
//
// [Config] is what a consumer takes: on by default for every queue, one topic for all
// queues, or per queue ([QueueConfig]); off only when the application says so ([Off]).
package dlq
