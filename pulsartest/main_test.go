package pulsartest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests. Every broker goroutine is checked; the ignored ones
// belong to pulsar-client-go v0.19.0 and outlive Client.Close by design or bug, against a real broker as well.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// One per producer; it notices Close only when its SendTimeout timer (30 s by default) fires.
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"),
		// One per incomplete chunked message; it waits for ExpireTimeOfIncompleteChunk (60 s by default).
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*chunkedMsgCtxMap).discardChunkIfExpire"),
		// After Consumer.Unsubscribe the partition consumer is marked closed, so Close returns early and never
		// stops these three (scenario 15).
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).dispatcher"),
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).runEventsLoop"),
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.newAckGroupingTracker.func1"),
	)
}
