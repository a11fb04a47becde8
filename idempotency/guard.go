package idempotency

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// The defaults of a [Guard].
const (
	DefaultLease         = 30 * time.Second
	DefaultTTL           = 24 * time.Hour
	DefaultInFlightRetry = 2 * time.Second
	// DefaultCommitRetry bounds the retries of a failed commit (see [WithCommitRetry]).
	DefaultCommitRetry = 5 * time.Second
)

// Commit retry backoff: from commitBackoffMin, doubling up to commitBackoffMax, each wait
// jittered down by up to a half.
const (
	commitBackoffMin = 20 * time.Millisecond
	commitBackoffMax = time.Second
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
	// RanUncommitted: the handler ran and succeeded, but the id could not be remembered
	// (Do's error, a [*StoreError] with Op "commit", says why). The delivery should be
	// acknowledged all the same, since the effect happened, and the failure reported.
	RanUncommitted
)

// String returns "not-run", "ran", "skipped", "ran-unguarded" or "ran-uncommitted".
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
	case RanUncommitted:
		return "ran-uncommitted"
	default:
		return fmt.Sprintf("Result(%d)", int(r))
	}
}

// ErrorHook receives the store failures that do not change a delivery's outcome by
// themselves: op is "commit" for every failed try of a commit (the guard retries it, see
// [WithCommitRetry]; the last one, when it gives up, is also Do's error with
// [RanUncommitted]), "renew" for a failed renewal of a lease (the guard tries again; when
// the lease runs out the handler's ctx is cancelled with a [*LeaseLostError]) or
// "release" (the handler failed; the claim ends with its lease).
type ErrorHook func(ctx context.Context, op, id string, err error)

// Guard runs a handler at most once per message id (see the package doc). It is safe for
// concurrent use.
type Guard struct {
	store         Store
	lease, ttl    time.Duration
	inFlightRetry time.Duration
	waitPoll      time.Duration // > 0: wait for an in-flight id instead of deferring
	commitWithin  time.Duration
	scope         string
	scoped        bool // WithScope was given: scope is fixed
	onError       ErrorHook
}

// Option configures [New].
type Option interface{ apply(*Guard) error }

type optionFunc func(*Guard) error

func (f optionFunc) apply(g *Guard) error { return f(g) }

// durationOption is an Option that sets a duration of the guard, refusing d ≤ 0 (d < 0
// when zeroOK) with an error that names what.
func durationOption(what string, d time.Duration, zeroOK bool, set func(g *Guard)) Option {
	return optionFunc(func(g *Guard) error {
		switch {
		case zeroOK && d < 0:
			return fmt.Errorf("%w: %s %s, want ≥ 0", ErrInvalidOption, what, d)
		case !zeroOK && d <= 0:
			return fmt.Errorf("%w: %s %s, want > 0", ErrInvalidOption, what, d)
		}
		set(g)
		return nil
	})
}

// WithLease sets how long a claim protects an id without being renewed. While the handler
// runs, the guard renews the claim every third of the lease, so a slow handler keeps it;
// a worker that dies holding a claim blocks the id for at most this long. When the lease
// cannot be renewed (another claim took the id, or the store failed until the lease ran
// out) the handler's ctx is cancelled with a [*LeaseLostError]. Default: [DefaultLease].
// d ≤ 0 is an error.
func WithLease(d time.Duration) Option {
	return durationOption("lease", d, false, func(g *Guard) { g.lease = d })
}

// WithTTL sets how long a successful id is remembered; a duplicate delivered later runs
// again. Default: [DefaultTTL]. d ≤ 0 is an error.
func WithTTL(d time.Duration) Option {
	return durationOption("ttl", d, false, func(g *Guard) { g.ttl = d })
}

// WithInFlightRetry bounds the delay of a delivery whose id is in flight elsewhere:
// [Guard.Middleware] returns pulsar.Defer(min(lease left, d), err), which redelivers the
// message without counting an attempt, and GuardFunc of package pulsar/connector asks for
// the same. A short delay finds the other run's outcome sooner, at the cost of more
// redeliveries. Default: [DefaultInFlightRetry]. d ≤ 0 is an error.
func WithInFlightRetry(d time.Duration) Option {
	return durationOption("in-flight retry", d, false, func(g *Guard) { g.inFlightRetry = d })
}

// WithInFlightWait makes a delivery whose id is in flight elsewhere wait instead of being
// deferred: it asks the store again every poll (or when the other lease ends, if sooner)
// until the id is remembered (then it is skipped), free (then it runs) or ctx ends (then
// it fails with an [*InFlightError]). The wait holds a consumer worker. Default: off
// (defer, see [WithInFlightRetry]). poll ≤ 0 is an error.
func WithInFlightWait(poll time.Duration) Option {
	return durationOption("in-flight wait poll", poll, false, func(g *Guard) { g.waitPoll = poll })
}

// WithCommitRetry bounds the retries of a commit that fails after the handler succeeded:
// the guard tries again with a jittered backoff (20 ms doubling up to 1 s) until the
// commit succeeds, d has passed since the first try, or the delivery's ctx ends. Each
// failed try goes to [WithErrorHook]; when the guard gives up, [Guard.Do] returns
// [RanUncommitted] with the last failure and [Guard.Middleware] acknowledges the delivery
// with pulsar.AckWithWarning (Event hook, log, Health.Warnings), since the effect has
// happened. A refused commit (the claim was taken, [ErrLeaseLost]) is not retried. Keep d
// below the consumer's ack timeout, if it has one. Default: [DefaultCommitRetry]. 0 tries
// once; d < 0 is an error.
func WithCommitRetry(d time.Duration) Option {
	return durationOption("commit retry", d, true, func(g *Guard) { g.commitWithin = d })
}

// WithScope fixes the scope of the keys [Guard.Key] builds: "scope/meta.id". By default
// the scope is the queue the message was received on (the logical queue name of its
// topic, so the partitions of a queue share it; or meta.queue where the topic is not
// known), so the same meta.id on two queues is two ids. Use WithScope to tell apart two
// applications that consume the same queue on different subscriptions with one store and
// key prefix (the subscription name is a good scope), or to share ids across queues
// (WithScope("") uses the bare meta.id, as before this option existed). A scope holding
// "/" is an error.
func WithScope(scope string) Option {
	return optionFunc(func(g *Guard) error {
		if strings.Contains(scope, "/") {
			return fmt.Errorf("%w: scope %q holds a /", ErrInvalidOption, scope)
		}
		g.scope, g.scoped = scope, true
		return nil
	})
}

// WithErrorHook sets the hook for store failures that do not change the outcome by
// themselves (see [ErrorHook]). Default: none.
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
	g := &Guard{
		store: store, lease: DefaultLease, ttl: DefaultTTL, inFlightRetry: DefaultInFlightRetry,
		commitWithin: DefaultCommitRetry,
	}
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

// Key returns the store key of a delivery of env received on topic ("" when not known):
// the scope (see [WithScope]), "/" and meta.id; the bare meta.id when the scope is empty;
// "" when meta.id is empty (the delivery is not guarded). [Guard.Middleware] and
// pulsar/connector's GuardFunc key every delivery with it, and [Guard.Forget] takes it.
func (g *Guard) Key(env *envelope.Envelope, topic string) string {
	if env == nil || env.Meta.ID == "" {
		return ""
	}
	scope := g.scope
	if !g.scoped {
		scope = queueOf(topic)
		if scope == "" {
			scope = queueOf(env.Meta.Queue)
		}
	}
	if scope == "" {
		return env.Meta.ID
	}
	return scope + "/" + env.Meta.ID
}

// queueOf returns the logical queue name of a topic or queue name, "" when it has none.
func queueOf(topic string) string {
	if envelope.IsBlank(topic) {
		return ""
	}
	q, err := dlq.QueueName(topic)
	if err != nil {
		return ""
	}
	return q
}

// Forget drops id (a key as [Guard.Key] builds it) from the store, so its next delivery
// runs the handler again. A store failure is a [*StoreError].
func (g *Guard) Forget(ctx context.Context, id string) error {
	if err := g.store.Forget(ctx, id); err != nil {
		return &StoreError{Op: "forget", ID: id, Err: err}
	}
	return nil
}

type fenceKey struct{}

// FenceFrom returns the fence of the claim a guarded handler runs under (see
// [Claim].Fence), and false outside a guarded run (an empty id runs unguarded, without
// one). Pass it with every write the handler makes downstream, and have the downstream
// system refuse a fence lower than the last one it accepted for the id: a holder whose
// lease was lost can then no longer overwrite the work of the holder that took over.
func FenceFrom(ctx context.Context) (uint64, bool) {
	f, ok := ctx.Value(fenceKey{}).(uint64)
	return f, ok
}

// Do runs fn for the delivery of message id unless id is remembered or in flight. It
// returns what it did and:
//   - fn's error when fn ran and failed (the claim is released);
//   - a [*LeaseLostError] (joined with fn's error, if any) when the claim ended while fn
//     ran: fn's ctx was cancelled with it as the cause, and the id is not remembered;
//   - a [*StoreError] with Op "commit" and [RanUncommitted] when fn succeeded but the id
//     could not be remembered within [WithCommitRetry];
//   - an [*InFlightError] when another holder's lease has not ended (NotRun);
//   - a [*StoreError] when the store could not answer the claim (NotRun);
//   - nil when fn succeeded (the id is remembered) or the id was skipped.
//
// While fn runs, its ctx carries the claim's fence ([FenceFrom]) and the claim is renewed
// every third of the lease. An empty id runs fn unguarded (RanUnguarded). A panic in fn
// releases the claim and goes on panicking.
func (g *Guard) Do(ctx context.Context, id string, fn func(ctx context.Context) error) (Result, error) {
	if id == "" {
		return RanUnguarded, fn(ctx)
	}
	var waiting *InFlightError // the last in-flight answer, while waiting for it to end
	for {
		asked := time.Now() // the lease runs from the store's answer, so from no earlier than this
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
			return g.run(ctx, id, c, asked, fn)
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

// run runs fn under the claim c, taken at about asked, renewing it while fn runs.
func (g *Guard) run(ctx context.Context, id string, c Claim, asked time.Time, fn func(ctx context.Context) error) (res Result, err error) {
	hctx, cancel := context.WithCancelCause(context.WithValue(ctx, fenceKey{}, c.Fence))
	defer cancel(nil)
	stop := g.keep(ctx, id, c, asked, cancel)
	settled := false
	defer func() {
		if settled {
			return
		}
		// fn panicked: free the id for the next delivery, then go on panicking.
		_ = stop()
		g.release(ctx, id, c.Token)
	}()
	err = fn(hctx)
	settled = true
	if lost := stop(); lost != nil {
		g.release(ctx, id, c.Token) // refused when the claim was taken; frees it otherwise
		return Ran, errors.Join(lost, err)
	}
	if err != nil {
		g.release(ctx, id, c.Token)
		return Ran, err
	}
	if cerr := g.commit(ctx, id, c.Token); cerr != nil {
		return RanUncommitted, cerr
	}
	return Ran, nil
}

// keep renews the claim c every third of the lease until the returned stop is called, and
// cancels the handler's ctx with a *LeaseLostError when the claim is lost: at once when the
// store says another claim took it, or once failed renewals leave no try before the lease
// runs out. stop waits for a renewal in progress and returns the loss, if any. The
// renewals run on a timer, so a handler that ends before the first one costs no goroutine.
func (g *Guard) keep(ctx context.Context, id string, c Claim, asked time.Time, cancel context.CancelCauseFunc) (stop func() *LeaseLostError) {
	every := max(g.lease/3, time.Millisecond)
	rctx, rcancel := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		t       *time.Timer
		stopped bool
		lost    *LeaseLostError
		ticks   sync.WaitGroup // the tick scheduled or running
		held    = asked        // the lease runs until held + lease at the earliest
	)
	tick := func() {
		defer ticks.Done()
		at := time.Now()
		err := g.store.Renew(rctx, id, c.Token, g.lease)
		switch {
		case err == nil:
			held = at
		case rctx.Err() != nil:
			return // stopped, or the delivery ended: not a loss
		case errors.Is(err, ErrLeaseLost):
			lost = &LeaseLostError{ID: id, Fence: c.Fence, Err: err}
			cancel(lost)
			return
		default:
			g.report(ctx, "renew", id, err)
			if time.Since(held)+every >= g.lease {
				lost = &LeaseLostError{ID: id, Fence: c.Fence, Err: &StoreError{Op: "renew", ID: id, Err: err}}
				cancel(lost)
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			ticks.Add(1)
			t.Reset(every)
		}
	}
	mu.Lock()
	ticks.Add(1)
	t = time.AfterFunc(every, tick)
	mu.Unlock()
	return func() *LeaseLostError {
		mu.Lock()
		stopped = true
		if t.Stop() {
			ticks.Done() // the scheduled tick will not run
		}
		mu.Unlock()
		rcancel()
		ticks.Wait()
		return lost
	}
}

// commit remembers id, retrying a failed commit with backoff within commitWithin. It
// returns the last failure as a *StoreError when it gives up.
func (g *Guard) commit(ctx context.Context, id, token string) error {
	// The effect happened: record it even if the delivery's ctx is ending.
	cctx := context.WithoutCancel(ctx)
	giveUp := time.Now().Add(g.commitWithin)
	backoff := commitBackoffMin
	for {
		err := g.store.Commit(cctx, id, token, g.ttl)
		if err == nil {
			return nil
		}
		g.report(ctx, "commit", id, err)
		serr := &StoreError{Op: "commit", ID: id, Err: err}
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrInvalidOption) {
			return serr // no retry can change the answer
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if time.Now().Add(wait).After(giveUp) {
			return serr
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return serr
		}
		backoff = min(2*backoff, commitBackoffMax)
	}
}

func (g *Guard) release(ctx context.Context, id, token string) {
	err := g.store.Release(context.WithoutCancel(ctx), id, token)
	if err != nil && !errors.Is(err, ErrLeaseLost) { // a claim taken by another is theirs to end
		g.report(ctx, "release", id, err)
	}
}

func (g *Guard) report(ctx context.Context, op, id string, err error) {
	if g.onError != nil {
		g.onError(ctx, op, id, &StoreError{Op: op, ID: id, Err: err})
	}
}

// InFlightDelay returns the delay before the next delivery of a message that [Guard.Do]
// did not run, or did not finish, because its id is in flight elsewhere: when err holds an
// [*InFlightError], the smaller of the lease left and [WithInFlightRetry]; when it holds a
// [*LeaseLostError] whose claim was taken by another, [WithInFlightRetry]; and true. For
// any other err, 0 and false. [Guard.Middleware] defers the delivery by it (pulsar.Defer,
// no attempt counted), and the messaging runtime's wrapper (pulsar/connector's GuardFunc)
// asks for the same.
func (g *Guard) InFlightDelay(err error) (time.Duration, bool) {
	var ife *InFlightError
	if errors.As(err, &ife) {
		d := g.inFlightRetry
		if ife.LeaseLeft > 0 && ife.LeaseLeft < d {
			d = ife.LeaseLeft
		}
		return d, true
	}
	var lle *LeaseLostError
	if errors.As(err, &lle) && lle.Taken() {
		return g.inFlightRetry, true
	}
	return 0, false
}

// Middleware returns the guard as pulsar consumer middleware, a Handler hook
// (pulsar.WithHooks(pulsar.Hooks{Handler: g.Middleware()})),
// keyed by [Guard.Key] (the queue the message was received on, and meta.id):
//   - a remembered id is acknowledged without running the handler or counting an attempt;
//   - an id in flight elsewhere, or whose claim another delivery took while the handler
//     ran, is deferred: pulsar.Defer([Guard.InFlightDelay], err), redelivered without
//     counting an attempt, so a duplicate never becomes a dead letter;
//   - a store failure (the claim could not be answered, or renewals failed until the lease
//     ran out) fails the delivery with a [*StoreError] or [*LeaseLostError], retried by the
//     consumer's policy;
//   - a handler that succeeded but whose id could not be remembered is acknowledged with
//     pulsar.AckWithWarning (the commit's [*StoreError]);
//   - a handler outcome of pulsar.AckWithWarning is a success: the id is remembered and the
//     outcome passes through (joined with the commit's [*StoreError] when the id could not
//     be remembered);
//   - otherwise the handler's own outcome (nil, an error, pulsar.DeadLetter,
//     pulsar.RetryAfter) passes through unchanged.
//
// Put it outside payload validation, so a message dead-lettered as invalid is never
// remembered.
func (g *Guard) Middleware() func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
	return func(next bqpulsar.HandlerFunc) bqpulsar.HandlerFunc {
		return func(ctx context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			topic := ""
			if msg != nil {
				topic = msg.Topic()
			}
			var warned error // the handler's own pulsar.AckWithWarning: a success
			res, err := g.Do(ctx, g.Key(env, topic), func(ctx context.Context) error {
				out := next(ctx, env, msg)
				if out != nil && seam.Warning(out) {
					warned = out
					return nil
				}
				return out
			})
			switch {
			case res == RanUncommitted && warned != nil:
				return bqpulsar.AckWithWarning(errors.Join(warned, err))
			case res == RanUncommitted:
				return bqpulsar.AckWithWarning(err)
			case res == Ran && err == nil && warned != nil:
				return warned
			}
			if err != nil && res != Skipped {
				if d, ok := g.InFlightDelay(err); ok {
					return bqpulsar.Defer(d, err)
				}
			}
			return err
		}
	}
}
