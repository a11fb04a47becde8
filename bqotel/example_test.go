package bqotel_test

import (
	"fmt"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
)

// A message without a traceparent joins the trace its trace_id names: a UUID names the
// trace of its 16 bytes, any other trace_id the trace of its SHA-256's first 16 bytes.
func ExampleTraceIDFrom() {
	for _, traceID := range []string{"4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "order-123"} {
		id, ok := bqotel.TraceIDFrom(traceID)
		fmt.Println(traceID, "→", id, ok)
	}
	// Output:
	// 4bf92f35-77b3-4da6-a3ce-929d0e0e4736 → 4bf92f3577b34da6a3ce929d0e0e4736 true
	// order-123 → 3b6a198e6f182f27b91aa5a8b37ab70d true
}
