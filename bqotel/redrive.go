package bqotel

import (
	"context"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
)

// AttrRedriveMoved is the number of messages a redrive moved back.
const AttrRedriveMoved = attribute.Key("babelqueue.redrive.moved")

// Redrive runs [dlq.Redrive] inside a new span named "redrive <dead-letter topic>" (a
// child of the span in ctx, if any) and links that span to the trace context of every
// message moved back (extracted from its properties: its original producer span), so the
// redrive can be found from the messages' traces and the other way round. The moved
// messages keep their properties, traceparent included: their next deliveries are still
// children of the original producer span. The span's status is Error when Redrive fails.
// The report and the error are Redrive's.
func (t *Telemetry) Redrive(ctx context.Context, client apulsar.Client, opts dlq.RedriveOptions) (dlq.RedriveReport, error) {
	if !t.cfg.tracing {
		return dlq.Redrive(ctx, client, opts)
	}
	dest, _ := splitPartition(opts.Topic)
	ctx, span := t.tracer.Start(ctx, "redrive "+dest, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrSystem, semconv.MessagingDestinationName(dest)))
	defer span.End()
	rep, err := dlq.Redrive(ctx, client, opts)
	for _, m := range rep.Moved {
		_, sc := t.extract(ctx, m.Properties) // the message's, never the redrive span itself
		if !sc.IsValid() {
			continue
		}
		attrs := []attribute.KeyValue{AttrLinkSource.String("traceparent"), AttrURN.String(m.RoutingURN)}
		if m.Envelope != nil {
			attrs = append(attrs, AttrMetaID.String(m.Envelope.Meta.ID))
		}
		span.AddLink(trace.Link{SpanContext: sc, Attributes: attrs})
	}
	span.SetAttributes(AttrRedriveMoved.Int(len(rep.Moved)))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return rep, err
}
