package pulsar

import (
	"sync/atomic"
	"testing"
	"time"
)

// A delayed function runs exactly once, and has run when stop returns, whether its timer
// fires before, during or after stop (the race that FuzzEngineFronts found: a timer that
// fired while stop was taking the pending set ran neither f nor now).
func TestTimerSetRunsEachOnceBeforeStopReturns(t *testing.T) {
	for i := range 3000 {
		var ts timerSet
		var runs atomic.Int32
		delay := time.Duration(i%50) * time.Microsecond
		ts.after(delay, func() { runs.Add(1) }, func() { runs.Add(1) })
		if i%3 == 0 {
			time.Sleep(delay)
		}
		ts.stop()
		if n := runs.Load(); n != 1 {
			t.Fatalf("iteration %d (delay %v): ran %d times by the time stop returned, want 1", i, delay, n)
		}
	}
}

// After stop, a new delayed function runs at once, before after returns.
func TestTimerSetAfterStopRunsNow(t *testing.T) {
	var ts timerSet
	ts.stop()
	var ran atomic.Bool
	ts.after(time.Hour, func() { t.Error("the delayed function ran") }, func() { ran.Store(true) })
	if !ran.Load() {
		t.Fatal("now did not run before after returned")
	}
}
