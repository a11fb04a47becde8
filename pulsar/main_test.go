package pulsar_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pulsar-client-go v0.19.0 starts this goroutine per producer; it notices Close only when its
		// SendTimeout timer (30 s by default) fires, so it outlives Client.Close. It is the client's, not
		// ours (the same exception as pulsartest's TestMain).
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"),
		// pulsar-client-go v0.19.0: grabConn signals "connected" from a new goroutine on an unbuffered
		// channel that only the dispatcher reads; a consumer closed before its dispatcher took the signal
		// (the reactive Source TCK subscribes and closes within milliseconds) leaves it blocked forever.
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).grabConn.func1"),
	)
}
