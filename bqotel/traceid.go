package bqotel

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// The Publisher's trace_id continues the active trace in every program that imports this
// package (seam.ActiveTraceID): package pulsar itself has no OpenTelemetry dependency.
func init() { //nolint:gochecknoinits // the seam is set once, before any publish, without an exported hook
	seam.ActiveTraceID = activeTraceID
}

// activeTraceID returns the trace_id that continues the active trace of ctx: the W3C trace
// id of its span context written as a UUID-shaped string (the 32 lower-case hex digits in
// 8-4-4-4-12 groups, as the Go core's otel helper writes it), or "" when ctx carries no
// valid span context. [TraceIDFrom] inverts it.
func activeTraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	id := sc.TraceID()
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	hex.Encode(b[9:13], id[4:6])
	hex.Encode(b[14:18], id[6:8])
	hex.Encode(b[19:23], id[8:10])
	hex.Encode(b[24:36], id[10:16])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}
