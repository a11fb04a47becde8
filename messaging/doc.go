// Package messaging is the broker-neutral reactive messaging runtime of
// babelqueue-go-pulsar, after MicroProfile Reactive Messaging: messages with
// typed metadata and settle-once acknowledgement, stages registered with
// generic functions on named (optionally typed) channels, emitters,
// connectors configured by mp.messaging.* keys, health and lifecycle.
//
//	package main
//
//	import (
//		"context"
//		"log"
//		"os/signal"
//		"strings"
//		"syscall"
//
//		"github.com/babelqueue/babelqueue-go-pulsar/messaging"
//		"github.com/babelqueue/babelqueue-go-pulsar/messaging/inmemory"
//	)
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
//		defer stop()
//		// mp.messaging.incoming.orders-in.connector=in-memory, codec=string; same for outgoing invoices-out
//		cfg, err := messaging.LoadConfig(
//			messaging.Optional(messaging.FromPropertiesFile("application.properties")),
//			messaging.FromEnv())
//		if err != nil {
//			log.Fatal(err)
//		}
//		rt := messaging.New(cfg, messaging.WithConnector(inmemory.New()))
//		messaging.Process(rt, "orders-in", "invoices-out", func(_ context.Context, order string) (string, error) {
//			return "invoice for " + strings.ToUpper(order), nil
//		})
//		if err := rt.Run(ctx); err != nil { // Start, then Shutdown when ctx ends
//			log.Fatal(err)
//		}
//	}
//
// ExampleProcess, ExampleEmitter and ExampleNackWith are runnable versions.
//
// It imports reactive, the standard library and zap only; connectors (such as
// package pulsar's babelqueue-pulsar, or [inmemory] for tests) plug in through
// the connector SPI (see Writing a connector).
//
// # Stages and acknowledgement
//
// Every method shape of the MicroProfile Reactive Messaging signature tables
// has a registration (default ack; allowed strategies):
//
//	void m(I), CompletionStage<?> m(I)            Consume            Post; None, Pre, Post
//	CompletionStage<?> m(Message<I>)              ConsumeMessage     Manual; None, Pre, Post, Manual
//	Subscriber<Message<I>> m()                    Subscribe          Manual; None, Pre, Post, Manual
//	Subscriber<I> m()                             SubscribePayloads  Post; None, Pre, Post
//	O m(I), CompletionStage<O> m(I)               Process            Post; None, Pre, Post
//	Message<O> m(Message<I>)                      ProcessMessage     Manual; None, Pre, Manual
//	Publisher<O> m(I)                             FlatMap            Pre; None, Pre
//	Publisher<Message<O>> m(Message<I>)           FlatMapMessage     Manual; None, Pre, Manual
//	Publisher<Message<O>> m(Publisher<Message<I>>) Transform        Manual; None, Pre, Manual
//	Publisher<O> m(Publisher<I>), Processor<I,O>  TransformPayloads  Pre; None, Pre
//	Publisher<Message<O>> m()                     Produce            no ack strategy
//	Publisher<O> m()                              ProducePayloads    no ack strategy
//	O m()                                         Generate           no ack strategy
//	Message<O> m()                                GenerateMessage    no ack strategy
//	@Channel Publisher<Message<I>>                Channel            Manual
//	@Channel Emitter<T>                           NewEmitter         —
//
// Any other WithAck is an InvalidAckStrategy problem at Start. The defaults
// follow MP RM 2.0: payload functions are settled by the runtime (Post by
// default: ack on success, nack with the returned error or panic), message
// functions by the user (Manual). With Post, a
// processor's output carries its input's settlement, so the input is acked
// when the output is acked downstream, and nacked when the function fails or
// the output is nacked. Return [NackWith] to pass nack options.
//
// A stage function's ctx is the runtime's, with the values of the message's
// own context in front when it carries a [ContextMetadata] (as MicroProfile's
// TracingMetadata carries an OpenTelemetry context): a connector's source
// attaches its delivery's, so the spans a stage starts nest under the
// consumer span. Its cancellation stays the runtime's ([MessageContext]).
//
// Typed channels: declare orders := ChannelOf[Order]("orders") once and
// register with the On functions (ProcessOn, ConsumeOn, NewEmitterOn, …): a
// payload type mismatch between two stages is then a compile error. The
// string forms serve names from configuration; Start checks the payload
// types of both ends of every channel either way.
//
// Every stage is a reactive.Processor or Subscriber built on reactive's Inlet
// and Outlet: a consumer requests its prefetch (default: its concurrency) and
// one more per finished invocation; a 1:1 processor holds at most
// min(downstream demand, prefetch) messages; user functions run on
// goroutines, at most WithConcurrency at a time, which exit when idle.
//
// # Assembly
//
// Start resolves the configuration and validates the whole graph before any
// connector object is created; every problem is reported in one
// [*AssemblyError] whose problems unwrap to the Err<Kind> sentinels.
// Connector channels carry Message[[]byte]; a codec
// (attribute "codec" or WithCodec; built-ins bytes, string, json) converts at
// the channel boundary. A decode failure nacks with ErrDecode and
// ToDeadLetter(); an encode failure nacks with ErrEncode.
//
// # Configuration
//
// Keys mp.messaging.incoming.<channel>.<attr>, mp.messaging.outgoing.<channel>.<attr>
// and mp.messaging.connector.<connector>.<attr>; sources FromMap (ordinal
// 400), FromEnv (300), FromPropertiesFile/FromProperties (100). A channel
// attribute beats a connector attribute whatever the ordinals; the longest
// registered connector name wins. Environment variables are resolved at
// Start against the known channel, connector and attribute names only; an
// ambiguous one is an error, an unresolved one a warning (an error with
// babelqueue.messaging.strict=true). Connectors receive only the attributes
// they declare for the channel's direction, plus the runtime's reserved ones:
// channel-name, connector, codec, enabled, health-enabled and, on outgoing
// channels, merge.
//
// # Lifecycle and health
//
// Shutdown: readiness goes down and emitters stop accepting; every entry of
// the graph (source, emitter, Produce, Generate) is cut, delivers what it
// holds and completes; the runtime waits until every message that entered
// from a source or an emitter is settled; then it cancels the stages, closes
// sinks, sources and connectors and waits for the stage goroutines. At the
// deadline the unsettled messages are nacked with ErrShutdown, then the user
// functions' context is cancelled, and Shutdown returns an error wrapping
// ctx.Err().
//
// Start returns once every channel started: its last subscriber saw
// OnSubscribe and, for connector channels, the connector's Health reports
// Started (polled with a 1–50 ms backoff within Start's ctx).
//
// Health reports started/ready/live per channel. Started: the channel's last
// subscriber saw OnSubscribe and its connector created its consumer or
// producer. Ready: started, no connection-class failure since the
// connector's last successful broker interaction, and Shutdown not begun.
// Live: no OnError, no Cancel outside Shutdown (by a Subscribe or Channel
// subscriber, a sink or a Transform function) and no fatal failure reported
// by the connector; a connector channel whose stream completed outside
// Shutdown is not live either (it moves no more messages), an internal one
// stays live. Run stops with ErrChannelFailed when a channel stops being
// live. The runtime verdict Started turns true when Start returned nil and
// every channel started, and then stays true. HealthHandler serves the
// MicroProfile Health JSON.
//
// # Writing a connector
//
// A connector is a named factory ([IncomingConnector], [OutgoingConnector])
// declaring the attributes it reads. Build its endpoints from the building
// blocks, not from the raw Reactive Streams interfaces:
//
//   - [NewPullSource](channel, pull) calls pull(ctx) once per unit of
//     demand on a goroutine of its own, bounds the unsettled messages
//     ([WithMaxInflight]), cancels ctx on Cancel and Close, completes on
//     io.EOF and fails on any other error; with [WithTryPull] a message
//     available at once is taken and delivered on the requesting goroutine
//     instead (no goroutine hand-off). [NewChanSource] reads a Go channel,
//     [NewSeqSource] an iter.Seq2.
//   - [NewFuncSink](channel, send) calls send(ctx, m) for every message with
//     bounded concurrency ([WithSendConcurrency]) within a request window
//     ([WithSinkWindow]), acks on nil and nacks with the error; a send that
//     never blocks can declare [WithInlineSend] and run on the delivering
//     goroutine.
//
// Both are a [Source] or [Sink] for T = []byte, answer Health by the rules
// above (their [EndpointHealth] takes connection failures:
// MarkConnectionFailed, MarkConnected) and pass the Reactive Streams TCK.
// Package [inmemory] is written on them. A connector implementing [Source]
// or [Sink] by hand records its health in an [EndpointHealth]: MarkStarted,
// MarkFailed for fatal failures, MarkCompleted on OnComplete, MarkClosed in
// Close. The optional capabilities [CodecProvider] and [ConnectorCloser] are
// found by type assertion.
//
// # Performance
//
// BenchmarkPipelineCPU sends small payloads from an in-memory source through
// Process (a copy) to an in-memory sink, Post ack chain and the in-memory
// connector's recording included, interleaved with a plain channel pipeline
// doing the same copy without acknowledgement; cpu-ns/msg is the process's
// user+system CPU time (getrusage) around the timed loop divided by the
// messages. Measured with
//
//	go test -run='^$' -bench=PipelineCPU -benchmem ./messaging/
//
// (four runs of -count=3, the ranges span all twelve) on 2 vCPU (AMD EPYC,
// a machine shared with other jobs, load average 5–10 during the runs: wall
// time depends on that load, CPU time much less):
//
//	                                    wall ns/msg  cpu-ns/msg   B/msg  allocs/msg
//	runtime, prefetch 1 (the default)   1500–4300    1100–1580     586   5
//	runtime, WithPrefetch(64)           1580–6000    1150–1670     615   5
//	channels                             150–1300     120–210       32   1
//
// The allocations per message are the in-memory connector's delivered
// message, the source's in-flight wrapper, the runtime's in-flight tracking
// wrapper, the Post output sharing the input's settlement, and the user
// function's copy (the bytes codec passes the output on as it is). While the
// source has messages queued, one goroutine carries a message all the way:
// the stage's worker emits its output (the in-memory sink records and acks
// inline), then requests the next message, which the source hands over on
// the same goroutine; goroutines wake only when the pipeline runs dry. What
// remains is the garbage collector (the benchmark keeps every message: the
// in-memory connector records them), locks and atomics of the demand and
// settlement bookkeeping, and the allocations. Against a broker round trip
// (milliseconds) the overhead is small.
//
// # Go-specific behaviour
//
//   - NewMessage's options are WithAckFunc and WithNackFunc: WithAck is the
//     stage option choosing an AckStrategy, and Go has no overloading.
//   - WithCodec returns a CodecOption usable both with New (registers the
//     codec) and as a StageOption (binds it to the stage's connector channel).
//   - ConfigSource.Properties returns an error too (a file may be unreadable).
//   - Attr returns an error wrapping ErrMissingAttribute for any absent
//     attribute, mandatory or not; use Lookup for optional ones.
//   - Run returns the Shutdown error (nil after a clean drain) when ctx ends.
//   - Start does not wait for channels read by Channel[T] (their subscriber
//     may come after Start); such a channel, and the runtime verdict Started,
//     turn true when that subscriber saw OnSubscribe. A channel not started
//     within Start's ctx fails Start with an error wrapping ErrNotStarted,
//     ctx.Err() and, for connector channels, ErrConnectorInit (as a plain
//     error, not an AssemblyError: the graph was valid).
//   - FlatMap and Transform ignore WithConcurrency; Pre acknowledgement in
//     FlatMap, Transform and Subscribe runs on the signalling goroutine.
//   - A stage function that ignores its ctx cannot be stopped (it is the
//     user's code). Shutdown still returns at its deadline, its error
//     counting the invocations still running; each keeps its goroutine until
//     the function returns, then that goroutine ends and the result is
//     discarded (the message was already nacked with ErrShutdown; outputs of
//     a stopped stage are dropped). [Runtime.Done] closes when the last one
//     returned.
//   - The BabelQueue envelope codec is not part of this package (it belongs to
//     the connector's CodecProvider).
package messaging
