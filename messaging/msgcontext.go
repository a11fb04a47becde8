package messaging

import (
	"context"
	"errors"
	"time"
)

// ContextMetadata is the metadata item that carries a message's own context: the values of
// the work that received or produced it (a tracing span, say). A connector's source
// attaches the context its delivery runs in (the Pulsar connector's carries the consumer
// span of package bqotel and the delivery's consumer), and every stage function given the
// message (Consume, ConsumeMessage, Process, ProcessMessage, FlatMap, FlatMapMessage) gets
// a ctx with those values ([MessageContext]), so that the spans it starts nest under the
// delivery's. That ctx's cancellation, deadline and cause stay the runtime's. Process,
// FlatMap and WithPayload keep the item on the messages they derive, so a sink sees it
// too. A stage whose own span should be the parent downstream puts its ctx on the message
// it returns: WithMetadataItems(m, ContextMetadata{Context: ctx}).
//
// It is MicroProfile Reactive Messaging's TracingMetadata, for any context value.
type ContextMetadata struct {
	// Context is the message's context; only its values are used. A nil Context is
	// ignored.
	Context context.Context //nolint:containedctx // the message's own, as TracingMetadata carries an OpenTelemetry context
}

// MessageContext returns ctx with the values of md's [ContextMetadata] context in front of
// its own: a key both know is answered by the message's context. Its Done, Err, Deadline
// and context.Cause are ctx's. It returns ctx itself when md has no ContextMetadata.
func MessageContext(ctx context.Context, md Metadata) context.Context {
	cm, ok := MetadataOf[ContextMetadata](md)
	if !ok || cm.Context == nil || cm.Context == ctx {
		return ctx
	}
	return valuesContext{Context: ctx, values: cm.Context}
}

// valuesContext is a context whose values come first from values, then from the embedded
// context, which gives everything else.
type valuesContext struct {
	context.Context //nolint:containedctx // the cancellation of the merged context
	values          context.Context
}

// Value answers key from the message's context first, except the key through which
// package context finds a context's cancellation: that one is the embedded context's, so
// that context.Cause and the contexts derived from this one follow its cancellation.
func (c valuesContext) Value(key any) any {
	if key != cancelKey {
		if v := c.values.Value(key); v != nil {
			return v
		}
	}
	return c.Context.Value(key)
}

// cancelKey is the key package context asks a context for when it looks for the context's
// cancellation (context.Cause asks for it first, of a context that is done). It is not
// exported, so it is learnt once from a probe.
var cancelKey = func() any {
	p := &keyProbe{}
	_ = context.Cause(p)
	return p.key
}()

// keyProbe is a done context that records the first key it is asked for.
type keyProbe struct{ key any }

func (*keyProbe) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keyProbe) Done() <-chan struct{}       { return closedChan }
func (*keyProbe) Err() error                  { return errProbe }
func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}

var (
	closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
	errProbe   = errors.New("messaging: context key probe")
)
