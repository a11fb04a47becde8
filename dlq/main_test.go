package dlq_test

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
	)
}
