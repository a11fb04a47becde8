package pulsar

import (
	"context"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// The seam package pulsar lends the other packages of this module (see package seam):
// set once, before any of them can run, and never changed.
func init() { //nolint:gochecknoinits // the seam's functions are this package's, reached without exporting them
	seam.Build = build
	seam.PublishHooks = func(hooks any, logger *zap.Logger) seam.PublishFunc {
		hs, _ := hooks.([]Hooks) // the only type the connector passes
		s := publishHooks(hs, logger)
		if s == nil {
			return nil
		}
		return func(ctx context.Context, topic string, env *envelope.Envelope, pm *apulsar.ProducerMessage) func(apulsar.MessageID, error) {
			return s.publishing(ctx, &OutgoingMessage{Topic: topic, Envelope: env, Message: pm})
		}
	}
	seam.FrontOption = func(f seam.Front) any { return frontOption(f) }
	seam.WrapConnectError = wrapConnectError
	seam.Deferral = deferralOf
	seam.Warning = func(err error) bool { _, warn := directiveOf(err); return warn }
	seam.TxnOf = txnOf
	seam.TransactionsError = transactionsError
	seam.AddCopyProperties = func(d any, p map[string]string) {
		if d, ok := d.(*Delivery); ok {
			d.addCopyProperties(p)
		}
	}
}
