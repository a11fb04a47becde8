// Package inmemory is the in-memory connector of the messaging runtime
// (connector name "in-memory"): tests, and applications testing their
// stages, feed incoming channels from code and inspect what reached outgoing
// channels, with the settlement of every message recorded.
//
//	conn := inmemory.New()
//	rt := messaging.New(cfg, messaging.WithConnector(conn))
//	// mp.messaging.incoming.orders.connector=in-memory
//	conn.Source("orders").Send([]byte(`{"id":"1"}`))
//	...
//	conn.Source("orders").WaitSettled(ctx, 1)
//
// # Attributes
//
//   - max-inflight (incoming, int, default 256): delivered but unsettled
//     messages at most; the source delivers no more until one settles.
//   - auto-ack (outgoing, bool, default true): the sink acks every message
//     on receipt; false leaves settlement to the test (Sink.Messages), and
//     Close nacks what is still unsettled with messaging.ErrClosed.
//   - window (outgoing, int, default 16): what the sink requests upstream,
//     topped up at 75% consumed.
//
// # Building blocks
//
// The connector is written on the messaging building blocks, as a proof
// that a connector needs no hand-written Reactive Streams: a Source is a
// messaging.NewPullSource whose pull function takes the queued messages,
// with a messaging.WithTryPull function taking one without waiting
// (demand, max-inflight, cancellation, Close and health come from the
// block), a Sink a messaging.NewFuncSink whose send function records the
// message, declared messaging.WithInlineSend because recording never
// blocks. Both pass the Reactive Streams TCK (tck_test.go).
//
// # Health
//
// A channel end is started once subscribed, ready until Close, and live
// until Source.Fail or an OnError, and until its stream completes
// (Source.Complete once the queue was delivered, or an OnComplete reaching
// the sink): a completed connector channel no longer moves messages.
//
// # Goroutines
//
// A subscribed source runs one goroutine that waits for the queue when it
// is empty (it ends with the subscription); while the queue holds messages,
// they are delivered on the goroutine that requested them (typically the
// worker of the stage reading the channel). A sink records and acks on the
// goroutine that delivers to it and runs none of its own. Delivery is
// asynchronous all the same: wait with Sink.Wait and Source.WaitSettled.
package inmemory
