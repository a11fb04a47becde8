// Package leaktest is the module's goroutine-leak check for tests: go.uber.org/goleak with
// the one shared list of pulsar-client-go goroutines known to outlive Client.Close. Every
// package whose tests start goroutines calls [VerifyTestMain] from its TestMain, so a leak of
// ours fails the run while the client's known ones do not.
//
// It is imported by _test.go files only.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// clientGoroutines are pulsar-client-go goroutines that outlive Client.Close by design or by
// bug, against a real broker as well as the embedded one. Each was seen with v0.19.0 and
// checked against the code of v0.21.0, the version go.mod requires.
var clientGoroutines = [...]string{
	// One per producer: it notices Close only when its SendTimeout timer (30 s by default)
	// fires.
	"github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages",
	// One per incomplete chunked message: it waits for ExpireTimeOfIncompleteChunk (60 s by
	// default).
	"github.com/apache/pulsar-client-go/pulsar.(*chunkedMsgCtxMap).discardChunkIfExpire",
	// Every successful SUBSCRIBE (grabConn) signals "connected" to the consumer's dispatcher
	// from a new goroutine. In v0.19.0 the channel was unbuffered, so a consumer closed
	// before its dispatcher took the signal left the goroutine blocked for ever. v0.21.0
	// gives the channel room for one signal, which ends that common case, but a second
	// signal while the first is still unread blocks until the dispatcher reads, and never
	// returns if the consumer closes first. That is rare but still possible: a partition of a
	// partitioned consumer that reconnects before its dispatcher is started (v0.21.0 starts
	// the dispatchers only once every partition has subscribed) and is then closed because
	// another partition failed to subscribe.
	"github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).grabConn.func1",
}

// TxnClientGoroutines are the goroutines a client with EnableTransaction leaves behind:
// Client.Close never closes its transaction coordinator client (so in v0.19.0 and still in
// v0.21.0, whose Client.Close and transaction code are unchanged), whose handler (one per
// coordinator) sees its connection closed by the pool and connects again, outside the closed
// pool; the handler's loop and that connection's loops outlive the client. Only the packages
// whose tests create such a client ignore them (VerifyTestMain's extra), so that elsewhere a
// leaked connection still fails the run.
var TxnClientGoroutines = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*transactionHandler).runEventsLoop"),
	// The same handler once its broker went away (an embedded broker closed at the end of its
	// test): it retries the coordinator's lookup for ever, since nothing marks it closed.
	goleak.IgnoreAnyFunction("github.com/apache/pulsar-client-go/pulsar.(*transactionHandler).reconnectToBroker"),
	goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*transactionHandler).grabConn.func1"),
	goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar/internal.(*connection).run"),
	goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar/internal.(*connection).runPingCheck"),
	goleak.IgnoreAnyFunction("github.com/apache/pulsar-client-go/pulsar/internal.(*connectionReader).readFromConnection"),
	// Each transaction's timer, which marks it timed out once its timeout passed, whether or
	// not it ended before.
	goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.newTransaction.func1"),
}

// Options returns the goleak options that ignore the client's known goroutines, followed by
// extra.
func Options(extra ...goleak.Option) []goleak.Option {
	opts := make([]goleak.Option, 0, len(clientGoroutines)+len(extra))
	for _, f := range clientGoroutines {
		opts = append(opts, goleak.IgnoreTopFunction(f))
	}
	return append(opts, extra...)
}

// VerifyTestMain runs the package's tests, then fails the run if a goroutine other than the
// client's known ones (and those extra ignores) is still running.
func VerifyTestMain(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, Options(extra...)...)
}
