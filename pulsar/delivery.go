package pulsar

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// ErrSettled is returned by a settlement method of a [Delivery] that was already settled
// (by an earlier call, or by [Consumer.Close], which negatively acknowledges what is left).
var ErrSettled = errors.New("pulsar: delivery already settled")

// ErrStyle is returned by [Consumer.Run] once [Consumer.Next] was called on the consumer,
// and by Next while or after Run runs: a consumer is used in one style, the router or the
// pull loop, never both.
var ErrStyle = errors.New("pulsar: Run and Next cannot be mixed on one consumer")

// ErrUnsettled is wrapped by the error [Consumer.Close] returns (and reports to the error
// hook) when deliveries returned by [Consumer.Next] were left unsettled; Close negatively
// acknowledges them, so the broker delivers them again.
var ErrUnsettled = errors.New("pulsar: deliveries left unsettled")

// Envelope returns the decoded envelope, its attempts set to the reconciled count of
// earlier deliveries. It is nil only for a payload that is not an envelope, which reaches
// [Consumer.Next] only in the connector's Source, with a codec other than the envelope's.
func (d *Delivery) Envelope() *envelope.Envelope { return d.env }

// Message returns the Pulsar message.
func (d *Delivery) Message() apulsar.Message { return d.msg }

// Attempt returns the counted delivery number: 1 for the first delivery, and the
// reconciled count of earlier deliveries plus one after that.
func (d *Delivery) Attempt() int { return d.counted }

// URN returns the routing URN: a usable bq-job property wins over the body's URN ("" for a
// payload that is not an envelope).
func (d *Delivery) URN() string { return d.urn }

// Context returns the delivery's context: the one given to [Consumer.Next], as the
// consumer's Delivery hooks ([Hooks]) returned it (carrying a tracing span, say). The settlement's
// writes run with it.
func (d *Delivery) Context() context.Context { return d.ctx }

// addCopyProperties adds p to the properties of the copy that a later [Delivery.Fail],
// [Delivery.RetryAfter] or [Delivery.DeadLetter] republishes or dead-letters. The binding's
// own properties (bq-job … bq-delay) among p are left out, as a publish's headers are: the
// settlement alone writes them, so that a copy's bq-attempts says what its body says. It
// must be called before the settlement, from the goroutine that settles
// (seam.AddCopyProperties).
func (d *Delivery) addCopyProperties(p map[string]string) {
	for k, v := range p {
		if binding.IsProperty(k) {
			continue
		}
		if d.extraProps == nil {
			d.extraProps = make(map[string]string, len(p))
		}
		d.extraProps[k] = v
	}
}

// Ack acknowledges the message. It returns a *[SettleError] when the acknowledgement failed
// (the message then comes back), and [ErrSettled] for a second settlement.
func (d *Delivery) Ack() error {
	if !d.claim() {
		return ErrSettled
	}
	return d.eng.acknowledge(d)
}

// Fail settles the delivery as failed with err, exactly as a handler's error under
// [Consumer.Run]: a retry (republish or negative ack, by the retry policy) while deliveries
// are left, else the dead-letter copy; a [DeadLetter] or [RetryAfter] outcome is honoured,
// and an err matching envelope.ErrPoison settles with reason poison. It returns nil once the
// settlement is made, the settlement's failure when a republish, dead-letter write or
// acknowledgement failed (the message was then negatively acknowledged and comes back),
// and [ErrSettled] for a second settlement. A nil err counts as a failure too.
func (d *Delivery) Fail(err error) error {
	if err == nil {
		err = errFailed
	}
	return d.settleWith(err)
}

// errFailed is the failure of a Fail(nil).
var errFailed = errors.New("pulsar: delivery failed")

// RetryAfter settles the delivery as failed with err, its retry delayed by delay instead of
// the policy's backoff: Fail with the outcome [RetryAfter](delay, err).
func (d *Delivery) RetryAfter(delay time.Duration, err error) error {
	return d.settleWith(RetryAfter(delay, err))
}

// DeadLetter dead-letters the delivery at once, whatever attempts are left: Fail with the
// outcome [DeadLetter](err).
func (d *Delivery) DeadLetter(err error) error { return d.settleWith(DeadLetter(err)) }

// Nack negatively acknowledges the message without counting a settlement of its own: the
// broker delivers it again after the negative-acknowledgement delay. err says why (for the
// delivery hooks); Nack returns [ErrSettled] for a second settlement, nil otherwise.
func (d *Delivery) Nack(err error) error {
	if !d.claim() {
		return ErrSettled
	}
	d.eng.nack(d, err)
	return nil
}

func (d *Delivery) settleWith(err error) error {
	if !d.claim() {
		return ErrSettled
	}
	d.eng.settle(d, err)
	return d.failure
}

// claim reports whether this is the delivery's first settlement. Run's deliveries are
// settled by the engine alone, and never claimed.
func (d *Delivery) claim() bool { return d.claimed.CompareAndSwap(false, true) }

// Next receives the next message and returns it as a [Delivery] for the caller to settle:
// the pull style, the other public style over the same engine as [Consumer.Run] (which is
// the router and the worker pool over the same receive, admission and settlement). Next
// and Run are not mixed on one consumer ([ErrStyle]).
//
// Admission is the same as under Run: a message whose bq-schema-version is rejected and a
// poison body are settled by the engine (dead-lettered, or acknowledged with a WARN when
// dead-lettering is off) and never returned; attempts are reconciled; the routing URN is
// computed, but nothing is routed, so no handler is needed. Retries and dead letters follow
// from the settlement the caller picks.
//
// At most [WithMaxInflight] deliveries (default 4 × [WithConcurrency]) are unsettled at a
// time: while that many are, Next blocks until one is settled or ctx ends. Next returns
// ctx.Err() when ctx ends, [ErrClosed] after [Consumer.Close], and the fatal
// *[ReceiveError] when the Pulsar consumer cannot receive again; a transient receive error
// is reported and retried with the same backoff as Run. Deliveries left unsettled at Close
// are negatively acknowledged and reported ([ErrUnsettled]). Next may be called from
// several goroutines.
func (c *Consumer) Next(ctx context.Context) (*Delivery, error) {
	if err := c.startPull(); err != nil {
		return nil, err
	}
	defer c.pulls.Done()
	rctx, done := c.receiveCtx(ctx)
	defer done()
	backoff := receiveBackoffMin
	for {
		if !c.gate.acquire(rctx) {
			return nil, c.pullErr(ctx)
		}
		msg, err := c.eng.receive(rctx, c.recv, &backoff)
		if msg == nil {
			c.gate.release()
			switch {
			case rctx.Err() != nil:
				return nil, c.pullErr(ctx)
			case err != nil:
				return nil, err
			}
			continue
		}
		c.received.Add(1)
		if d := c.eng.admit(ctx, msg, c, nil); d != nil {
			return d, nil
		}
		// Settled at admission: its slot was released with its settlement.
	}
}

// receiveCtx returns the context Next receives with: ctx, ended by Close as well, and the
// function to call when the receive is over. A loop that passes the same ctx on every call
// (the connector's Source does) gets the same context back each time, made once, so that
// pulling allocates nothing for it per message; any other ctx gets its own.
func (c *Consumer) receiveCtx(ctx context.Context) (context.Context, func()) {
	if t := reflect.TypeOf(ctx); t != nil && t.Comparable() {
		c.pullMu.Lock()
		if c.pullParent == nil && ctx.Err() == nil {
			merged, cancel := context.WithCancel(ctx)
			context.AfterFunc(c.closing, cancel)
			c.pullParent, c.pullCtx = ctx, merged
		}
		if c.pullParent == ctx {
			merged := c.pullCtx
			c.pullMu.Unlock()
			return merged, func() {}
		}
		c.pullMu.Unlock()
	}
	merged, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.closing, cancel)
	return merged, func() {
		stop()
		cancel()
	}
}

// startPull admits a call of Next.
func (c *Consumer) startPull() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.running || c.style == styleRun:
		return ErrStyle
	}
	if c.style != stylePull {
		c.style = stylePull
		c.pullWatch = c.watch(c.closing, nil) // no unreachable timeout: Next goes on trying
	}
	c.pulls.Add(1)
	return nil
}

// pullErr is Next's error once its receive stopped: ErrClosed after Close, else ctx's.
func (c *Consumer) pullErr(ctx context.Context) error {
	if c.closing.Err() != nil {
		return ErrClosed
	}
	return ctx.Err() //nolint:wrapcheck // Next documents that it returns ctx.Err() as is
}

// pulled registers a delivery Next is about to return (its slot is already taken).
func (c *Consumer) pulled(d *Delivery) {
	c.inflight.Add(1)
	c.outMu.Lock()
	c.out[d] = struct{}{}
	c.outMu.Unlock()
}

// settledPull releases the slot of a settled pulled delivery.
func (c *Consumer) settledPull(d *Delivery) {
	c.outMu.Lock()
	delete(c.out, d)
	c.outMu.Unlock()
	c.inflight.Add(-1)
	c.gate.release()
}

// nackUnsettled negatively acknowledges the pulled deliveries nobody settled, once Next
// can no longer return any, and returns the error that reports them (nil for none).
func (c *Consumer) nackUnsettled() error {
	c.pulls.Wait()
	c.outMu.Lock()
	left := make([]*Delivery, 0, len(c.out))
	for d := range c.out {
		left = append(left, d)
	}
	c.outMu.Unlock()
	n := 0
	for _, d := range left {
		if d.Nack(ErrClosed) == nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	err := fmt.Errorf("%w: %d negatively acknowledged at close", ErrUnsettled, n)
	c.cfg.logger.Warn("deliveries left unsettled at close; negatively acknowledged", zap.Int("count", n))
	c.eng.observe(nil, Event{Kind: EventError, Err: err})
	return err
}

// The styles of a consumer: none yet, Run, or Next.
const (
	styleNone = iota
	styleRun
	stylePull
)

// inflightGate is the consumer's one in-flight bound: the messages Run's worker pool holds
// (queued, handled or being settled), or the deliveries Next returned that are not yet
// settled. It is a counting semaphore: a slot is a token in slots, so that taking and
// giving back one is a single channel operation, without a lock beside it.
type inflightGate struct {
	slots chan struct{} // one token per slot taken; its capacity is the bound
}

func newInflightGate(n int) *inflightGate {
	return &inflightGate{slots: make(chan struct{}, max(n, 1))}
}

// acquire takes a slot, waiting until one is free; false when ctx ended first.
func (g *inflightGate) acquire(ctx context.Context) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case g.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// release frees a slot taken by acquire. It never blocks: with no slot taken (a release
// without its acquire, which would be a bug) there is nothing to free.
func (g *inflightGate) release() {
	select {
	case <-g.slots:
	default:
	}
}
