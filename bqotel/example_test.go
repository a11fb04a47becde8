package bqotel_test

import (
	"fmt"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
)

// A message without a traceparent is linked to the trace its trace_id names, when that is a
// UUID (or 32 hex digits).
func ExampleTraceIDFrom() {
	for _, traceID := range []string{"4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "order-123"} {
		id, ok := bqotel.TraceIDFrom(traceID)
		fmt.Println(traceID, "→", id, ok)
	}
	// Output:
	// 4bf92f35-77b3-4da6-a3ce-929d0e0e4736 → 4bf92f3577b34da6a3ce929d0e0e4736 true
	// order-123 → 00000000000000000000000000000000 false
}
