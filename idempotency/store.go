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
	// Token identifies the caller's claim (StatusClaimed only); pass it to Commit and
	// Release so that a holder whose lease ended cannot release someone else's claim.
	Token string
	// LeaseLeft is how long the other holder's lease still runs (StatusInFlight only).
	LeaseLeft time.Duration
}

// Store keeps claims and remembered message ids. Implementations must be safe for
// concurrent use and must answer Claim atomically: of two concurrent claims of a free id,
// exactly one gets StatusClaimed. Every method returns an error when the store cannot
// answer; the [Guard] treats that as a failed delivery, never as a skip.
type Store interface {
	// Claim takes id for lease if it is free, or says who has it.
	Claim(ctx context.Context, id string, lease time.Duration) (Claim, error)
	// Commit turns a claim into a remembered id kept for ttl. It remembers the id even
	// when the claim's lease has ended meanwhile (the effect has happened).
	Commit(ctx context.Context, id, token string, ttl time.Duration) error
	// Release ends the claim with token so the next delivery runs the handler. It does
	// nothing when the id is no longer held with that token.
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

// ErrInvalidOption is wrapped by the errors of [New] and the store constructors for a bad
// option or argument.
var ErrInvalidOption = errors.New("idempotency: invalid option")

// StoreError is a failure of the store, returned by [Guard.Do] when the claim could not be
// answered: the handler was not run.
type StoreError struct {
	// Op is the store method that failed: "claim", "commit", "release" or "forget".
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
