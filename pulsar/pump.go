package pulsar

import (
	"context"
	"errors"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// pump receives messages from recv until ctx ends or a receive fails for good, and hands
// each to deliver; deliver returns false to stop the pump (the message is then its to
// settle). Before each receive it takes a slot of gate, when set, waiting until one is free
// (the slot is given back when no message came; else it is the message's until the front
// releases it). Each receive is [engine.receive].
// pump returns nil when ctx ended or deliver stopped it, and the fatal *ReceiveError
// otherwise.
func (e *engine) pump(ctx context.Context, recv seam.Receiver, gate *inflightGate, deliver func(apulsar.Message) bool) error {
	backoff := receiveBackoffMin
	for {
		if gate != nil && !gate.acquire(ctx) {
			return nil
		}
		msg, err := e.receive(ctx, recv, &backoff)
		if gate != nil && msg == nil {
			gate.release()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // ctx ended: the pump was asked to stop, which is no error
			}
			return err
		}
		if msg == nil {
			continue
		}
		if !deliver(msg) {
			return nil
		}
	}
}

// receive is one receive of the pull path that every front shares (Run's pump, Next, and
// through Next the connector's Source). A transient receive error is reported to the error
// hook, recorded in the health state, and followed by a pause that starts at
// [receiveBackoffMin] and doubles up to [receiveBackoffMax] (*backoff carries it from one
// receive to the next; a successful receive resets it); it then returns no message and no
// error, for the caller to receive again. A message received as ctx ends is negatively
// acknowledged, so the broker redelivers it. It returns ctx's error once ctx ended, and the
// fatal *ReceiveError when the consumer cannot receive again.
func (e *engine) receive(ctx context.Context, recv seam.Receiver, backoff *time.Duration) (apulsar.Message, error) {
	msg, err := recv.Receive(ctx)
	if ctx.Err() != nil {
		if err == nil && msg != nil {
			e.settler.Nack(msg) // received as the pump stopped: let the broker redeliver it
		}
		return nil, ctx.Err() //nolint:wrapcheck // documented: ctx's error as is
	}
	if err != nil {
		rerr := &ReceiveError{Err: err}
		if fatalReceive(err) {
			e.cfg.Logger.Error("receive failed for good; stopping", zap.Error(err))
			e.health.fatal(rerr)
			return nil, rerr
		}
		e.cfg.Logger.Warn("receive failed", zap.Error(err), zap.Duration("pause", *backoff))
		e.health.failing("receive", err)
		e.observe(nil, Event{Kind: EventError, Err: rerr})
		if !pause(ctx, *backoff) {
			return nil, ctx.Err() //nolint:wrapcheck // ctx ended during the pause: ctx's error as is
		}
		*backoff = min(2**backoff, receiveBackoffMax)
		return nil, nil //nolint:nilnil // documented: no message yet, receive again
	}
	*backoff = receiveBackoffMin
	e.health.ok("receive")
	return msg, nil
}

// queuedReceiver is a Receiver that first takes a message the client has already queued on
// the consumer's channel (see queuedFirst).
type queuedReceiver struct {
	seam.Receiver
	ch func() <-chan apulsar.ConsumerMessage
}

// queuedFirst returns recv with a fast path for a message the client has already queued:
// a plain non-blocking receive from the consumer's channel (apulsar.Consumer.Chan). The
// client's Receive selects over the consumer's close channel, its message channel and ctx's
// Done channel, a select that locks all three even when a message waits; under load a
// message nearly always waits. On the embedded broker a raw Receive + envelope.Classify +
// Ack loop cost 0.03–0.10 µs a message more with a cancellable context than without, of
// the 0.2–0.27 µs by which the consumer exceeded that loop. Receive is unchanged where the fast path
// finds nothing: no message waiting, ctx ended, a closed channel, or a receiver without a
// channel (a mock; a zero-queue consumer, whose Chan panics: that is found out once, here).
// Receive, too, may return a waiting message after the consumer was closed.
func queuedFirst(recv seam.Receiver) seam.Receiver {
	cr, ok := recv.(interface {
		Chan() <-chan apulsar.ConsumerMessage
	})
	if !ok || !hasChan(cr.Chan) {
		return recv
	}
	return queuedReceiver{Receiver: recv, ch: cr.Chan}
}

// hasChan reports whether ch returns without a panic (a zero-queue consumer's Chan panics).
func hasChan(ch func() <-chan apulsar.ConsumerMessage) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	ch()
	return true
}

// Receive returns a message already queued on the consumer's channel when there is one and
// ctx has not ended, and otherwise the wrapped Receive's result.
func (q queuedReceiver) Receive(ctx context.Context) (apulsar.Message, error) {
	if ctx.Err() == nil {
		select {
		case cm, ok := <-q.ch():
			if ok && cm.Message != nil {
				return cm.Message, nil
			}
		default:
		}
	}
	return q.Receiver.Receive(ctx)
}

// fatalReceive reports whether a receive error ends the pump: [ErrClosed], or an error that
// retry.IsRetryable (the one classifier of the binding's errors) does not call retryable,
// such as a closed consumer. A cancelled context is not fatal (the pump was asked to stop).
func fatalReceive(err error) bool {
	if errors.Is(err, ErrClosed) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *apulsar.Error
	if errors.As(err, &pe) {
		return !retry.IsRetryable(err)
	}
	return false // an error the client does not classify: report it and receive again
}

// producerBroken reports whether a send error means the producer cannot send again, so the
// settlement should use a fresh one: the producer was closed or fenced, or a send timed out
// (the producer may be stuck after the broker refused it). Message-level errors (too big,
// invalid, not allowed) leave a healthy producer in place.
func producerBroken(err error) bool {
	var pe *apulsar.Error
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Result() {
	case apulsar.ProducerClosed, apulsar.AlreadyClosedError, apulsar.ProducerFenced,
		apulsar.TimeoutError, apulsar.ProducerNotInitialized:
		return true
	default:
		return false
	}
}

// timerSet runs delayed functions (the delayed negative acknowledgements) and, at stop,
// the ones still waiting at once. Each function runs exactly once, and every one has
// returned when stop returns.
type timerSet struct {
	mu      sync.Mutex
	stopped bool
	pending map[*time.Timer]func() // waiting: the timer → what stop runs instead
	running sync.WaitGroup         // fired: their function is running
}

// after runs f after d; if the set is stopped first, now runs instead (at stop, or at once
// when the set is already stopped).
func (t *timerSet) after(d time.Duration, f, now func()) {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		now()
		return
	}
	if t.pending == nil {
		t.pending = map[*time.Timer]func(){}
	}
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		t.mu.Lock()
		_, ok := t.pending[tm] // absent: stop took it and runs now instead
		if ok {
			delete(t.pending, tm)
			t.running.Add(1) // before stop can take the lock, so before its Wait
		}
		t.mu.Unlock()
		if ok {
			defer t.running.Done()
			f()
		}
	})
	t.pending[tm] = now
	t.mu.Unlock()
}

// stop runs, at once, every function whose timer has not fired, and waits for those
// whose timer has.
func (t *timerSet) stop() {
	t.mu.Lock()
	t.stopped = true
	pending := t.pending
	t.pending = nil
	t.mu.Unlock()
	for tm, now := range pending {
		tm.Stop() // if it fired meanwhile, its callback finds nothing to run
		now()
	}
	t.running.Wait()
}

// pause waits d and reports whether ctx is still alive afterwards.
func pause(ctx context.Context, d time.Duration) bool { return retry.Wait(ctx, d) == nil }
