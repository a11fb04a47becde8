package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Status is the answer of [Store.Claim].
type Status int

// The answers of a claim.
const (
	// StatusClaimed: the id was free (never seen, released, or its lease or TTL ended);
	// the caller now holds it for the lease and must Commit or Release it.
	StatusClaimed Status = iota + 1
	// StatusDone: the id is remembered; its handler already succeeded.
	StatusDone
	// StatusInFlight: another holder's lease on the id has not ended.
	StatusInFlight
)

// String returns "claimed", "done" or "in-flight".
func (s Status) String() string {
	switch s {
	case StatusClaimed:
		return "claimed"
	case StatusDone:
		return "done"
	case StatusInFlight:
		return "in-flight"
	default:
		return fmt.Sprintf("Status(%d)", int(s))
	}
}

// Claim is the answer of [Store.Claim].
type Claim struct {
	// Status says whether the caller holds the id, or why not.
	Status Status
	// Token identifies the caller's claim (StatusClaimed only); pass it to Renew, Commit
	// and Release, which succeed only while it is the id's current token. It is Fence in
	// decimal for the stores of this module; other stores may use any text.
	Token string
	// Fence is the claim's fencing token (StatusClaimed only): it increases with every
	// claim of the id, so a later holder always has a larger one. A downstream system that
	// refuses a write carrying a smaller fence than the last it accepted cannot be written
	// to by a holder whose lease was lost (see the package doc).
	Fence uint64
	// LeaseLeft is how long the other holder's lease still runs (StatusInFlight only).
	LeaseLeft time.Duration
}

// Store keeps claims and remembered message ids. Implementations must be safe for
// concurrent use and must answer Claim atomically: of two concurrent claims of a free id,
// exactly one gets StatusClaimed. Every method returns an error when the store cannot
// answer; the [Guard] treats that as a failed delivery, never as a skip.
//
// A token is current while no later claim of its id was made: Renew, Commit and Release
// succeed only for the current token, and fail with an error wrapping [ErrLeaseLost]
// otherwise. A token whose lease ended stays current until someone else claims the id, so a
// slow holder that nobody overtook may still renew or commit.
type Store interface {
	// Claim takes id for lease if it is free, or says who has it. A claim gets a fence
	// larger than every earlier claim of the id.
	Claim(ctx context.Context, id string, lease time.Duration) (Claim, error)
	// Renew extends the claim with token to lease from now. It fails with [ErrLeaseLost]
	// when token is not current, or the id is no longer claimed.
	Renew(ctx context.Context, id, token string, lease time.Duration) error
	// Commit turns the claim with token into a remembered id kept for ttl. It fails with
	// [ErrLeaseLost] when token is not current. An id that the store no longer knows at
	// all (a restarted server without persistence, say) is remembered: nobody claimed it
	// since, and the effect has happened.
	Commit(ctx context.Context, id, token string, ttl time.Duration) error
	// Release ends the claim with token so the next delivery runs the handler. It fails
	// with [ErrLeaseLost] when the id is not claimed with that token (then it changes
	// nothing).
	Release(ctx context.Context, id, token string) error
	// Forget drops id, claimed or remembered, so its next delivery runs again (a manual
	// replay).
	Forget(ctx context.Context, id string) error
}

// ErrStore is wrapped by every [*StoreError]: errors.Is(err, ErrStore) tells a store
// failure from a handler failure.
var ErrStore = errors.New("idempotency: store failure")

// ErrStoreFull is returned by [MemoryStore.Claim] when the store holds its maximum number of
// live entries: the store refuses new ids rather than forget remembered ones early.
var ErrStoreFull = errors.New("idempotency: store full")

// ErrInFlight is wrapped by every [*InFlightError].
var ErrInFlight = errors.New("idempotency: message in flight")

// ErrLeaseLost is wrapped by the errors of [Store.Renew], [Store.Commit] and
// [Store.Release] for a token that is not current, and by every [*LeaseLostError]: the
// cause of a handler's ctx cancelled because its claim ended.
var ErrLeaseLost = errors.New("idempotency: lease lost")

// ErrInvalidOption is wrapped by the errors of [New] and the store constructors for a bad
// option or argument.
var ErrInvalidOption = errors.New("idempotency: invalid option")

// StoreError is a failure of the store, returned by [Guard.Do] when the claim could not be
// answered: the handler was not run.
type StoreError struct {
	// Op is the store method that failed: "claim", "renew", "commit", "release" or
	// "forget".
	Op string
	// ID is the message id.
	ID string
	// Err is the store's error.
	Err error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("idempotency: store %s of %q: %v", e.Op, e.ID, e.Err)
}

// Unwrap returns ErrStore and the store's error.
func (e *StoreError) Unwrap() []error { return []error{ErrStore, e.Err} }

// InFlightError is returned by [Guard.Do] when another holder's lease on the id has not
// ended: the handler was not run, and the delivery should be retried after LeaseLeft at the
// latest.
type InFlightError struct {
	// ID is the message id.
	ID string
	// LeaseLeft is how long the other holder's lease still runs.
	LeaseLeft time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("idempotency: message %q in flight elsewhere (lease ends in %s)", e.ID, e.LeaseLeft)
}

// Unwrap returns ErrInFlight.
func (*InFlightError) Unwrap() error { return ErrInFlight }

// LeaseLostError is the cause of a handler's ctx cancelled by the [Guard] (read it with
// context.Cause) and the error of [Guard.Do] for that run: the claim on ID with Fence ended
// while the handler ran, because another claim took the id (Err wraps ErrLeaseLost) or
// because the store could not renew it before the lease ran out (Err is the renewal's
// [*StoreError]). The handler should stop: another delivery may be running the same id.
type LeaseLostError struct {
	// ID is the message id (the store key the guard used).
	ID string
	// Fence is the lost claim's fence.
	Fence uint64
	// Err is why the lease was lost.
	Err error
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("idempotency: lease on %q (fence %d) lost: %v", e.ID, e.Fence, e.Err)
}

// Unwrap returns ErrLeaseLost and the cause.
func (e *LeaseLostError) Unwrap() []error { return []error{ErrLeaseLost, e.Err} }

// Taken reports whether the lease was lost to another claim (rather than to a store that
// could not renew it): the id is then in flight elsewhere.
func (e *LeaseLostError) Taken() bool { return !errors.Is(e.Err, ErrStore) }
