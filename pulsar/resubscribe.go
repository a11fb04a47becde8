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

// ErrConsumerLost is matched by the error that the consumer reports (in an [EventError], and
// in [Consumer.Health] until it has subscribed again) when pulsar-client-go closed the
// consumer on its own: since v0.20.0 the client gives a reconnection up, and closes the
// consumer, when the broker answers it with an error the client deems final (ConsumerBusy,
// for instance, on an Exclusive or Failover subscription whose old consumer the broker still
// holds; see apache/pulsar-client-go#1490) or when ConsumerOptions.MaxReconnectToBroker ran
// out. A consumer that [NewConsumer] subscribed subscribes again on its own, with pauses from
// 100 ms doubling to 1 s, until it succeeds or is closed; the error wraps the client's cause.
// A wrapped consumer cannot: its Receive ends with the client's ConsumerClosed, and a topic
// of a wrapped multi-topic consumer stops without a word from the client.
var ErrConsumerLost = errors.New("pulsar: the Pulsar client closed the consumer")

// resubscriber is the Pulsar consumer of a Consumer that NewConsumer subscribed: every call
// goes to the current Pulsar consumer, which resubscribe replaces. A Receive blocked on the
// consumer that was replaced (whose close ends it with ConsumerClosed) receives again from
// the new one. Chan is the current consumer's channel, and is not carried over.
//
// Each Pulsar consumer is subscribed with a closeWatch among its interceptors, which learns
// when the client closed it, and why. A close with a cause (the client gave the consumer up)
// starts recover, which subscribes again until it succeeds or the resubscriber closes.
type resubscriber struct {
	subscribe func(watch apulsar.ConsumerInterceptor) (apulsar.Consumer, error)
	report    atomic.Pointer[func(err error)] // what recover met (nil: subscribed again); nil: nobody listens
	cur       atomic.Pointer[consumerBox]
	mu        sync.Mutex // one resubscription at a time, and none after Close
	closed    bool
	done      chan struct{} // closed by Close: ends recover's pauses
	recovers  sync.WaitGroup
}

// consumerBox holds one subscription's Pulsar consumer, and what its closeWatch learnt.
type consumerBox struct {
	apulsar.Consumer
	endOnce  sync.Once
	ended    chan struct{} // closed once the client closed the consumer (cause says why)
	cause    error         // nil when the close was asked for (by us, or by closing the client)
	replaced chan struct{} // closed once another consumer took this one's place, or at Close
}

func newBox() *consumerBox {
	return &consumerBox{ended: make(chan struct{}), replaced: make(chan struct{})}
}

// closeWatch is the interceptor through which pulsar-client-go says that it closed a
// consumer (ConsumerCloseInterceptor, v0.20.0 and later): for a multi-topic consumer, each
// topic's consumer. It does nothing on the other events.
type closeWatch struct {
	r   *resubscriber
	box *consumerBox
}

var _ apulsar.ConsumerCloseInterceptor = closeWatch{}

func (closeWatch) BeforeConsume(apulsar.ConsumerMessage)                    {}
func (closeWatch) OnAcknowledge(apulsar.Consumer, apulsar.MessageID)        {}
func (closeWatch) OnNegativeAcksSend(apulsar.Consumer, []apulsar.MessageID) {}

// OnConsumerClose records the first close of the box's consumer (or of one of its topics'),
// and when the client gave it up (a cause), starts recover.
func (w closeWatch) OnConsumerClose(_ apulsar.Consumer, cause error) {
	first := false
	w.box.endOnce.Do(func() {
		w.box.cause = cause
		close(w.box.ended)
		first = true
	})
	if first && cause != nil {
		w.r.lost(w.box, cause)
	}
}

// newResubscriber subscribes with subscribe and returns the resubscriber over that consumer.
func newResubscriber(subscribe func(watch apulsar.ConsumerInterceptor) (apulsar.Consumer, error)) (*resubscriber, error) {
	r := &resubscriber{subscribe: subscribe, done: make(chan struct{})}
	box, err := r.subscribeBox()
	if err != nil {
		return nil, err
	}
	r.cur.Store(box)
	return r, nil
}

func (r *resubscriber) subscribeBox() (*consumerBox, error) {
	box := newBox()
	pc, err := r.subscribe(closeWatch{r: r, box: box})
	if err != nil {
		return nil, err
	}
	box.Consumer = pc
	return box, nil
}

func (r *resubscriber) current() apulsar.Consumer { return r.cur.Load().Consumer }

// resubscribe subscribes again and puts the new consumer in place of the current one, then
// closes the old one. It returns the subscription's error, and ErrClosed after Close.
func (r *resubscriber) resubscribe() error {
	return r.replace(nil)
}

// replace is resubscribe, when the current consumer is still old (any, when old is nil): a
// consumer that another resubscription already replaced is left as it is. With old, the old
// consumer is closed before the new one subscribes: the client gave it up, perhaps only one
// of its topics, and on an Exclusive or Failover subscription its other topics would refuse
// the new consumer while it holds them.
func (r *resubscriber) replace(old *consumerBox) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if old != nil {
		if r.cur.Load() != old {
			return nil
		}
		old.Close()
	}
	box, err := r.subscribeBox()
	if err != nil {
		return err
	}
	prev := r.cur.Swap(box)
	close(prev.replaced)
	prev.Close()
	return nil
}

// lost starts recover for box, whose consumer the client gave up.
func (r *resubscriber) lost(box *consumerBox, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.recovers.Add(1)
	go r.recover(box, cause)
}

// recover subscribes again in place of box, pausing from transientPauseMin, doubling, up to
// transientPauseMax between attempts, until it succeeded, another resubscription replaced
// box, or the resubscriber closed. It reports the loss, each failed attempt and the success.
func (r *resubscriber) recover(box *consumerBox, cause error) {
	defer r.recovers.Done()
	if r.cur.Load() != box {
		return // given up while being replaced: its successor is in place
	}
	r.note(fmt.Errorf("%w: %w", ErrConsumerLost, cause))
	pause := transientPauseMin
	for attempt := 1; ; attempt++ {
		err := r.replace(box)
		if err == nil {
			r.note(nil)
			return
		}
		if errors.Is(err, ErrClosed) {
			return
		}
		r.note(fmt.Errorf("%w: %w; subscribing again failed (attempt %d): %w", ErrConsumerLost, cause, attempt, err))
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-r.done:
			t.Stop()
			return
		}
		pause = min(2*pause, transientPauseMax)
	}
}

// closeNoticeWait bounds how long Receive waits, after its consumer ended with ConsumerClosed,
// for the client to say why (the client calls the interceptor right after it closed the
// consumer).
const closeNoticeWait = 5 * time.Second

// Receive receives from the current consumer, and again from the new one when the consumer
// it waited on was replaced meanwhile, or was given up by the client and subscribed again.
func (r *resubscriber) Receive(ctx context.Context) (apulsar.Message, error) {
	for {
		box := r.cur.Load()
		msg, err := box.Receive(ctx)
		if err == nil || ctx.Err() != nil {
			return msg, err //nolint:wrapcheck // the Pulsar consumer's own error, as when it is used directly
		}
		if r.cur.Load() != box || r.awaitRecovery(ctx, box, err) {
			continue
		}
		return msg, err //nolint:wrapcheck // the Pulsar consumer's own error, as when it is used directly
	}
}

// awaitRecovery reports whether a Receive that ended with err should receive again: err says
// that the consumer is closed, the client gave it up, and recover replaced it before ctx ended
// or the resubscriber closed.
func (r *resubscriber) awaitRecovery(ctx context.Context, box *consumerBox, err error) bool {
	var pe *apulsar.Error
	if !errors.As(err, &pe) || pe.Result() != apulsar.ConsumerClosed {
		return false
	}
	t := time.NewTimer(closeNoticeWait)
	defer t.Stop()
	select {
	case <-box.ended:
	case <-box.replaced:
		return r.stillOpen()
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
	if box.cause == nil {
		return false
	}
	select {
	case <-box.replaced:
		return r.stillOpen()
	case <-ctx.Done():
		return false
	}
}

// note passes what recover met to the listener set with onReport, if any.
func (r *resubscriber) note(err error) {
	if f := r.report.Load(); f != nil {
		(*f)(err)
	}
}

// onReport sets the listener of what recover meets.
func (r *resubscriber) onReport(f func(err error)) { r.report.Store(&f) }

func (r *resubscriber) stillOpen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.closed
}

// Close closes the current consumer; no resubscription happens after it.
func (r *resubscriber) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.done)
		close(r.cur.Load().replaced)
	}
	r.mu.Unlock()
	r.current().Close()
	r.recovers.Wait()
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

// reportLost is the resubscriber's listener: the client giving the consumer up, and each
// failed attempt to subscribe again, are logged, reported as an [EventError] and make
// [Consumer.Health] not ready; a new subscription (nil) makes it ready again.
func (c *Consumer) reportLost(err error) {
	if err == nil {
		c.cfg.logger.Warn("the Pulsar client had closed the consumer; subscribed again",
			zap.String("subscription", c.cfg.subscription))
		c.eng.setReceiving(nil)
		return
	}
	c.cfg.logger.Error("the Pulsar client closed the consumer", zap.String("subscription", c.cfg.subscription),
		zap.Error(err))
	c.eng.setReceiving(err)
	c.eng.observe(nil, Event{Kind: EventError, Err: err})
}
