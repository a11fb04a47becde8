package idempotency

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// DefaultMaxEntries is the [MemoryStore]'s default bound on live entries.
const DefaultMaxEntries = 100_000

// MemoryStore is a bounded, process-local [Store]. It holds at most its maximum number of
// live entries (claims and remembered ids); every entry expires (a claim with its lease, a
// remembered id with its TTL) and expired entries are swept when room is needed. When it is
// full of live entries, Claim of a new id fails with [ErrStoreFull]: it never forgets a
// remembered id early. A released id keeps its last token until room is needed, so that a
// holder overtaken by that later claim cannot commit it (see [Store]). It is safe for
// concurrent use. It does not share state across processes: a fleet needs
// redisstore.Store.
type MemoryStore struct {
	mu        sync.Mutex
	max       int
	entries   map[string]memEntry
	released  int // entries in state memReleased
	now       func() time.Time
	seq       uint64
	nextSweep time.Time // no claim or remembered id expires before it: a sweep earlier finds nothing
}

// memState is the state of a MemoryStore entry.
type memState int

const (
	memClaimed  memState = iota // claimed until expires
	memDone                     // remembered until expires
	memReleased                 // free; kept only for its token, dropped when room is needed
)

type memEntry struct {
	token   string // the token of the id's last claim (or of its commit)
	state   memState
	expires time.Time // zero when released
}

// MemoryOption configures [NewMemoryStore].
type MemoryOption interface{ applyMemory(*MemoryStore) error }

type memoryOptionFunc func(*MemoryStore) error

func (f memoryOptionFunc) applyMemory(s *MemoryStore) error { return f(s) }

// WithMaxEntries bounds the live entries (claims and remembered ids) of a [MemoryStore].
// Default: [DefaultMaxEntries]. n < 1 is an error.
func WithMaxEntries(n int) MemoryOption {
	return memoryOptionFunc(func(s *MemoryStore) error {
		if n < 1 {
			return fmt.Errorf("%w: max entries %d, want at least 1", ErrInvalidOption, n)
		}
		s.max = n
		return nil
	})
}

// WithClock sets the clock of a [MemoryStore], for tests. Default: time.Now. nil is an
// error.
func WithClock(now func() time.Time) MemoryOption {
	return memoryOptionFunc(func(s *MemoryStore) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		s.now = now
		return nil
	})
}

// NewMemoryStore returns an empty store. Errors wrap [ErrInvalidOption].
func NewMemoryStore(opts ...MemoryOption) (*MemoryStore, error) {
	s := &MemoryStore{max: DefaultMaxEntries, entries: map[string]memEntry{}, now: time.Now}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyMemory(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

var _ Store = (*MemoryStore)(nil)

// Len returns the number of entries held, expired ones not yet swept and released ones
// (kept for their token) included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Claim implements [Store]. It fails with [ErrStoreFull] when a new id finds the store full
// of live entries, and with [ErrInvalidOption] for lease ≤ 0.
func (s *MemoryStore) Claim(_ context.Context, id string, lease time.Duration) (Claim, error) {
	if lease <= 0 {
		return Claim{}, fmt.Errorf("%w: lease %s, want > 0", ErrInvalidOption, lease)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, ok := s.entries[id]
	if ok && e.state != memReleased && now.Before(e.expires) {
		if e.state == memDone {
			return Claim{Status: StatusDone}, nil
		}
		return Claim{Status: StatusInFlight, LeaseLeft: e.expires.Sub(now)}, nil
	}
	if !ok && len(s.entries) >= s.max {
		s.sweep(now)
		if len(s.entries) >= s.max {
			return Claim{}, fmt.Errorf("%w: %d live entries", ErrStoreFull, len(s.entries))
		}
	}
	if ok && e.state == memReleased {
		s.released--
	}
	// One counter for every id: a claim's fence is larger than every earlier one, of this
	// id or any other, so fences never go back, even for an id swept and claimed again.
	s.seq++
	token := strconv.FormatUint(s.seq, 10)
	expires := now.Add(lease)
	s.entries[id] = memEntry{token: token, state: memClaimed, expires: expires}
	if expires.Before(s.nextSweep) {
		s.nextSweep = expires
	}
	return Claim{Status: StatusClaimed, Token: token, Fence: s.seq}, nil
}

// Renew implements [Store]. lease ≤ 0 is an error wrapping [ErrInvalidOption].
func (s *MemoryStore) Renew(_ context.Context, id, token string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("%w: lease %s, want > 0", ErrInvalidOption, lease)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok || e.state != memClaimed || e.token != token {
		return fmt.Errorf("%w: %q is not claimed with token %s", ErrLeaseLost, id, token)
	}
	e.expires = s.now().Add(lease)
	s.entries[id] = e
	return nil
}

// sweep makes room: it drops expired entries (at most once per earliest expiry), then, if
// the store is still full, the released ones.
func (s *MemoryStore) sweep(now time.Time) {
	if !now.Before(s.nextSweep) {
		var next time.Time
		for id, e := range s.entries {
			if e.state == memReleased {
				continue
			}
			if !now.Before(e.expires) {
				delete(s.entries, id)
				continue
			}
			if next.IsZero() || e.expires.Before(next) {
				next = e.expires
			}
		}
		s.nextSweep = next
	}
	if len(s.entries) >= s.max && s.released > 0 {
		for id, e := range s.entries {
			if e.state == memReleased {
				delete(s.entries, id)
			}
		}
		s.released = 0
	}
}

// Commit implements [Store]. ttl ≤ 0 is an error wrapping [ErrInvalidOption]. Committing
// an id whose claim was swept never fails for want of room: the id was counted when it was
// claimed.
func (s *MemoryStore) Commit(_ context.Context, id, token string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: ttl %s, want > 0", ErrInvalidOption, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if ok && e.token != token {
		return fmt.Errorf("%w: %q was claimed after token %s", ErrLeaseLost, id, token)
	}
	if ok && e.state == memReleased {
		s.released--
	}
	expires := s.now().Add(ttl)
	s.entries[id] = memEntry{token: token, state: memDone, expires: expires}
	if expires.Before(s.nextSweep) {
		s.nextSweep = expires
	}
	return nil
}

// Release implements [Store].
func (s *MemoryStore) Release(_ context.Context, id, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok || e.state != memClaimed || e.token != token {
		return fmt.Errorf("%w: %q is not claimed with token %s", ErrLeaseLost, id, token)
	}
	s.entries[id] = memEntry{token: token, state: memReleased}
	s.released++
	return nil
}

// Forget implements [Store].
func (s *MemoryStore) Forget(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[id]; ok && e.state == memReleased {
		s.released--
	}
	delete(s.entries, id)
	return nil
}
