// Package bqotel traces and measures BabelQueue consumers and publishers with
// OpenTelemetry: a producer span per message sent, a consumer span per delivery whose parent
// is the producer span, and counters, a histogram and gauges of the consume pipeline. It
// works through the hooks of package pulsar (pulsar.Hooks: its Delivery, Event and Publish
// functions), so package pulsar has no OpenTelemetry dependency and a program that does not
// import bqotel pays nothing for it.
//
//	tel, err := bqotel.New(bqotel.WithTracerProvider(tp), bqotel.WithMeterProvider(mp))
//	…
//	pub, err := pulsar.NewPublisher(client, topic, tel.PublisherOptions()...)
//	con, err := pulsar.NewConsumer(client, append(opts, tel.ConsumerOptions()...)...)
//	unregister, err := tel.RegisterConsumer("billing", con) // the in-flight gauge
//
// Without WithTracerProvider and WithMeterProvider the global providers are used. Anything
// else that takes hooks gets them from [Telemetry.Hooks]; for the messaging runtime's
// babelqueue-pulsar connector:
//
//	connector.New(connector.WithHooks(tel.Hooks()))
//
// (or SourceOptions.Hooks and SinkOptions.Hooks). A source's message carries its delivery's
// context (messaging.ContextMetadata), so a runtime stage's function gets the consumer
// span in its ctx and the spans it starts nest under it; the sink starts its producer span
// from the message's context, so it is the child of the consumer span, or of the stage's
// span when the stage put its own ctx on the message it returned
// (messaging.WithMetadataItems(m, messaging.ContextMetadata{Context: ctx})). The sink runs
// its publish hooks before its own tracing-enabled derivation, so the producer span's
// traceparent is the one sent, and downstream consumer spans are its children.
//
// # Producer spans
//
// Every message a publisher sends gets a span of kind PRODUCER named "send <topic>", the
// child of the span in the context given to Publish, with the messaging semantic
// conventions' attributes: messaging.system=pulsar, messaging.operation.name=send,
// messaging.operation.type=send, messaging.destination.name (the topic, without a
// "-partition-N" suffix, which goes to messaging.destination.partition.id, as does the
// partition the client picked for a Publisher's partitioned topic, at the receipt),
// messaging.message.id (the id Pulsar assigned, set at the receipt), babelqueue.message.id
// (the envelope's meta.id), messaging.message.body.size, and babelqueue.urn and
// babelqueue.trace_id. Its context is injected into the message
// properties (traceparent and tracestate with the default W3C propagator; see
// [WithPropagator]). A property the caller already set, with pulsar.WithHeaders say, is
// never overwritten: an explicit traceparent wins, and the consumer span is then the child
// of the span it names. The span ends with the broker's receipt; a failed send sets the
// status to Error and error.type.
//
// # Consumer spans
//
// Every delivery gets a span of kind CONSUMER named "process <topic>", opened before the
// schema-version gate and ended when the delivery is settled. Its parent is the span the
// message's traceparent names (the producer span), which it is also linked to
// (babelqueue.link.source=traceparent). A message without a usable traceparent joins the
// trace its trace_id names, as the contract asks and by the Go core's rule ([TraceIDFrom]):
// a trace_id of 32 hex digits once its hyphens are removed (a UUID) names the trace of those
// 16 bytes, any other the trace of the first 16 bytes of its SHA-256. The span is the child
// of a remote parent in that trace whose span id is the first 8 bytes of the SHA-256 of
// "babelqueue-span:"+trace_id (the Go core's, so that every SDK names the same parent; no
// span of that id is recorded), and it is linked to that parent with
// babelqueue.link.source=trace_id and babelqueue.trace_id. For a UUID it is the trace of the
// connector sink's derived traceparent. Only a message without a trace_id gets a root span.
// A consumer run with a context that carries a span of its own (a worker's) links every
// consumer span to it (babelqueue.link.source=ambient); it is never the parent.
//
// # trace_id continues the active trace
//
// In a program that imports this package, a pulsar.Publisher called inside an active span
// (with or without this package's hooks) writes that span's trace id as the envelope's
// trace_id, UUID-shaped (4bf92f3577b34da6a3ce929d0e0e4736 becomes
// 4bf92f35-77b3-4da6-a3ce-929d0e0e4736), so that a peer SDK that reads only trace_id lands in
// the producer's trace; outside a span it stays a random UUID, and pulsar.WithTraceID wins.
// Package pulsar reads no span itself (it has no OpenTelemetry dependency): importing this
// package turns the rule on.
//
// Attributes: messaging.system, messaging.operation.name and .type (process),
// messaging.destination.name (and .partition.id), messaging.destination.subscription.name,
// messaging.message.id (the id Pulsar assigned), babelqueue.message.id (meta.id, from the
// bq-message-id property), messaging.message.body.size,
// babelqueue.urn, babelqueue.trace_id, babelqueue.redelivery_count (Pulsar's count), and
// at settlement babelqueue.attempt (the counted delivery, 1 for the first),
// babelqueue.outcome (acked, retried, dead_lettered, dropped, nacked) and
// babelqueue.dead_letter.reason. Every outcome but acked sets the status to Error (with the
// failure's message) and error.type (the failure's Go type). A handler failure is recorded
// as an "exception" event; the span events babelqueue.retry, babelqueue.dead_letter,
// babelqueue.dropped, babelqueue.poison, babelqueue.gate_rejected and
// babelqueue.unknown_urn and babelqueue.dead_letter.truncated say what the pipeline did.
//
// The handler's context carries the consumer span, so the spans the handler starts are its
// children. Retry and dead-letter copies keep the original properties, traceparent
// included: each redelivery's consumer span is another child of the same producer span. A
// message moved back by dlq.Redrive keeps them too, so its new deliveries join the
// original trace. [Telemetry.Redrive] runs dlq.Redrive inside a new span ("redrive
// <dead-letter topic>") linked to each moved message's original producer span.
//
// # Metrics
//
// The instruments, with the attributes of their data points (all have messaging.system,
// and server.address and server.port with [WithServiceURL]):
//
//	name                                  kind       unit        attributes
//	messaging.client.sent.messages        counter    {message}   destination, operation.name=send, babelqueue.outcome (ok, error), error.type on failure
//	messaging.client.consumed.messages    counter    {message}   destination, subscription, operation.name=process
//	messaging.client.operation.duration   histogram  s           destination, operation.name=send, babelqueue.outcome (ok, error), error.type on failure
//	messaging.process.duration            histogram  s           destination, subscription, babelqueue.outcome (acked, retried, dead_lettered, dropped, nacked), error.type unless acked
//	babelqueue.consumer.handled           counter    {message}   destination, subscription
//	babelqueue.consumer.failed            counter    {message}   destination, subscription
//	babelqueue.consumer.retried           counter    {message}   destination, subscription
//	babelqueue.consumer.dead_lettered     counter    {message}   destination, subscription, babelqueue.dead_letter.reason
//	babelqueue.consumer.dropped           counter    {message}   destination, subscription, babelqueue.dead_letter.reason
//	babelqueue.consumer.poison            counter    {message}   destination, subscription
//	babelqueue.consumer.gate_rejected     counter    {message}   destination, subscription
//	babelqueue.consumer.unknown_urn       counter    {message}   destination, subscription
//	babelqueue.consumer.truncated         counter    {message}   destination, subscription (dead-letter copies cut to fit)
//	babelqueue.consumer.settled           counter    {delivery}  destination, subscription, babelqueue.outcome (acked, retried, dead_lettered, dropped, nacked)
//	babelqueue.consumer.in_flight         gauge      {message}   subscription (consumers given to RegisterConsumer)
//	babelqueue.publisher.pending          gauge      {message}   destination (publishers given to RegisterPublisher)
//
// destination is messaging.destination.name (the topic without its partition suffix) and
// subscription messaging.destination.subscription.name. Every attribute is bounded by the
// application's topics and subscriptions; the routing URN (babelqueue.urn) is added only
// with [WithURNMetricAttribute] (on messaging.client.consumed.messages it is the bq-job
// property's URN, the only one known before decoding). messaging.process.duration is a
// delivery's consumer span's duration, from its receipt to its settlement (the span's start
// and end use the same two instants), not the handler's alone;
// messaging.client.operation.duration is a send's, from the publish to the broker's receipt.
// Both histograms use the conventions' recommended buckets, 5 ms to 10 s. With the
// OpenTelemetry Prometheus exporter the names become messaging_client_sent_messages_total,
// messaging_process_duration_seconds, babelqueue_consumer_retried_total and so on.
//
// The counters add up per message: a message whose handler fails on each of three
// deliveries (WithMaxAttempts(3), retries by republish) counts consumed 3, failed 3,
// retried 2, dead_lettered 1 and settled 3, and sent 4 when its publisher is instrumented
// too (the publish, the two republishes and the dead-letter copy).
//
// # Server, subscription, partition and the consumer's own writes
//
// With [WithServiceURL] (the client's service URL, which the hooks are not given) every span
// and metric point carries server.address and server.port, as the conventions ask when the
// address is available; without it they are left out. The consumer span starts with
// messaging.destination.subscription.name (the Delivery hook's context names the consumer,
// pulsar.ConsumerInfoFrom), so a sampler sees it. A producer span of a partitioned topic
// gets messaging.destination.partition.id at the receipt, which names the partition the
// client picked (a Publisher asks the broker once whether its topic is partitioned). The
// consumer's own writes, its retry republishes and dead-letter copies, are sends: each gets
// a producer span, the child of the consumer span of the delivery that wrote it, and is
// counted in messaging.client.sent.messages and messaging.client.operation.duration under
// its destination (the queue's topic, or its dead-letter topic). The copy keeps the
// original's traceparent, so the redelivery's consumer span is still the child of the
// original producer span.
//
// # Cost
//
// Without bqotel a consumer or publisher runs no hook (the handler's clock is read only
// when an Event hook is set), so a program that does not use it pays nothing per message.
// With it, each delivery and each send starts and ends a span and records a few
// measurements over cached attribute sets. Three benchmarks of this package measure the
// hooks' own work, without broker or client: BenchmarkHooksPerDelivery (a handled and acked
// delivery: the Delivery hook, two events and the settlement), BenchmarkHooksPerPublish (the
// Publish hook and its outcome) and BenchmarkSDKFloor (what the OpenTelemetry SDK alone costs
// for one span with a consumer span's 12 start and 3 settlement attributes, and four
// measurements), each with every span sampled and recorded but not exported, and with the
// sampler saying no. On an idle 2-core machine (go test -run '^$' -bench 'HooksPer|SDKFloor'
// -benchmem -count=3, two runs) they gave:
//
//	                         sampled                          sampler says no
//	delivery, these hooks    6.8–12.4 µs  5.2 kB  20 allocs   4.9–6.7 µs  2.7 kB  17 allocs
//	publish, these hooks     5.8–7.8 µs   3.8 kB  15 allocs   3.4–5.2 µs  1.8 kB  13 allocs
//	the SDK's floor          4.1–12.2 µs  4.1 kB   5 allocs   1.5–2.8 µs  1.0 kB   3 allocs
//
// (before the allocations were cut: 34 and 31 allocations a delivery, 20 and 18 a publish).
// make bench-compare sets the consumer and the sync publisher with bqotel against the same
// ones without it, in one process, repeat by repeat; on the embedded broker (whose decoding
// of the traceparent property is in the figures too) it gave 11.8 µs [9.5–13.0] of CPU and
// 24 allocations more a delivery sampled, 7.0 µs [6.0–10.0] with the sampler saying no, and
// 17 µs [11–28] more a sync publish.
//
// The targets of 2 µs a delivery or a publish sampled, and 0.3 µs with the sampler saying
// no, are out of reach with the OpenTelemetry SDK on this machine: the SDK's floor alone is
// above both. A profile of BenchmarkHooksPerDelivery puts 19 % of the time in the SDK's
// Start, 16 % in its SetAttributes (10 % growing the span's attribute slice a second time
// for the settlement's attributes), 16 % in the four measurements, 6 % in the W3C
// propagator's Extract and about 30 % in allocation and garbage collection; what is this
// package's own (the attributes, the options, the delivery's state) is under a fifth. A
// sampler that says no still sees every start attribute, as the conventions ask, so they
// are built either way. An exporter adds its own cost on top.
package bqotel
