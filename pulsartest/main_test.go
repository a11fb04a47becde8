package pulsartest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

// TestMain checks that no goroutine outlives the tests. Every broker goroutine is checked;
// the ignored ones belong to pulsar-client-go (the shared list of leaktest, plus the ones
// below, seen with v0.19.0 and still so in v0.21.0, whose code for them is unchanged).
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m, append([]goleak.Option{
		// After Consumer.Unsubscribe the partition consumer is marked closed, so Close returns
		// early and never stops these three (scenario 15).
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).dispatcher"),
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).runEventsLoop"),
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.newAckGroupingTracker.func1"),
		// A producer the client closes itself after ProducerFenced (doClose) never cancels its context, so
		// the reconnect loop outlives Producer.Close (access-mode tests).
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).runEventsLoop.func1"),
	}, leaktest.TxnClientGoroutines...)...) // the transaction tests' clients (scenario_txn_test.go)
}
