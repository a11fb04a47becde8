package connector

import (
	"errors"
	"fmt"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// sourceSettler is the Settler of a source's Consumer: the subscription's (or the
// cumulative) Ack and Nack, except that a nack the failure strategy marked beforehand
// becomes what the strategy says (reconsume later, or leave the message unacknowledged).
type sourceSettler struct {
	base seam.Settler
	pc   apulsar.Consumer
	mark sync.Map // apulsar.Message → nackMark
}

// nackMark is what a marked nack does instead.
type nackMark struct {
	leave bool              // continue: nothing; the ack timeout redelivers
	props map[string]string // reconsume later: the custom properties
	delay time.Duration     // … and the delay
}

func (t *sourceSettler) Ack(msg apulsar.Message) error { return t.base.Ack(msg) }

// AckWithTxn acknowledges msg inside txn ([SourceOptions.Transactions], which is never
// cumulative).
func (t *sourceSettler) AckWithTxn(msg apulsar.Message, txn apulsar.Transaction) error {
	return t.pc.AckWithTxn(msg, txn) //nolint:wrapcheck // the engine wraps it
}

func (t *sourceSettler) Nack(msg apulsar.Message) {
	if v, ok := t.mark.LoadAndDelete(msg); ok {
		m, _ := v.(nackMark) // only nackMarks are stored
		if m.leave {
			return
		}
		t.pc.ReconsumeLaterWithCustomProperties(msg, m.props, m.delay)
		return
	}
	t.base.Nack(msg)
}

// settleNack applies the failure strategy to a nacked message, through the delivery's
// settlement methods. With babelqueue it is the Consumer's settlement of a handler's
// error: retry while deliveries are left, else the dead-letter copy; a
// *bqpulsar.DeadLetterError reason (or Disposition DeadLetter) dead-letters at once, a
// *bqpulsar.RetryAfterError reason (or a Delay) delays the retry, and a messaging.ErrDecode
// reason settles as poison; a failed republish or dead-letter write nacks, never acks.
// Every failure of a settlement is reported by the Consumer (an EventNacked, health).
func (s *Source) settleNack(d *bqpulsar.Delivery, reason error, o messaging.NackOptions) {
	switch s.strategy {
	case FailureNack, FailureContinue: // continue: the ack timeout, which redelivers
		_ = d.Nack(reason)
	case FailureIgnore:
		s.logger.Warn("nacked message acknowledged (failure-strategy ignore)", zap.String("channel", s.channel), zap.Error(reason))
		_ = d.Ack()
	case FailureFail:
		s.fatal(fmt.Errorf("%w: channel %q: %w", ErrSourceFailed, s.channel, reason))
	case FailureReconsumeLater:
		delay := o.Delay
		if delay <= 0 {
			delay = s.reconsume
		}
		s.settler.mark.Store(d.Message(), nackMark{props: o.Properties, delay: delay})
		_ = d.Nack(reason)
	case FailureBabelQueue:
		if o.Disposition == messaging.Drop {
			s.logger.Warn("nacked message dropped", zap.String("channel", s.channel), zap.String("urn", d.URN()),
				zap.Int("attempt", d.Attempt()), zap.Error(reason))
			_ = d.Ack()
			return
		}
		seam.AddCopyProperties(d, o.Properties)
		if errors.Is(reason, messaging.ErrDecode) {
			reason = poisonError{reason}
		}
		switch {
		case o.Disposition == messaging.DeadLetter:
			_ = d.DeadLetter(reason)
		case o.Delay > 0:
			_ = d.RetryAfter(o.Delay, reason)
		default:
			_ = d.Fail(reason)
		}
	}
}

// poisonError marks a decode failure of the stage's codec as poison for the Consumer's
// settlement (it matches envelope.ErrPoison); its text and chain are the failure's.
type poisonError struct{ error }

func (e poisonError) Unwrap() error { return e.error }

func (poisonError) Is(target error) bool { return target == envelope.ErrPoison }
