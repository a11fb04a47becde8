package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/answer"
)

// A stranded consumer is one the broker no longer holds while its client still waits for
// messages. pulsar-client-go v0.19.0 stranded a consumer when a CLOSE_CONSUMER (an unload of
// the topic) arrived between the answer to its SUBSCRIBE and its registering the consumer
// on the connection: the client dropped that command, never reconnected, and Receive
// blocked for ever while the subscription's backlog grew with no consumer attached.
// v0.21.0 registers the consumer on the connection before it sends the SUBSCRIBE
// (apache/pulsar-client-go#1476, grabConn), so a CLOSE_CONSUMER that follows the answer
// reaches the consumer and makes it reconnect: that window is closed. The check stays as a
// guard, cheap while idle, against any other way to the same state: the chaos runs that
// found the strand ran v0.19.0, and a wrapped consumer may come from any client. The
// watchdog (watchdog.go) finds it while idle by asking the broker for the consumer's last
// message id: the broker answers MetadataError "Consumer not found". A consumer that
// [NewConsumer] subscribed then subscribes again behind its resubscriber; a wrapped one is
// reported.

// ErrStranded is matched by the error that the consumer reports (in an [EventError], and in
// [Consumer.Health] until a message arrives again) when the broker answers that it holds no
// consumer of the subscription for it while the client still waits for messages. A consumer
// that [NewConsumer] subscribed subscribes again on its own; a wrapped one must be replaced
// by its owner.
var ErrStranded = errors.New("pulsar: the broker holds no consumer for this subscription")

// strandCheck asks the broker for pc's last message ids and returns an error matching
// [ErrStranded] when the broker answered that it does not have the consumer; any other
// outcome (an answer, a timeout, a non-persistent topic's refusal) is nil. The client retries
// the request for up to its operation timeout, which bounds the call.
func strandCheck(pc apulsar.Consumer) error {
	_, err := pc.GetLastMessageIDs()
	if name, message, ok := answer.Parse(err); ok && name == "MetadataError" && message == "Consumer not found" {
		return fmt.Errorf("%w: %w", ErrStranded, err)
	}
	return nil
}

// resubscriber is the Pulsar consumer of a Consumer that NewConsumer subscribed: every call
// goes to the current Pulsar consumer, which resubscribe replaces. A Receive blocked on the
// consumer that was replaced (whose close ends it with ConsumerClosed) receives again from
// the new one. Chan is the current consumer's channel, and is not carried over.
type resubscriber struct {
	subscribe func() (apulsar.Consumer, error)
	cur       atomic.Pointer[consumerBox]
	mu        sync.Mutex // one resubscription at a time, and none after Close
	closed    bool
}

type consumerBox struct{ apulsar.Consumer }

var _ apulsar.Consumer = (*resubscriber)(nil)

func newResubscriber(pc apulsar.Consumer, subscribe func() (apulsar.Consumer, error)) *resubscriber {
	r := &resubscriber{subscribe: subscribe}
	r.cur.Store(&consumerBox{pc})
	return r
}

func (r *resubscriber) current() apulsar.Consumer { return r.cur.Load().Consumer }

// resubscribe subscribes again and puts the new consumer in place of the current one, then
// closes the old one. It returns the subscription's error, and ErrClosed after Close.
func (r *resubscriber) resubscribe() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	pc, err := r.subscribe()
	if err != nil {
		return err
	}
	old := r.cur.Swap(&consumerBox{pc})
	old.Close()
	return nil
}

// Receive receives from the current consumer, and again from the new one when the consumer
// it waited on was replaced meanwhile.
func (r *resubscriber) Receive(ctx context.Context) (apulsar.Message, error) {
	for {
		pc := r.current()
		msg, err := pc.Receive(ctx)
		if err != nil && ctx.Err() == nil && r.current() != pc {
			continue
		}
		return msg, err //nolint:wrapcheck // the Pulsar consumer's own error, as when it is used directly
	}
}

// Close closes the current consumer; no resubscription happens after it.
func (r *resubscriber) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.current().Close()
}

// The rest delegates to the current consumer.

func (r *resubscriber) Subscription() string    { return r.current().Subscription() }
func (r *resubscriber) Unsubscribe() error      { return r.current().Unsubscribe() }      //nolint:wrapcheck // delegated
func (r *resubscriber) UnsubscribeForce() error { return r.current().UnsubscribeForce() } //nolint:wrapcheck // delegated
func (r *resubscriber) GetLastMessageIDs() ([]apulsar.TopicMessageID, error) {
	return r.current().GetLastMessageIDs() //nolint:wrapcheck // delegated
}
func (r *resubscriber) Chan() <-chan apulsar.ConsumerMessage { return r.current().Chan() }
func (r *resubscriber) Ack(msg apulsar.Message) error        { return r.current().Ack(msg) }  //nolint:wrapcheck // delegated
func (r *resubscriber) AckID(id apulsar.MessageID) error     { return r.current().AckID(id) } //nolint:wrapcheck // delegated
func (r *resubscriber) AckIDList(ids []apulsar.MessageID) error {
	return r.current().AckIDList(ids) //nolint:wrapcheck // delegated
}

func (r *resubscriber) AckWithTxn(msg apulsar.Message, txn apulsar.Transaction) error {
	return r.current().AckWithTxn(msg, txn) //nolint:wrapcheck // delegated
}

func (r *resubscriber) AckCumulative(msg apulsar.Message) error {
	return r.current().AckCumulative(msg) //nolint:wrapcheck // delegated
}

func (r *resubscriber) AckIDCumulative(id apulsar.MessageID) error {
	return r.current().AckIDCumulative(id) //nolint:wrapcheck // delegated
}

func (r *resubscriber) ReconsumeLater(msg apulsar.Message, delay time.Duration) {
	r.current().ReconsumeLater(msg, delay)
}

func (r *resubscriber) ReconsumeLaterWithCustomProperties(msg apulsar.Message, props map[string]string, delay time.Duration) {
	r.current().ReconsumeLaterWithCustomProperties(msg, props, delay)
}
func (r *resubscriber) Nack(msg apulsar.Message)        { r.current().Nack(msg) }
func (r *resubscriber) NackID(id apulsar.MessageID)     { r.current().NackID(id) }
func (r *resubscriber) Seek(id apulsar.MessageID) error { return r.current().Seek(id) }      //nolint:wrapcheck // delegated
func (r *resubscriber) SeekByTime(t time.Time) error    { return r.current().SeekByTime(t) } //nolint:wrapcheck // delegated
func (r *resubscriber) Name() string                    { return r.current().Name() }

// strandRemedy is what the watchdog does about a stranded consumer: an owned one subscribes
// again (the error is nil on success); a wrapped one cannot, and the error says so.
func (c *Consumer) strandRemedy(stranded error) error {
	if c.resub == nil {
		return fmt.Errorf("%w; the consumer is wrapped, so its owner must subscribe again", stranded)
	}
	if err := c.resub.resubscribe(); err != nil {
		return fmt.Errorf("%w; subscribing again failed: %w", stranded, err)
	}
	c.cfg.logger.Warn("the broker held no consumer for the subscription; subscribed again",
		zap.String("subscription", c.cfg.subscription), zap.Error(stranded))
	return nil
}
