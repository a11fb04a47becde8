// Package pulsar is the Apache Pulsar binding of BabelQueue: it publishes and consumes
// BabelQueue envelopes ([envelope.Envelope]) on Pulsar topics through
// github.com/apache/pulsar-client-go, following the wire contract of the BabelQueue SDKs.
//
// Applications usually import it as bqpulsar, since the client's own package is also
// called pulsar:
//
//	import bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
//
// # Publishing
//
// [NewPublisher] creates a producer for one topic; [Publisher.Publish] builds the envelope,
// sends it with exactly the six bq-* properties ([ProjectProperties]) and returns meta.id.
// [Publisher.PublishAsync] does the same without waiting, with at most [WithMaxPending]
// sends in flight and the outcome delivered to a callback. Per message: [WithTraceID],
// [WithQueue], [WithDelay] / [WithDeliverAt] (also bq-delay; honoured by the broker only on
// Shared and Key_Shared subscriptions), [WithHeaders], [WithKey], [WithOrderingKey].
//
//	pub, err := bqpulsar.NewPublisher(client, "persistent://public/default/orders")
//	if err != nil { … }
//	defer pub.Close()
//	id, err := pub.Publish(ctx, "urn:babel:orders:created", map[string]any{"order": 42})
//
// The producer batches per key by default (see [WithProducerOptions]) so that Key_Shared
// subscriptions keep their key affinity.
//
// # Consuming
//
// [NewConsumer] subscribes and dispatches by URN. Each message goes through the contract's
// pipeline in order: the bq-schema-version gate ([GateVerdict]), classification
// (envelope.Classify), attempts reconciliation ([Reconcile]), routing (a usable bq-job
// property wins over the body's URN; an [EventRoutingMismatch] reports a difference), dispatch (handler panics are
// recovered into failures) and settlement:
//
//   - success: ack;
//   - failure or unknown URN with deliveries left: retry (republish + ack by default, or
//     nack on Shared/Key_Shared with retry.Nack), with the policy's backoff;
//   - exhausted: annotated copy to the dead-letter topic, then ack;
//   - poison: ADR-0035 copy ({"raw":…,"dead_letter":…}) to the dead-letter topic at once;
//   - gate rejection: the payload and properties unchanged to the dead-letter topic, on the
//     first delivery;
//   - a failed republish or dead-letter write: nack, never ack.
//
// Dead-lettering is on by default ("<queue>.dlq"); retries and dead letters of a partition
// go to the parent topic. With dead-lettering off, exhausted messages are acked, logged at
// WARN and reported as *[ExhaustedError]. Before its first write to a dead-letter topic the
// consumer makes sure the queue's retention subscription ("bq-dlq") exists on it
// ([WithRetentionSubscription]), since Pulsar deletes what no durable subscription needs.
//
// What each copy carries (the key and ordering key are always kept):
//
//   - retry: the original properties, with bq-attempts set to this delivery's number and
//     bq-delay only when the retry is delayed; the body with attempts set likewise (a poison
//     body byte for byte);
//
//   - annotated dead letter: the original properties overlaid with the six bq-* properties
//     of the copy (bq-attempts = this delivery's number), a usable bq-job kept (the routing
//     decision), no bq-delay; the body with its dead_letter block;
//
//   - poison: the original properties with bq-attempts set and bq-delay removed, nothing
//     added; the body {"raw":…,"raw_base64"?:…,"dead_letter":{…}};
//
//   - gate rejection: payload and properties byte for byte, no dead_letter block;
//
//   - truncated (a copy over [WithMaxMessageSize]): the properties of the copy it replaces;
//     the body {"raw":…,"truncated":true,"original_size":…,"original_sha256":…,
//     "dead_letter":{…}}.
//
// A consumer with its handlers:
//
//	c, err := bqpulsar.NewConsumer(client,
//		bqpulsar.WithTopic("persistent://public/default/orders"),
//		bqpulsar.WithSubscription("billing", apulsar.Shared),
//		bqpulsar.Handle("urn:babel:orders:created", handleCreated),
//		bqpulsar.WithMaxAttempts(5),
//	)
//	if err != nil { … }
//	defer c.Close()
//	err = c.Run(ctx) // until ctx ends
//
// # Two styles: Run and Next
//
// A consumer is used in one of two styles over the same receive, admission and settlement:
//
//   - [Consumer.Run], the router: it dispatches each message to the handler of its URN
//     ([Handle], [HandleUnknown]) on up to [WithConcurrency] workers, keeping the messages
//     of one key in order, and settles the handler's outcome.
//   - [Consumer.Next], the pull style: a loop of the caller's own. Next returns a [Delivery]
//     (the decoded envelope, the Pulsar message, the counted attempt, the routing URN and
//     the delivery's context) which the caller settles once with [Delivery.Ack],
//     [Delivery.Fail], [Delivery.RetryAfter], [Delivery.DeadLetter] or [Delivery.Nack]; a
//     second settlement returns [ErrSettled]. Fail maps an error exactly as Run maps a
//     handler's.
//
// Next, not a Go 1.23 iterator: every call takes its own ctx, returns the error that ended
// it (ctx's, [ErrClosed], a fatal *[ReceiveError]) instead of hiding it in a range loop,
// may be called from several goroutines, and leaves no doubt about what a break does to
// the delivery in hand (nothing: it is still the caller's to settle).
//
// Under Next, gate rejections and poison are settled by the engine and never returned;
// attempts and retries are Run's; a consumer needs no handler. At most [WithMaxInflight]
// deliveries are unsettled at a time: Next blocks until one is settled or its ctx ends.
// [Consumer.Close] negatively acknowledges what was left unsettled, logs and reports it and
// returns an error wrapping [ErrUnsettled], so nothing is lost. Run and Next are never
// mixed on one consumer ([ErrStyle]).
//
//	c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic),
//		bqpulsar.WithSubscription("billing", apulsar.Shared))
//	if err != nil { … }
//	defer c.Close()
//	for {
//		d, err := c.Next(ctx)
//		if err != nil {
//			return err // ctx.Err(), ErrClosed or a fatal *ReceiveError
//		}
//		if err := bill(d.Context(), d.Envelope()); err != nil {
//			_ = d.Fail(err) // retried, then dead-lettered, as under Run
//			continue
//		}
//		_ = d.Ack()
//	}
//
// # Retries on Exclusive and Failover subscriptions
//
// The broker ignores DeliverAfter and does not count nack redeliveries there. Retries are
// therefore republished (retry.Nack is refused at construction), and the backoff is waited
// by the consumer itself before the republish, holding that worker.
//
// # Concurrency and lifecycle
//
// [WithConcurrency] handles up to n messages at once while keeping messages of one key (or
// ordering key) in order. [Consumer.Close] stops receiving, drains in-flight messages within
// [WithCloseTimeout], closes the producers and the subscription it created (never the
// client, never a consumer passed to [WrapConsumer]) and waits for its goroutines.
//
// # Logging and observation
//
// [WithLogger] injects a *zap.Logger (default: nop); give the client the same logger with
// [NewClientLogger]. Every drop is logged at WARN and reported as an [Event]. [WithHooks]
// gives a consumer, a publisher or the connector its [Hooks], the one hook mechanism: an
// Event function receives every step and settlement of a delivery (received, handled with
// latency, failed, poison, gate-rejected, unknown URN, routing mismatch, truncated; acked,
// retried, dead-lettered, dropped, nacked) and the failures outside one ([EventError]).
//
// # Handler outcomes and middleware
//
// A handler returns nil (ack), an error (a failed delivery: retried while deliveries are
// left, then dead-lettered), [DeadLetter](err) (dead-letter now with reason failed, no
// retries: a failure no retry can fix) or [RetryAfter](d, err) (failed; the retry waits d
// instead of the policy's backoff). A Handler hook ([Hooks]) wraps every handler; the
// first given is the outermost, and each sees the context, the envelope, the message and
// the outcome on the way back. Idempotency and payload validation are written as Handler
// hooks (packages idempotency and schema).
//
// A Delivery hook opens a context per delivery before the gate (a tracing span, say) and
// receives its settlement; the context it is given names the consumer ([ConsumerInfoFrom]),
// and the one it returns reaches the handler, the settlement writes and the
// [Event.Context] of the delivery's events. A Publish hook is its publishing twin: it sees
// every send of a Publisher and every retry or dead-letter write of a consumer. Package
// bqotel is all three.
//
// # Exactly-once settlement
//
// [WithTransactions] settles each delivery in one Pulsar transaction: the acknowledgement
// of the original, the retry republish or dead-letter copy, and what the handler publishes
// through a [Publisher] with its ctx (which carries the transaction) are committed
// together. A failed handler's transaction is aborted, and its settlement runs in a fresh
// one. The client needs ClientOptions.EnableTransaction and the broker its transaction
// coordinator; otherwise [NewConsumer] fails with an error matching [ErrTransactions]. The
// handler may run again after an abort. With pulsar-client-go v0.21.0 (as with v0.19.0),
// Apache Pulsar still delivers what an aborted transaction published (the client leaves the
// transaction id out of the message's metadata).
//
// # Health
//
// [Consumer.Health] is live until the consumer is closed or its Pulsar consumer fails for
// good, and ready while its last receive, acknowledgement and settlement write (retry
// republish, dead-letter write) succeeded; Reasons name what failed. [Consumer.InFlight]
// and [Publisher.Pending] count the work in progress.
//
// A consumer that [NewConsumer] subscribed subscribes again, on its own, when the broker no
// longer holds it ([ErrStranded]) and when pulsar-client-go gave it up after a reconnection
// the broker refused for good, such as with ConsumerBusy ([ErrConsumerLost]); each is
// reported as an [EventError] and in Health until the new subscription is in place.
//
// # The binding's pure functions
//
// The consumer and the conformance runner share these functions, so that what the suite
// checks is what runs in production:
//
//   - [ProjectProperties]: the six bq-* message properties of an envelope.
//   - [GateVerdict]: the bq-schema-version gate, applied before the payload is decoded.
//     Absent or blank (the six ASCII blank characters only) goes on; exactly "1" goes on;
//     anything else is rejected untrimmed.
//   - [Reconcile]: attempts = max(valid bq-attempts (ASCII digits only, at most
//     2147483647), else the body's attempts; Pulsar's
//     0-based redelivery count), and the counted delivery number.
//
// # New subscriptions
//
// [NewConsumer] creates a subscription that does not exist yet at the earliest message the
// topic holds ([WithInitialPosition] says otherwise), so a job published before the first
// worker subscribed is not skipped; pulsar-client-go's own default is Latest. An existing
// subscription keeps its cursor.
//
// # One engine
//
// Run, Next and the messaging connector's Source (package pulsar/connector) are three
// fronts on one unexported delivery engine: the same receive (one backoff, one in-flight
// bound), the same admission (gate, classification, reconciliation, routing) and the same
// settlement (ack, retry, dead letter, nack after a failed write), so the same input is
// settled the same way by all three. The Source is demand and failure strategies over a
// Consumer in the pull style; the seam it needs (its own settler, no schema gate, poison
// delivered to its codec) and the one outgoing-message builder behind the Publisher and
// the connector's Sink (exactly the six bq-* properties, the caller's headers where they
// do not clash, and bq-delay only for a real delay) are lent to it through an internal
// package, outside this package's API.
//
// The babelqueue-pulsar connector of the messaging runtime, with its reactive source and
// sink and the "babelqueue" codec, is package
// github.com/babelqueue/babelqueue-go-pulsar/pulsar/connector.
//
// # Deviations from the architecture sketch
//
//   - Hooks: one struct of optional functions ([Hooks], in the manner of
//     net/http/httptrace.ClientTrace) in place of separate error, observer, middleware,
//     delivery and publish hooks, so that new fields and event kinds can be added without
//     breaking callers. The error hook's reports are events, with the envelope and the
//     message: a failure is an [Event] whose Err is set.
//   - [HandleUnknown] replaces the sketch's OnUnknownURN hook: a handler for the URNs
//     without one.
//   - The attempts parser is not exported: [Reconcile] applies it.
//   - [Publisher.PublishAsync] takes a callback instead of returning a promise.
//   - [WithQueue], [WithLogger], [WithCloseTimeout] and [WithHooks] are accepted by more than one
//     constructor or call; each returns a named type implementing the option interfaces it
//     applies to ([QueueOption], [CommonOption]).
//   - The handler receives the envelope shared with the settlement that follows; it must not
//     modify it.
//   - A poison copy has no envelope to project properties from: it keeps the original
//     properties, with bq-attempts set to the counted deliveries.
//   - The producers the consumer creates for retries and dead letters batch with batches of
//     one message (not DisableBatching): pulsar-client-go v0.21.0's unbatched send path
//     (unchanged since v0.19.0) races with its own reconnect logic, which the race detector
//     reports when a connection drops. A producer whose send failed is closed and replaced
//     on the next settlement.
//   - Retries and dead letters are at least once: when a connection drops after the copy was
//     written but before the original's ack reached the broker, the original is delivered
//     again and may be retried or dead-lettered a second time (same meta.id).
package pulsar
