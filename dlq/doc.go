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
// queues, or per queue ([QueueConfig]); off only when the application says so ([Off]). It
// also names each queue's retention subscription ([Config.SubscriptionFor], default
// [DefaultSubscription], "bq-dlq").
//
// # The retention subscription
//
// Pulsar keeps an entry only while some durable subscription still needs it (unless the
// namespace has a retention policy; the default keeps nothing): what is written to a topic
// nobody subscribes to is deleted when the broker trims its ledgers. So the rules are:
//
//   - Before its first write to a dead-letter topic, a consumer calls [EnsureSubscription]
//     with the queue's retention subscription. From then on the broker keeps every dead
//     letter until that subscription acknowledges it.
//   - Only [Redrive] (after a successful republish) and [Purge] acknowledge on it; nothing
//     else consumes it. The subscription itself is never deleted by this package, so dead
//     letters written later are kept as before.
//   - [Peek] and a dry-run [Redrive] show exactly what is pending on it, never what was
//     redriven or purged, and change nothing.
//   - The same function provisions the subscription of a queue whose publisher is
//     deployed before its first consumer subscribes.
//
// [EnsureSubscription] attaches a consumer with no receiver queue (it grants the broker no
// permit, so nothing is delivered) at the earliest position on every partition, and closes
// it: an existing subscription keeps its position, acknowledgements and redelivery counts
// (attach with the type its consumers use, [WithSubscriptionType]); a subscription held by
// a consumer of another type answers ConsumerBusy, which proves it exists. When the broker
// refuses (auto subscription or topic creation off, no permission) it returns a
// *[SubscriptionError] that names the topic, the subscription and the fix.
//
// # Inspecting
//
// [Peek] is strictly read-only. It reads through Pulsar's admin REST API ([Admin]): the
// partition count, the subscription list, then "peek messages" at positions 1, 2, … of the
// subscription, which reads past the mark-delete position, skips individually acknowledged
// entries and moves no cursor. It creates no topic and no subscription (a missing one is a
// *[SubscriptionError] wrapping [ErrSubscriptionNotFound]), acknowledges nothing and raises
// no redelivery count. A reader would show the whole topic, including what was already
// redriven, and a consumer that receives and closes without acknowledging can raise
// redelivery counts on Shared subscriptions; neither is used. It classifies each message
// ([Kind]): an annotated envelope (reason failed or unknown_urn), a poison copy
// ({"raw":…}) or a raw copy without a block (a gate rejection).
//
//	admin, err := dlq.NewAdmin("http://localhost:8080")
//	msgs, err := dlq.Peek(ctx, admin, dlq.PeekOptions{Topic: "persistent://public/default/orders.dlq"})
//
// [Summarize] reads the same way and counts what is pending by URN and reason, with the
// oldest and the newest dead letter ([Message.DeadLetteredAt]: dead_letter.failed_at, else
// the publish time). [Admin.Backlog] reads a subscription's backlog from the topic stats.
//
// # Redriving and purging
//
// [Redrive] moves annotated messages back to their queue (the dead-letter topic without
// ".dlq", or an explicit target): the dead_letter block is removed and attempts reset to 0,
// everything else is kept byte for byte, bq-job keeps the routing URN the consumer used (a
// usable bq-job property, else the body's URN: [Message.RoutingURN]) so the handler that
// failed gets the message again, and the dead-letter copy is acknowledged on the retention
// subscription only after the publish succeeded. Filters (routing URN, reason), a limit and
// a dry run are available. Poison and raw copies are reported and never republished.
// [Purge] acknowledges matching dead letters without republishing them. Both read with an
// Exclusive consumer, to which the broker gives no redelivery counts, so what a run leaves
// is seen unchanged by the next.
// [RedriveOptions.Progress] is called for each message a run reads, for a progress display.
//
//	rep, err := dlq.Redrive(ctx, client, dlq.RedriveOptions{
//		Topic: "persistent://public/default/orders.dlq",
//		URN:   "urn:babel:orders:created",
//	})
//
// # Deviations
//
//   - The end of the retention subscription is detected by an idle timeout
//     ([DefaultIdleTimeout]) in [Redrive] and [Purge], so that one code path serves
//     partitioned and non-partitioned dead-letter topics alike. [Peek] ends at the last
//     pending position.
//   - [Peek] shows a batch entry whole even when some of its messages were acknowledged one
//     by one (the admin API answers per entry). On brokers older than the JSON property
//     header (X-Pulsar-PROPERTY), property names reach it lower-cased.
//   - The bq-* property names are repeated here (the pulsar package, which defines them,
//     imports dlq).
//   - Messages a redrive skips stay unacknowledged on the subscription and are seen again by
//     the next run; they are not negatively acknowledged.
//   - A subscription can still be removed by the broker's subscription expiration
//     (subscriptionExpirationTimeMinutes) when it is configured; the retention subscription
//     then has to be ensured again.
package dlq
