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
// # Goroutines
//
// None: sources deliver on the goroutine that sends or requests.
package inmemory
