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
//
// # Inspecting
//
// [Peek] reads a dead-letter topic with a non-durable reader, so it consumes nothing, and
// classifies each message ([Kind]): an annotated envelope (reason failed or unknown_urn), a
// poison copy ({"raw":…}) or a raw copy without a block (a gate rejection).
//
//	msgs, err := dlq.Peek(ctx, client, dlq.PeekOptions{Topic: "persistent://public/default/orders.dlq"})
//
// # Redriving
//
// [Redrive] moves annotated messages back to their queue (the dead-letter topic without
// ".dlq", or an explicit target): the dead_letter block is removed and attempts reset to 0,
// everything else is kept byte for byte, and the dead-letter copy is acknowledged only after
// the publish succeeded. Filters (URN, reason), a limit and a dry run are available. Poison
// and raw copies are reported and never republished.
//
//	rep, err := dlq.Redrive(ctx, client, dlq.RedriveOptions{
//		Topic: "persistent://public/default/orders.dlq",
//		URN:   "urn:babel:orders:created",
//	})
//
// # Deviations
//
//   - The end of a dead-letter topic is detected by an idle timeout ([DefaultIdleTimeout])
//     rather than by the topic's last message id, so that one code path serves partitioned and
//     non-partitioned dead-letter topics alike.
//   - The bq-* property names are repeated here (the pulsar package, which defines them,
//     imports dlq).
//   - Messages a redrive skips stay unacknowledged on its durable subscription and are seen
//     again by the next run; they are not negatively acknowledged.
package dlq
