package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// The defaults of a [Guard].
const (
	DefaultLease         = 30 * time.Second
	DefaultTTL           = 24 * time.Hour
	DefaultInFlightRetry = 2 * time.Second
)

// Result says what [Guard.Do] did with a delivery.
type Result int

// The results of [Guard.Do].
const (
	// NotRun: the handler was not run (the id is in flight elsewhere, or the store failed).
	NotRun Result = iota
	// Ran: the handler ran under a claim (its error, if any, is Do's error).
	Ran
	// Skipped: the id is remembered; the handler was not run and the delivery should be
	// acknowledged.
	Skipped
	// RanUnguarded: the id is empty, so the handler ran without a claim.
	RanUnguarded
)

// String returns "not-run", "ran", "skipped" or "ran-unguarded".
func (r Result) String() string {
	switch r {
	case NotRun:
		return "not-run"
	case Ran:
		return "ran"
	case Skipped:
		return "skipped"
	case RanUnguarded:
		return "ran-unguarded"
	default:
		return fmt.Sprintf("Result(%d)", int(r))
	}
}

// ErrorHook receives the store failures that do not change a delivery's outcome: op is
// "commit" (the handler succeeded, the delivery is acknowledged, the id stays claimed until
// its lease ends) or "release" (the handler failed, the claim ends with its lease).
type ErrorHook func(ctx context.Context, op, id string, err error)

// Guard runs a handler at most once per message id (see the package doc). It is safe for
// concurrent use.
type Guard struct {
	store         Store
	lease, ttl    time.Duration
	inFlightRetry time.Duration
	waitPoll      time.Duration // > 0: wait for an in-flight id instead of failing
	onError       ErrorHook
}

// Option configures [New].
type Option interface{ apply(*Guard) error }

type optionFunc func(*Guard) error

func (f optionFunc) apply(g *Guard) error { return f(g) }

// WithLease sets how long a claim protects an id while its handler runs; a worker that
// dies holding a claim blocks the id for at most this long. Choose it longer than the
// handler's slowest run: past it, another delivery may run the same id. Default:
// [DefaultLease]. d ≤ 0 is an error.
func WithLease(d time.Duration) Option {
	return optionFunc(func(g *Guard) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease %s, want > 0", ErrInvalidOption, d)
		}
		g.lease = d
		return nil
	})
}

// WithTTL sets how long a successful id is remembered; a duplicate delivered later runs
// again. Default: [DefaultTTL]. d ≤ 0 is an error.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(g *Guard) error {
		if d <= 0 {
			return fmt.Errorf("%w: ttl %s, want > 0", ErrInvalidOption, d)
		}
		g.ttl = d
		return nil
	})
}

// WithInFlightRetry bounds the retry delay of a delivery whose id is in flight elsewhere:
// [Guard.Middleware] returns pulsar.RetryAfter(min(lease left, d), err) and GuardFunc of
// package pulsar/connector asks for a redelivery after the same delay. A short delay finds
// the other run's outcome sooner but may spend more attempts. Default:
// [DefaultInFlightRetry]. d ≤ 0 is an error.
func WithInFlightRetry(d time.Duration) Option {
	return optionFunc(func(g *Guard) error {
		if d <= 0 {
			return fmt.Errorf("%w: in-flight retry %s, want > 0", ErrInvalidOption, d)
		}
		g.inFlightRetry = d
		return nil
	})
}

// WithInFlightWait makes a delivery whose id is in flight elsewhere wait instead of
// failing: it asks the store again every poll (or when the other lease ends, if sooner)
// until the id is remembered (then it is skipped), free (then it runs) or ctx ends (then
// it fails with an [*InFlightError]). The wait holds a consumer worker but spends no
// attempt. Default: off (fail and retry, see [WithInFlightRetry]). poll ≤ 0 is an error.
func WithInFlightWait(poll time.Duration) Option {
	return optionFunc(func(g *Guard) error {
		if poll <= 0 {
			return fmt.Errorf("%w: in-flight wait poll %s, want > 0", ErrInvalidOption, poll)
		}
		g.waitPoll = poll
		return nil
	})
}

// WithErrorHook sets the hook for store failures that do not change the outcome (see
// [ErrorHook]). Default: none.
func WithErrorHook(h ErrorHook) Option {
	return optionFunc(func(g *Guard) error {
		g.onError = h
		return nil
	})
}

// New returns a guard on store. Errors wrap [ErrInvalidOption].
func New(store Store, opts ...Option) (*Guard, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOption)
	}
	g := &Guard{store: store, lease: DefaultLease, ttl: DefaultTTL, inFlightRetry: DefaultInFlightRetry}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Store returns the guard's store.
func (g *Guard) Store() Store { return g.store }

// Forget drops id from the store, so its next delivery runs the handler again. A store
// failure is a [*StoreError].
func (g *Guard) Forget(ctx context.Context, id string) error {
	if err := g.store.Forget(ctx, id); err != nil {
		return &StoreError{Op: "forget", ID: id, Err: err}
	}
	return nil
}

// Do runs fn for the delivery of message id unless id is remembered or in flight. It
// returns what it did and:
//   - fn's error when fn ran and failed (the claim is released);
//   - an [*InFlightError] when another holder's lease has not ended (NotRun);
//   - a [*StoreError] when the store could not answer the claim (NotRun);
//   - nil when fn succeeded (the id is remembered) or the id was skipped.
//
// An empty id runs fn unguarded (RanUnguarded). A panic in fn releases the claim and goes
// on panicking.
func (g *Guard) Do(ctx context.Context, id string, fn func(ctx context.Context) error) (Result, error) {
	if id == "" {
		return RanUnguarded, fn(ctx)
	}
	var waiting *InFlightError // the last in-flight answer, while waiting for it to end
	for {
		c, err := g.store.Claim(ctx, id, g.lease)
		if err != nil {
			if waiting != nil && ctx.Err() != nil {
				// The wait ended with ctx during a poll: the message is still in flight
				// as far as anyone knows, and the store did not fail.
				return NotRun, errors.Join(waiting, fmt.Errorf("idempotency: waiting for an in-flight message: %w", ctx.Err()))
			}
			return NotRun, &StoreError{Op: "claim", ID: id, Err: err}
		}
		switch c.Status {
		case StatusDone:
			return Skipped, nil
		case StatusClaimed:
			return Ran, g.run(ctx, id, c.Token, fn)
		case StatusInFlight:
			if g.waitPoll <= 0 {
				return NotRun, &InFlightError{ID: id, LeaseLeft: c.LeaseLeft}
			}
			waiting = &InFlightError{ID: id, LeaseLeft: c.LeaseLeft}
			if err := g.wait(ctx, c.LeaseLeft); err != nil {
				return NotRun, errors.Join(waiting, err)
			}
		default:
			return NotRun, &StoreError{Op: "claim", ID: id, Err: fmt.Errorf("unknown claim status %s", c.Status)}
		}
	}
}

// wait sleeps until the next poll of an in-flight id, or ctx's end.
func (g *Guard) wait(ctx context.Context, leaseLeft time.Duration) error {
	d := g.waitPoll
	if leaseLeft > 0 && leaseLeft < d {
		d = leaseLeft
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("idempotency: waiting for an in-flight message: %w", ctx.Err())
	}
}

func (g *Guard) run(ctx context.Context, id, token string, fn func(ctx context.Context) error) (err error) {
	settled := false
	defer func() {
		if settled {
			return
		}
		// fn panicked: free the id for the next delivery, then go on panicking.
		g.release(ctx, id, token)
	}()
	err = fn(ctx)
	settled = true
	if err != nil {
		g.release(ctx, id, token)
		return err
	}
	// The effect happened: record it even if the delivery's ctx is ending.
	if cerr := g.store.Commit(context.WithoutCancel(ctx), id, token, g.ttl); cerr != nil {
		g.report(ctx, "commit", id, cerr)
	}
	return nil
}

func (g *Guard) release(ctx context.Context, id, token string) {
	if err := g.store.Release(context.WithoutCancel(ctx), id, token); err != nil {
		g.report(ctx, "release", id, err)
	}
}

func (g *Guard) report(ctx context.Context, op, id string, err error) {
	if g.onError != nil {
		g.onError(ctx, op, id, &StoreError{Op: op, ID: id, Err: err})
	}
}

// InFlightDelay returns the retry delay for a delivery that [Guard.Do] did not run because
// its id is in flight elsewhere: when err holds an [*InFlightError], the smaller of the
// lease left and [WithInFlightRetry], and true; otherwise 0 and false. [Guard.Middleware]
// and the messaging runtime's wrapper (pulsar/connector's GuardFunc) ask for a redelivery
// after it.
func (g *Guard) InFlightDelay(err error) (time.Duration, bool) {
	var ife *InFlightError
	if !errors.As(err, &ife) {
		return 0, false
	}
	d := g.inFlightRetry
	if ife.LeaseLeft > 0 && ife.LeaseLeft < d {
		d = ife.LeaseLeft
	}
	return d, true
}

// Middleware returns the guard as pulsar consumer middleware, a Handler hook
// (pulsar.WithHooks(pulsar.Hooks{Handler: g.Middleware()})),
// keyed on the envelope's meta.id: a remembered id is acknowledged without running the
// handler; an id in flight elsewhere fails with pulsar.RetryAfter(min(lease left,
// [WithInFlightRetry]), *InFlightError); a store failure fails the delivery with a
// [*StoreError] (retried by the consumer's policy, the handler not run); the handler's own
// outcome (nil, an error, pulsar.DeadLetter, pulsar.RetryAfter) passes through unchanged.
// Put it outside payload validation, so a message dead-lettered as invalid is never
// remembered.
func (g *Guard) Middleware() func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
	return func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
		return func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			res, err := g.Do(ctx, env.Meta.ID, func(ctx context.Context) error { return next(ctx, env, msg) })
			if res == NotRun {
				if d, ok := g.InFlightDelay(err); ok {
					return bqpulsar.RetryAfter(d, err)
				}
			}
			return err
		}
	}
}
