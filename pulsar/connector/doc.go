// Package connector is the babelqueue-pulsar connector of the messaging runtime (package
// messaging): Pulsar subscriptions as incoming channels, Pulsar producers as outgoing
// channels, and the "babelqueue" envelope codec, configured by mp.messaging.* keys.
//
// Package pulsar (imported as bqpulsar) is the plain binding; this package maps channel
// attributes to its options and adapts its endpoints to the runtime:
//
//	conn, err := connector.New(connector.WithLogger(logger))
//	if err != nil { … }
//	rt := messaging.New(cfg, messaging.WithConnector(conn))
//
//	mp.messaging.incoming.orders-in.connector=babelqueue-pulsar
//	mp.messaging.incoming.orders-in.topic=persistent://public/default/orders
//	mp.messaging.incoming.orders-in.subscriptionName=invoicing
//	mp.messaging.outgoing.invoices-out.connector=babelqueue-pulsar
//	mp.messaging.outgoing.invoices-out.codec=babelqueue
//
// # Options
//
// [New] takes [Option]s: [WithClient] (one client for every channel, never closed by the
// connector), [WithClientOptions] (what attributes cannot express: an authentication
// provider, a TLS configuration…), [WithConsumerCustomizer] and [WithProducerCustomizer]
// (per channel, applied after the attributes), [WithLogger] and [WithDeadLetterHook]. An
// option refuses a bad value (a nil logger, client, hook or customizer, a blank channel
// name) and New returns that error, which wraps bqpulsar.ErrInvalidOption.
//
// # Attributes
//
// [Connector.Attributes] declares the attributes with their types, defaults and
// directions ([AttrServiceURL] and the other Attr* constants): serviceUrl, topic (an
// incoming channel accepts a comma-separated list; default: the channel name),
// authPlugin (none, token, token-file, oauth2, tls) with authParams,
// tlsTrustCertsFilePath, tlsAllowInsecureConnection, tlsHostnameVerificationEnable,
// operationTimeoutMs, connectionTimeoutMs and tracing-enabled on both directions;
// queue (which names the dead-letter topic, <queue>.dlq), subscriptionName,
// subscriptionType, subscriptionInitialPosition, receiverQueueSize,
// zero-queue, max-inflight, complete-at-end, ack-strategy (ack, cumulative),
// ackTimeoutMillis, failure-strategy (babelqueue, nack, fail, ignore, continue,
// reconsume-later), max-attempts, retry-strategy (republish, nack), retry-delay,
// dead-letter-enabled, dead-letter-topic, negativeAck.redeliveryDelay,
// negativeAck.redeliveryBackoff (min ms, max ms, multiplier), reconsumeLater.delay,
// deadLetterPolicy.* (the client's native DLQ policy), batchIndexAckEnabled and
// transactions on incoming channels; max-inflight-messages (the send window), waitForWriteCompletion,
// producerName, sendTimeoutMs, maxPendingMessages, batchingEnabled,
// batchingMaxPublishDelayMicros, batchingMaxMessages and compressionType on outgoing
// channels. sendTimeoutMs also bounds the sends of an incoming channel's retry and
// dead-letter producers.
//
// Every fault fails Start with messaging.ErrInvalidAttribute naming the channel. The
// connector judges what only the attributes show: a value of the wrong type or outside
// its enumeration, a count below 1 (max-inflight, max-attempts, receiverQueueSize,
// max-inflight-messages, maxPendingMessages, deadLetterPolicy.maxRedeliverCount), a
// negative ackTimeoutMillis, a malformed negativeAck.redeliveryBackoff, an invalid
// queue (even one that dead-letter-topic or dead-letter-enabled=false leaves unused), an outgoing channel with more than one topic, an unknown authentication plugin,
// and deadLetterPolicy.* with failure-strategy=babelqueue (which dead-letters itself).
// Combinations of options are judged by the constructors, NewSource and
// [NewSink], and their errors (which also wrap bqpulsar.ErrInvalidOption) are reported
// the same way: retry-strategy=nack needs a Shared or Key_Shared subscription (the
// broker counts no redeliveries on Exclusive and Failover, so the message would loop),
// ack-strategy=cumulative is refused on Shared and Key_Shared subscriptions and with
// failure-strategy=reconsume-later (the client acknowledges the original itself once the
// retry copy is written, and a cumulative acknowledgement could cover it before),
// failure-strategy=continue needs ackTimeoutMillis > 0, and reconsume-later cannot be
// combined with zero-queue.
//
// # Incoming channels
//
// An incoming channel is a Source: a unicast reactive publisher of
// messaging.Message[[]byte] that receives only against demand and while fewer than
// max-inflight messages are unsettled, with IncomingMetadata on each message
// (the reconciled attempts and the routing URN). A nack is settled by the failure
// strategy: babelqueue retries (by republish, or by nack) until max-attempts deliveries
// and then writes the annotated copy to the dead-letter topic ("<queue>.dlq" by default;
// a failed write nacks, never acks); nack leaves redelivery to the broker; fail fails
// the stream; ignore acknowledges; continue frees the in-flight slot at once and lets
// the ack timeout negatively acknowledge the message, so that the broker redelivers it;
// reconsume-later uses the client's retry topic. A payload that is not an envelope is
// retried and dead-lettered byte for byte with its properties (bq-attempts set); a body
// the babelqueue codec refuses gets the poison copy ({"raw":…,"dead_letter":…}) at once.
// The properties a nack names (messaging.WithNackProperties) go on the republished and the
// dead-letter copies alike, except the binding's own bq-* properties, which the
// settlement alone writes. Under ack-strategy=cumulative a nacked message makes the broker of the Exclusive or
// Failover subscription redeliver every unacknowledged message after it, so messages
// settled after it but not yet covered by a cumulative acknowledgement are delivered
// again (at least once).
//
// With zero-queue each receive asks the broker for one message. pulsar-client-go v0.21.0,
// as v0.19.0 before it, notifies a consumer's dispatcher that it is connected from a
// separate goroutine (v0.21.0's change that registers a consumer before its SUBSCRIBE,
// apache/pulsar-client-go#1476, left that notice as it was), and a dispatcher that takes
// the notice after a message has already arrived discards what it had queued (for a batch,
// the rest of the batch). A zero-queue consumer asks for its message on receive, which can
// precede the notice at subscribe time (seen in this package's tests under load) and, by
// the same code, after a reconnection, so a message waiting in the topic at that moment can
// be discarded on the client: it is not lost (the broker holds it unacknowledged and
// redelivers it once the consumer reconnects or closes), but the channel waits until then.
// The other consumers ask for messages only on the notice and are not affected.
//
// # Transactions
//
// transactions=30s on an incoming channel settles each of its messages in a Pulsar
// transaction of that timeout (bqpulsar.WithTransactions; [SourceOptions].Transactions):
// the acknowledgement, or the retry republish or dead-letter copy together with the
// acknowledgement. An outgoing channel that sends a message derived from such a message
// (one that keeps its metadata, as a Process stage's output does) sends it inside the same
// transaction, so the stage's output and the input's acknowledgement are committed together:
// until the input is acknowledged the output is not visible, and a nacked input aborts the
// transaction. The acknowledgement must therefore follow the output's write (the default
// post-processing acknowledgement): an input acknowledged first commits without it, and the
// sink's send then fails on the ended transaction and nacks the output. The transaction
// must end within its timeout, the stage's work and the sink's write included. The
// connector creates the channel's client with ClientOptions.EnableTransaction (a client
// given with [WithClient] must have it); a broker without its transaction coordinator makes
// Start fail with an error matching bqpulsar.ErrTransactions that names
// transactionCoordinatorEnabled. transactions cannot be combined with
// ack-strategy=cumulative, failure-strategy=continue or failure-strategy=reconsume-later,
// whose acknowledgements the transaction cannot hold. What an aborted transaction sent is
// still delivered by Apache Pulsar to consumers of the Go client's writes
// (apache/pulsar-client-go#1498: see bqpulsar.WithTransactions); a stage's output is written
// only when the stage succeeded, so a failed stage sends nothing.
//
// # Outgoing channels
//
// An outgoing channel is a [Sink]: a Pulsar producer as a reactive subscriber of
// messaging.Message[[]byte]. It requests its send window (max-inflight-messages), sends
// with SendAsync without ever blocking, acks each message on the broker's receipt (or on
// enqueue with waitForWriteCompletion=false) or nacks it with the send error, and
// replenishes demand as sends complete, so at most the window of sends is pending. A
// fatal producer error (closed, fenced, topic terminated, not authorised) cancels the
// upstream and makes the channel not live. [OutgoingMetadata] on a message sets its key,
// ordering key, properties, event time, delay and replication; a delay also writes the
// bq-delay property (Pulsar honours delays on Shared and Key_Shared subscriptions only).
// On codec=babelqueue channels the sink adds the bq-* properties of the envelope
// payload, which win over metadata properties.
//
// With tracing-enabled (default true) the sink writes a W3C traceparent property
// ([PropTraceparent]): one in the outgoing metadata's properties is kept; otherwise it is
// derived from the trace id (the envelope's trace_id on codec=babelqueue channels, else a
// bq-trace-id property) when that is a UUID, by [Traceparent]: "00-<the UUID's 32 hex
// digits>-<16 random hex digits>-01". There is no OpenTelemetry dependency, so no span
// is started and the parent-id names no recorded span; other trace ids get no
// traceparent. With tracing-enabled=false no traceparent is written; bq-trace-id stays,
// as one of the bq-* properties of envelopes. Incoming channels do not read traceparent.
//
// The sink passes the Reactive Streams TCK on the embedded broker (the blackbox and
// whitebox subscriber verifications).
//
// # Codec, health and clients
//
// [EnvelopeCodec] is the "babelqueue" codec: *envelope.Envelope (or envelope.Envelope)
// payloads; a body that is not an acceptable envelope fails decoding with
// envelope.ErrPoison, so the runtime dead-letters it at once. Each channel reports its
// health: started once its consumer or producer exists, ready while the last broker
// interaction succeeded, live until a fatal failure (failure-strategy=fail, a consumer or
// producer closed for good). The connector creates one client per distinct client
// configuration and closes them in [Connector.Close], never one given with [WithClient].
// Subscribe and CreateProducer take no context in pulsar-client-go: creating a channel is
// bounded by the client's operation timeout, not by Start's ctx.
package connector
