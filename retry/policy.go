package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// ErrInvalidPolicy is returned by [Policy.Validate] (and by the consumer constructors that
// validate a policy) when a field is out of range.
var ErrInvalidPolicy = errors.New("retry: invalid policy")

// DefaultMaxAttempts is the number of deliveries, the first included, when nothing else is
// configured.
const DefaultMaxAttempts = 3

// Strategy is how a failed delivery is retried.
type Strategy int

const (
	// Republish sends a copy with attempts raised to the message's (parent) topic, then
	// acknowledges the original once the send succeeded. It is the default and works on every
	// subscription type.
	Republish Strategy = iota
	// Nack negatively acknowledges the message so that the broker redelivers it. Only valid
	// on Shared and Key_Shared subscriptions, where the broker raises the redelivery count.
	Nack
)

// String returns "republish" or "nack".
func (s Strategy) String() string {
	switch s {
	case Republish:
		return "republish"
	case Nack:
		return "nack"
	default:
		return fmt.Sprintf("Strategy(%d)", int(s))
	}
}

// Backoff is an exponential delay with jitter between deliveries. The zero value means no
// delay.
type Backoff struct {
	// Initial is the delay before the first retry. Zero or negative means no delay at all.
	Initial time.Duration
	// Max caps the delay. Zero means no cap.
	Max time.Duration
	// Multiplier grows the delay per retry: Initial × Multiplier^(retry-1). Values below 1
	// (including zero) mean 1, a constant delay.
	Multiplier float64
	// Jitter is the fraction in [0, 1] of the delay that is randomised downwards: the delay
	// actually used lies in [d×(1−Jitter), d]. Zero means no jitter.
	Jitter float64
}

// DefaultBackoff is the backoff of [DefaultPolicy]: 1 s, doubling, at most 1 min, 20 %
// jitter.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.2}
}

// Delay returns the delay before retry number retry (1 for the first retry). It is never
// negative and never above Max (when Max is set).
func (b Backoff) Delay(retry int) time.Duration {
	if b.Initial <= 0 {
		return 0
	}
	retry = max(retry, 1)
	mult := b.Multiplier
	if mult < 1 || math.IsNaN(mult) {
		mult = 1
	}
	d := float64(b.Initial) * math.Pow(mult, float64(retry-1))
	if b.Max > 0 && d > float64(b.Max) {
		d = float64(b.Max)
	}
	if d > math.MaxInt64/2 || math.IsInf(d, 0) || math.IsNaN(d) {
		d = math.MaxInt64 / 2
	}
	if j := min(max(b.Jitter, 0), 1); j > 0 {
		d -= d * j * rand.Float64()
	}
	return time.Duration(d)
}

// Validate reports an error wrapping [ErrInvalidPolicy] when a field is out of range.
func (b Backoff) Validate() error {
	switch {
	case b.Max < 0:
		return fmt.Errorf("%w: backoff max %s is negative", ErrInvalidPolicy, b.Max)
	case math.IsNaN(b.Multiplier) || math.IsInf(b.Multiplier, 0) || b.Multiplier < 0:
		return fmt.Errorf("%w: backoff multiplier %v is not a finite non-negative number", ErrInvalidPolicy, b.Multiplier)
	case math.IsNaN(b.Jitter) || b.Jitter < 0 || b.Jitter > 1:
		return fmt.Errorf("%w: backoff jitter %v is outside [0, 1]", ErrInvalidPolicy, b.Jitter)
	}
	return nil
}

// Policy is how a consumer retries failed deliveries.
type Policy struct {
	// MaxAttempts is the number of deliveries in total, the first included. Zero means
	// [DefaultMaxAttempts]; negative values are invalid.
	MaxAttempts int
	// Strategy is how a retry is made. Default (zero value): [Republish].
	Strategy Strategy
	// Backoff delays retries. The zero value means no delay.
	Backoff Backoff
}

// DefaultPolicy returns the policy a consumer uses when none is given: 3 deliveries,
// [Republish], [DefaultBackoff].
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: DefaultMaxAttempts, Strategy: Republish, Backoff: DefaultBackoff()}
}

// Attempts returns MaxAttempts, or [DefaultMaxAttempts] when it is zero.
func (p Policy) Attempts() int {
	if p.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// Validate reports an error wrapping [ErrInvalidPolicy] when a field is out of range.
func (p Policy) Validate() error {
	if p.MaxAttempts < 0 {
		return fmt.Errorf("%w: max attempts %d is below 1", ErrInvalidPolicy, p.MaxAttempts)
	}
	if p.Strategy != Republish && p.Strategy != Nack {
		return fmt.Errorf("%w: unknown strategy %s", ErrInvalidPolicy, p.Strategy)
	}
	return p.Backoff.Validate()
}

// Wait blocks for d or until ctx ends, whichever comes first, on a timer (never a sleep).
// It returns nil after the full wait and ctx.Err() when ctx ended first. d ≤ 0 returns at
// once (still ctx.Err() when ctx has already ended).
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err() //nolint:wrapcheck // documented: ctx.Err() as is
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err() //nolint:wrapcheck // documented: ctx.Err() as is
	}
}
