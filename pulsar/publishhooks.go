package pulsar

import (
	"context"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// OutgoingMessage is a message about to be sent by a [Publisher] (or the connector's sink),
// as a [PublishHook] sees it.
type OutgoingMessage struct {
	// Topic is the destination topic.
	Topic string
	// Envelope is the envelope being sent; do not modify it.
	Envelope *envelope.Envelope
	// Message is the Pulsar message: its Properties already hold the bq-* projection and
	// the caller's headers. A hook may add properties (a W3C traceparent, say); a property
	// already present was given by the caller and should be left as it is.
	Message *apulsar.ProducerMessage
}

// PublishHook is called for every message a [Publisher] sends, after the message is built
// and before it is handed to the producer, with the context of the Publish call. It returns
// a function called exactly once with the outcome of the send (it may be nil). Tracing uses
// it to open a producer span and inject its context into the properties. A panic in it is
// recovered and logged, and the message is sent without it.
type PublishHook func(ctx context.Context, m *OutgoingMessage) func(id apulsar.MessageID, err error)

// RunPublishHooks calls hooks on m in order, recovering panics, and returns a function that
// calls their done functions in reverse order (nil when there is nothing to call).
func RunPublishHooks(ctx context.Context, hooks []PublishHook, m *OutgoingMessage, logger *zap.Logger) func(apulsar.MessageID, error) {
	if len(hooks) == 0 {
		return nil
	}
	var dones []func(apulsar.MessageID, error)
	for _, h := range hooks {
		var done func(apulsar.MessageID, error)
		if perr := safeCall("publish hook", func() { done = h(ctx, m) }); perr != nil {
			logger.Error("publish hook panicked", zap.String("topic", m.Topic), zap.Error(perr))
			continue
		}
		if done != nil {
			dones = append(dones, done)
		}
	}
	if len(dones) == 0 {
		return nil
	}
	return func(id apulsar.MessageID, err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			if perr := safeCall("publish hook's done", func() { dones[i](id, err) }); perr != nil {
				logger.Error("publish hook's done panicked", zap.String("topic", m.Topic), zap.Error(perr))
			}
		}
	}
}
