package reactive

import (
	"fmt"
	"math"
	"sync/atomic"
)

// demandCancelled marks a cancelled Demand; real demand is never negative.
const demandCancelled int64 = math.MinInt64

// Demand is the outstanding demand of one subscription: one atomic int64,
// additive and saturating at [Unbounded], with a sentinel for "cancelled".
// The zero value is ready to use (no demand, not cancelled). All methods are
// safe for concurrent use.
type Demand struct {
	v atomic.Int64
}

// Add adds n to the demand and returns the previous value. n <= 0 leaves the
// demand unchanged and returns an error wrapping [ErrNonPositiveRequest]
// (rule 3.9); the sum saturates at Unbounded (rule 3.17). After Cancel, Add is
// a no-op that returns (0, nil) (rule 3.6).
func (d *Demand) Add(n int64) (prev int64, err error) {
	for {
		cur := d.v.Load()
		if cur == demandCancelled {
			return 0, nil
		}
		if n <= 0 {
			return cur, fmt.Errorf("%w: request(%d) (rule 3.9 requires n > 0)", ErrNonPositiveRequest, n)
		}
		next := cur + n
		if next < 0 || cur >= Unbounded { // overflow: saturate
			next = Unbounded
		}
		if d.v.CompareAndSwap(cur, next) {
			return cur, nil
		}
	}
}

// Take takes up to k units (k > 0) and returns how many it took. Unbounded
// demand is never decremented: Take then returns k. A cancelled Demand yields 0.
func (d *Demand) Take(k int64) int64 {
	if k <= 0 {
		return 0
	}
	for {
		cur := d.v.Load()
		switch cur {
		case demandCancelled, 0:
			return 0
		case Unbounded:
			return k
		}
		take := min(k, cur)
		if d.v.CompareAndSwap(cur, cur-take) {
			return take
		}
	}
}

// TopUp raises the outstanding demand to at least target and returns the
// amount it added (0 when the demand already reaches target, or after Cancel).
// Pumps use it to keep the credit they requested upstream in step with the
// demand they serve.
func (d *Demand) TopUp(target int64) int64 {
	for {
		cur := d.v.Load()
		if cur == demandCancelled || cur >= target {
			return 0
		}
		if d.v.CompareAndSwap(cur, target) {
			return target - cur
		}
	}
}

// Outstanding returns the current demand; 0 after Cancel.
func (d *Demand) Outstanding() int64 {
	cur := d.v.Load()
	if cur == demandCancelled {
		return 0
	}
	return cur
}

// Cancelled reports whether Cancel was called.
func (d *Demand) Cancelled() bool { return d.v.Load() == demandCancelled }

// Cancel marks the demand cancelled; it reports true only for the first call
// (rule 3.7: later cancellations are no-ops).
func (d *Demand) Cancel() (first bool) {
	return d.v.Swap(demandCancelled) != demandCancelled
}

// Trampoline serializes a drain loop without locks: Run executes drain unless
// a drain is already running (on any goroutine, or further up the current
// stack), in which case it only marks "run again" and returns. The running
// drain repeats until no such mark is left, so no wake-up is lost (rules 1.3,
// 3.2) and Request→OnNext→Request recursion stays at depth 1 (rule 3.3).
//
// All callers of one Trampoline must pass the same drain function, and drain
// must not panic (recover inside it).
type Trampoline struct {
	wip atomic.Int64
}

// Run runs drain now, or schedules one more pass of the drain that is running.
func (t *Trampoline) Run(drain func()) {
	if t.wip.Add(1) != 1 {
		return
	}
	missed := int64(1)
	for {
		drain()
		missed = t.wip.Add(-missed)
		if missed == 0 {
			return
		}
	}
}
